package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestAnalyzeRecordMemory checks that --record-memory changes no figure: the real llama.cpp
// client trace analysed with 1 MiB of records (its records go through the temporary file
// only past that, so the analyzers' tests take smaller budgets) and with no limit gives the
// default's JSON; a negative budget is bad input.
func TestAnalyzeRecordMemory(t *testing.T) {
	path := filepath.Join("..", "..", "fixtures", "real", "llamacpp", "client-default.plt")
	code, want, errs := runAnalyzeIn(t, "--format", "json", path)
	if code != 0 {
		t.Fatalf("default: exit %d: %s", code, errs)
	}
	for _, mib := range []string{"1", "0"} {
		code, got, errs := runAnalyzeIn(t, "--format", "json", "--record-memory", mib, path)
		if code != 0 {
			t.Fatalf("--record-memory %s: exit %d: %s", mib, code, errs)
		}
		if got != want {
			t.Errorf("--record-memory %s: the JSON differs from the default's", mib)
		}
	}
	code, _, errs = runAnalyzeIn(t, "--record-memory", "-1", path)
	if code != 2 || !strings.Contains(errs, "--record-memory -1") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Errorf("--record-memory -1: exit %d, stderr %q; want 2 and one line naming the flag", code, errs)
	}
}
