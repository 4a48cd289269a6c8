package analyzers

import (
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/perflab/perflab/protocol"
)

// BenchmarkAnalyzeBounded analyses the benchmark trace (benchTrace) at each size of
// PERFLAB_BENCH_BOUNDED_EVENTS (comma-separated; default 2,000,000 and 20,000,000) with
// PERFLAB_BENCH_RECORD_MIB MiB of records in memory (Options.RecordMemory; default 8) under a
// Go memory limit of PERFLAB_BENCH_GOMEMLIMIT_MIB MiB (default 128, less than the 20 M-event
// trace's 534 MB), and reports the peak live heap (sampled every millisecond, garbage
// included) in all and per event, the records written to the temporary file, and events/s.
// Bounded memory shows as a peak heap that stays put while the trace grows, so its bytes
// per event fall as the trace lengthens.
func BenchmarkAnalyzeBounded(b *testing.B) {
	sizes := []int{2_000_000, 20_000_000}
	if v := os.Getenv("PERFLAB_BENCH_BOUNDED_EVENTS"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				b.Fatalf("PERFLAB_BENCH_BOUNDED_EVENTS: %q is not a count of events", f)
			}
			sizes = append(sizes, n)
		}
	}
	envMiB := func(name string, def int64) int64 {
		if v, err := strconv.ParseInt(os.Getenv(name), 10, 64); err == nil && v > 0 {
			return v
		}
		return def
	}
	recMiB, limitMiB := envMiB("PERFLAB_BENCH_RECORD_MIB", 8), envMiB("PERFLAB_BENCH_GOMEMLIMIT_MIB", 128)
	for _, n := range sizes {
		b.Run("events="+strconv.Itoa(n), func(b *testing.B) {
			path := benchTrace(b, n)
			old := debug.SetMemoryLimit(limitMiB << 20)
			defer debug.SetMemoryLimit(old)
			runtime.GC()
			var base runtime.MemStats
			runtime.ReadMemStats(&base)
			b.ResetTimer()
			var peak uint64
			var spilled int64
			for i := 0; i < b.N; i++ {
				stop := make(chan struct{})
				var wg sync.WaitGroup
				wg.Add(1)
				go peakHeap(stop, &peak, &wg)
				a, err := analyze(protocol.Files([]string{path}, nil), Options{RecordMemory: recMiB << 20}, nil)
				close(stop)
				wg.Wait()
				if err != nil {
					b.Fatal(err)
				}
				if a.s.Events != uint64(n) || a.s.RoundTrips.Count != uint64(n/2) || len(a.s.Units) != 1 {
					b.Fatalf("events %d, round trips %d, units %d", a.s.Events, a.s.RoundTrips.Count, len(a.s.Units))
				}
				spilled = a.budget.spilled
			}
			b.StopTimer()
			sec := b.Elapsed().Seconds() / float64(b.N)
			live := float64(peak - min(peak, base.HeapAlloc))
			b.ReportMetric(float64(n)/sec, "events/s")
			b.ReportMetric(live/float64(n), "peak-B/event")
			b.ReportMetric(live/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(spilled)/(1<<20), "spilled-MiB")
		})
	}
}
