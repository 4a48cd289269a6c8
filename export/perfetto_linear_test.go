package export

import (
	"io"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/fixtures"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// connectionsTrace writes a trace of n short connections (fixtures.Connections) in dir.
func connectionsTrace(tb testing.TB, dir string, n int, heads bool) string {
	tb.Helper()
	path := filepath.Join(dir, "conns-"+strconv.Itoa(n)+"-"+strconv.FormatBool(heads)+".plt")
	w, err := trace.Create(path, fixtures.Meta("ebpf", "venus"), fixtures.Options())
	if err != nil {
		tb.Fatal(err)
	}
	if err := fixtures.Connections(w, n, heads); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return path
}

// allocated returns the bytes fn allocates.
func allocated(fn func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// TestPerfettoLinearInConnections: 4× the connections may cost at most 8× the bytes allocated
// (linear is 4×; the quadratic description of the connections cost 16× and more).
func TestPerfettoLinearInConnections(t *testing.T) {
	dir := t.TempDir()
	small, large := connectionsTrace(t, dir, 2000, true), connectionsTrace(t, dir, 8000, true)
	run := func(path string) uint64 {
		return allocated(func() {
			if err := Perfetto(io.Discard, protocol.Files([]string{path}, nil), analyzers.Options{}); err != nil {
				t.Fatal(err)
			}
		})
	}
	run(small) // warm up lazily built tables
	a, b := run(small), run(large)
	t.Logf("allocated: %d bytes for 2000 connections, %d for 8000 (%.1f×)", a, b, float64(b)/float64(a))
	if b > 8*a {
		t.Errorf("4× the connections allocated %.1f× the bytes (%d → %d): not linear", float64(b)/float64(a), a, b)
	}
}

// BenchmarkPerfettoConnections exports a trace of 150,000 short connections; the issue's
// budget is 2 s and 200 MB.
func BenchmarkPerfettoConnections(b *testing.B) {
	path := connectionsTrace(b, b.TempDir(), 150_000, true)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := Perfetto(io.Discard, protocol.Files([]string{path}, nil), analyzers.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
