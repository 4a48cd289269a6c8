package protocol

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/perflab/perflab/fixtures"
)

// BenchmarkMessages decodes (auto detection, no analysis) a trace of PERFLAB_BENCH_EVENTS events
// (default 1,000,000) shaped like analyze's benchmark trace: a client's 24-byte VPLS requests
// and replies on 4 connections, 16-byte payload heads, a token marker every 50 round trips.
func BenchmarkMessages(b *testing.B) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("PERFLAB_BENCH_EVENTS")); err == nil && v > 0 {
		n = v
	}
	path := pingPongTrace(b, n)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var msgs int
		if err := Messages(Files([]string{path}, nil), nil, func(*Message) error { msgs++; return nil }); err != nil {
			b.Fatal(err)
		}
		if msgs != n {
			b.Fatalf("%d messages, want %d", msgs, n)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// pingPongTrace writes (once per process and size, in the temp directory) the trace of
// BenchmarkMessages.
func pingPongTrace(b *testing.B, n int) string {
	b.Helper()
	path := filepath.Join(os.TempDir(), fmt.Sprintf("perflab-bench-messages-%d.plt", n))
	if err := fixtures.WriteBenchTrace(path, n); err != nil {
		b.Fatal(err)
	}
	return path
}
