package reports

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/perflab/perflab/fixtures"
	"github.com/perflab/perflab/trace"
)

// pingpongTrace copies the committed fixture trace fixtures/traces/pingpong.plt to dir and
// returns its path.
func pingpongTrace(t testing.TB, dir string) string {
	t.Helper()
	b, err := fixtures.FS.ReadFile("traces/pingpong.plt")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "pingpong.plt")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// venusTrace writes the fixtures package's venus-like trace (a load phase, then tokens) seen by
// source to dir/name and returns its path.
func venusTrace(t testing.TB, dir, name string, source trace.Source, tokens int) string {
	t.Helper()
	path := filepath.Join(dir, name)
	w, err := trace.Create(path, fixtures.Meta(source.String(), "venus"), fixtures.Options())
	if err != nil {
		t.Fatal(err)
	}
	if err := fixtures.Venus(w, fixtures.VenusOptions{Tokens: tokens, Uploads: 4, Seed: 1, Source: source}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
