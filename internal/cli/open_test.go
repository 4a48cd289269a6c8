package cli

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// countOpens makes openInputFile count the opens of each path until the test ends.
func countOpens(t *testing.T) map[string]int {
	t.Helper()
	var mu sync.Mutex
	opens := map[string]int{}
	old := openInputFile
	openInputFile = func(path string) (*os.File, error) {
		mu.Lock()
		opens[path]++
		mu.Unlock()
		return old(path)
	}
	t.Cleanup(func() { openInputFile = old })
	return opens
}

// TestOneOpenPerTrace: every verb that reads traces opens each of them once, and the layers
// below take the open file, not its path: analyze (auto-detected and with a protocol given, and
// its pprof and perfetto formats), compare, gate, model, and the exports that decode (pprof,
// perfetto, perfetto-proto, parquet).
func TestOneOpenPerTrace(t *testing.T) {
	dir := t.TempDir()
	base, co := filepath.Join(dir, "base.plt"), filepath.Join(dir, "co.plt")
	for src, dst := range map[string]string{"testdata/model/baseline-1ms.plt": base, "testdata/model/coalesce-1ms.plt": co} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		args  []string
		files []string
	}{
		{"analyze", []string{"analyze", "--format", "json", base, co}, []string{base, co}},
		{"analyze venus", []string{"analyze", "--format", "json", "--protocol", "venus", base}, []string{base}},
		{"compare", []string{"compare", "--format", "json", base, co}, []string{base, co}},
		{"gate", []string{"gate", "--baseline", base, "--format", "json", co}, []string{base, co}},
		{"model", []string{"model", "--from", base, "--json"}, []string{base}},
		{"analyze pprof", []string{"analyze", "--format", "pprof", "-o", filepath.Join(dir, "a.pb.gz"), base, co}, []string{base, co}},
		{"analyze perfetto", []string{"analyze", "--format", "perfetto", "-o", filepath.Join(dir, "a.json"), base, co}, []string{base, co}},
		{"export pprof", []string{"export", "--format", "pprof", "-o", filepath.Join(dir, "e.pb.gz"), base}, []string{base}},
		{"export perfetto", []string{"export", "--format", "perfetto", "-o", filepath.Join(dir, "e.json"), base}, []string{base}},
		{"export perfetto-proto", []string{"export", "--format", "perfetto-proto", "-o", filepath.Join(dir, "e.pftrace"), base}, []string{base}},
		{"export parquet", []string{"export", "--format", "parquet", "-o", filepath.Join(dir, "pq"), base, co}, []string{base, co}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opens := countOpens(t)
			code, _, errs := gateCLI(t, tc.args...)
			if code == 2 {
				t.Fatalf("perflab %v: exit 2: %s", tc.args, errs)
			}
			for _, f := range tc.files {
				if opens[f] != 1 {
					t.Errorf("perflab %v opened %s %d times, want once", tc.args, f, opens[f])
				}
			}
			if len(opens) != len(tc.files) {
				t.Errorf("perflab %v opened %v, want only %v", tc.args, opens, tc.files)
			}
		})
	}
}
