package analyzers

import (
	"os"
	"strconv"
	"testing"

	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// nopSink takes what a scan yields and does nothing with it.
type nopSink struct{}

func (nopSink) Begin(int, string, trace.Meta)                 {}
func (nopSink) Record(*trace.Record)                          {}
func (nopSink) Message(*protocol.Message)                     {}
func (nopSink) Answered(*protocol.Message, protocol.Answered) {}
func (nopSink) End(int, trace.Recovery, *protocol.Decoder)    {}

// BenchmarkScanPiped runs analyze's reading side alone: the scan (reading, decoding, pairing)
// of BenchmarkAnalyze's trace through the pipe into an analysis that does nothing. Its
// events/s bound what analyze can reach.
func BenchmarkScanPiped(b *testing.B) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("PERFLAB_BENCH_EVENTS")); err == nil && v > 0 {
		n = v
	}
	path := benchTrace(b, n)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := scanPiped(protocol.Files([]string{path}, nil), nil, nopSink{}, pipeBatch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
