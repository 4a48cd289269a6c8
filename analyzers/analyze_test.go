package analyzers

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/perflab/perflab/fixtures"
	"github.com/perflab/perflab/trace"
)

// writeTrace writes a trace made by gen into a temporary file and returns its path.
func writeTrace(t testing.TB, name string, meta trace.Meta, gen func(w *trace.Writer) error) string {
	t.Helper()
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, meta, fixtures.Options())
	if err != nil {
		t.Fatal(err)
	}
	if err := gen(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func fixturePath(t testing.TB, name string) string {
	t.Helper()
	b, err := fixtures.FS.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), filepath.Base(name))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestAnalyzeDump(t *testing.T) {
	p := fixturePath(t, "traces/pingpong.plt")
	v := writeTrace(t, "venus.plt", fixtures.Meta("tracer", "venus"), func(w *trace.Writer) error {
		return fixtures.Venus(w, fixtures.VenusOptions{Tokens: 8, Uploads: 4})
	})
	e := writeTrace(t, "venus-ebpf.plt", fixtures.Meta("ebpf", "venus"), func(w *trace.Writer) error {
		return fixtures.Venus(w, fixtures.VenusOptions{Tokens: 8, Uploads: 4, Source: trace.SourceEBPF})
	})
	for _, path := range []string{p, v, e} {
		s, err := Analyze([]string{path}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.MarshalIndent(s, "", " ")
		t.Logf("%s", b)
	}
}
