package analyzers

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/perflab/perflab/fixtures"
	"github.com/perflab/perflab/protocol"
)

// benchTrace writes (once per process) an eBPF-style trace of n events: a client's sendto of a
// 24-byte VPLS request (vkWaitForFences, reply wanted) and recvfrom of the 24-byte reply, on 4
// connections, with 16-byte payload heads and a token marker every 50 round trips.
func benchTrace(b *testing.B, n int) string {
	b.Helper()
	path := filepath.Join(os.TempDir(), fmt.Sprintf("perflab-bench-analyze-%d.plt", n))
	if err := fixtures.WriteBenchTrace(path, n); err != nil {
		b.Fatal(err)
	}
	return path
}

// peakHeap samples the live heap every millisecond until stop is closed.
func peakHeap(stop <-chan struct{}, peak *uint64, wg *sync.WaitGroup) {
	defer wg.Done()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		metrics.Read(s)
		if v := s[0].Value.Uint64(); v > *peak {
			*peak = v
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// BenchmarkAnalyze analyses a trace of PERFLAB_BENCH_EVENTS events (default 1,000,000) and
// reports events/s and the peak live heap per event.
func BenchmarkAnalyze(b *testing.B) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("PERFLAB_BENCH_EVENTS")); err == nil && v > 0 {
		n = v
	}
	path := benchTrace(b, n)
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	b.ResetTimer()
	var peak uint64
	for i := 0; i < b.N; i++ {
		s := analyzeWatchingHeap(b, path, &peak)
		if s.Events != uint64(n) || s.RoundTrips.Count != uint64(n/2) {
			b.Fatalf("events %d, round trips %d", s.Events, s.RoundTrips.Count)
		}
	}
	b.StopTimer()
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(n)/sec, "events/s")
	b.ReportMetric(float64(peak-min(peak, base.HeapAlloc))/float64(n), "peak-B/event")
}

// analyzeWatchingHeap analyzes the trace at path while peakHeap raises peak to the live heap's
// highest.
func analyzeWatchingHeap(b *testing.B, path string, peak *uint64) *Summary {
	b.Helper()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go peakHeap(stop, peak, &wg)
	s, err := Analyze(protocol.Files([]string{path}, nil), Options{})
	close(stop)
	wg.Wait()
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkAnalyzeBack times the analysis side alone: the scan of a trace of
// PERFLAB_BENCH_EVENTS events (default 300,000) is taken once into the pipe's batches, then
// each iteration hands them to a new analyzer, as the pipe's goroutine does. It reports the
// events/s of that side, which bounds analyze's when the scan runs on another CPU.
func BenchmarkAnalyzeBack(b *testing.B) {
	n := 300_000
	if v, err := strconv.Atoi(os.Getenv("PERFLAB_BENCH_EVENTS")); err == nil && v > 0 {
		n = v
	}
	batches := captureScan(b, benchTrace(b, n))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a, err := newAnalyzer(Options{})
		if err != nil {
			b.Fatal(err)
		}
		out := &sink{a: a}
		for _, bt := range batches {
			bt.feed(out)
		}
		a.finish()
		a.loopFinish()
		if a.s.Events != uint64(n) || a.s.RoundTrips.Count != uint64(n/2) {
			b.Fatalf("events %d, round trips %d", a.s.Events, a.s.RoundTrips.Count)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(n)/(b.Elapsed().Seconds()/float64(b.N)), "events/s")
}

// captureScan scans the trace at path into the batches a pipe would hand its goroutine, kept.
func captureScan(b *testing.B, path string) []*batch {
	b.Helper()
	p := &pipe{size: pipeBatch, full: make(chan *batch, pipeDepth), free: make(chan *batch, 1), done: make(chan struct{})}
	p.cur = &batch{}
	var kept []*batch
	go func() {
		defer close(p.done)
		for bt := range p.full {
			kept = append(kept, bt)
			p.free <- &batch{}
		}
	}()
	err := protocol.Scan(protocol.Files([]string{path}, nil), nil, p)
	p.close()
	if err != nil {
		b.Fatal(err)
	}
	return kept
}
