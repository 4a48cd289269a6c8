package analyzers

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/perflab/perflab/protocol"
)

// TestPipeSameReport: the analysis on a goroutine of its own (pipe) reports exactly what it
// reports called directly by the scan, on the real traces (messages with command batches,
// replies answering several requests) and on several traces at once.
func TestPipeSameReport(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(realDir, "*", "*.plt"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no real traces under %s: %v", realDir, err)
	}
	report := func(ins []protocol.Input, piped bool) string {
		t.Helper()
		a, err := newAnalyzer(Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := scanPiped(ins, a.opt.Spec, &sink{a: a}, piped); err != nil {
			t.Fatal(err)
		}
		a.finish()
		a.loopFinish()
		b, err := json.Marshal(a.s)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	sets := [][]string{paths}
	for _, p := range paths {
		sets = append(sets, []string{p})
	}
	for _, set := range sets {
		ins := protocol.Files(set, nil)
		if got, want := report(ins, true), report(ins, false); got != want {
			t.Errorf("%v: piped report differs:\n%s\nwant\n%s", set, got[:min(len(got), 2000)], want[:min(len(want), 2000)])
		}
	}
}
