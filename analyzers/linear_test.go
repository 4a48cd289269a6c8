package analyzers

import (
	"encoding/json"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

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

// TestAnalyzeLinearInConnections: 4× the connections may cost at most 8× the bytes allocated
// (linear is 4×), with payload heads (the protocol known from the first bytes) and without (every
// candidate decoder tried on each connection). With heads it also bounds the bytes per
// connection, which the per-connection histograms once took to several kilobytes.
func TestAnalyzeLinearInConnections(t *testing.T) {
	dir := t.TempDir()
	for _, heads := range []bool{true, false} {
		small, large := connectionsTrace(t, dir, 2000, heads), connectionsTrace(t, dir, 8000, heads)
		run := func(path string) uint64 {
			var a, b runtime.MemStats
			runtime.ReadMemStats(&a)
			if _, err := Analyze(protocol.Files([]string{path}, nil), Options{}); err != nil {
				t.Fatal(err)
			}
			runtime.ReadMemStats(&b)
			return b.TotalAlloc - a.TotalAlloc
		}
		run(small)
		a, b := run(small), run(large)
		t.Logf("heads %v: allocated %d bytes for 2000 connections, %d for 8000 (%.1f×), %d bytes per connection", heads, a, b, float64(b)/float64(a), b/8000)
		if b > 8*a {
			t.Errorf("heads %v: 4× the connections allocated %.1f× the bytes (%d → %d): not linear", heads, float64(b)/float64(a), a, b)
		}
		if per := b / 8000; heads && per > 6144 {
			t.Errorf("%d bytes allocated per connection, want at most 6144", per)
		}
	}
}

// BenchmarkAnalyzeConnections analyzes a trace of 150,000 short connections, with payload heads
// and without (every candidate protocol tried, then raw); the budget is 2 s and 200 MB, and
// peak-heap-B is the largest live heap seen (sampled every ms, garbage included).
func BenchmarkAnalyzeConnections(b *testing.B) {
	for _, heads := range []bool{true, false} {
		b.Run("heads="+strconv.FormatBool(heads), func(b *testing.B) {
			path := connectionsTrace(b, b.TempDir(), 150_000, heads)
			runtime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			var peak uint64
			for i := 0; i < b.N; i++ {
				analyzeWatchingHeap(b, path, &peak)
			}
			b.ReportMetric(float64(peak), "peak-heap-B")
		})
	}
}

// TestAnalyzeDeterministic: the same trace gives the same report, also where the end of the
// trace flushes many connections at once (their order once followed a map's).
func TestAnalyzeDeterministic(t *testing.T) {
	path := connectionsTrace(t, t.TempDir(), 3000, false)
	var first string
	for i := 0; i < 4; i++ {
		s, err := Analyze(protocol.Files([]string{path}, nil), Options{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = string(b)
		} else if string(b) != first {
			t.Fatalf("run %d differs from run 0", i)
		}
	}
}
