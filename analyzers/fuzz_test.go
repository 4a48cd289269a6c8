package analyzers

import (
	"testing"

	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// FuzzAnalyzeEvents feeds arbitrary events and markers (times, sizes, directions, operations,
// payload heads) through the decoders and the analyses: no panic, bounded output.
func FuzzAnalyzeEvents(f *testing.F) {
	f.Add([]byte("\x01\x00\x10\x00SLPV\x10\x00\x00\x00\x27\x00\x00\x00\x01\x00\x00\x00"), int64(1000), int64(40000))
	f.Add([]byte("\x02\x01\x09\x00\x0e\x00\x00\x00\x00\x00\x00\x00\x00"), int64(-5), int64(1<<62))
	f.Add([]byte("\x0c\x02\x04\x00*1\r\n\x0d\x01\x00\x00"), int64(0), int64(-1))
	f.Fuzz(func(t *testing.T, data []byte, ts0, step int64) {
		a, err := newAnalyzer(Options{})
		if err != nil {
			t.Fatal(err)
		}
		d, err := protocol.NewDecoder(0, nil, &sink{a: a})
		if err != nil {
			t.Fatal(err)
		}
		a.begin(0, "fuzz", trace.Meta{})
		ts := ts0
		for len(data) >= 4 {
			op, dir, n, kind := trace.Op(data[0]%16), trace.Dir(data[1]%3), int(data[2]), data[3]
			data = data[4:]
			head := data[:min(n, len(data))]
			data = data[len(head):]
			ts += step
			switch kind % 4 {
			case 0, 1:
				ev := trace.Event{TS: ts, Dur: step / 2, PID: uint32(kind), Conn: uint64(kind % 3), Dir: dir, Op: op,
					Bytes: int64(n) * int64(kind%5), Payload: head, Command: uint32(n), ReqID: uint64(kind % 7)}
				if kind%4 == 1 {
					ev.Source = trace.SourceTracer
				}
				a.event(&ev)
				d.Event(&ev)
			case 2:
				a.marker(&trace.Marker{TS: ts, Dur: step, PID: uint32(kind), Name: []string{"token", "phase"}[n%2], Text: string(head)})
			case 3:
				a.connection(&trace.Connection{ID: uint64(kind % 3), PID: uint32(kind), Local: string(head)})
			}
		}
		d.Flush()
		a.end(0, trace.Recovery{Clean: true}, d)
		a.finish()
		if len(a.s.Histogram) > 64 || len(a.s.Timeline) > maxSeries {
			t.Fatalf("unbounded output: %d buckets, %d points", len(a.s.Histogram), len(a.s.Timeline))
		}
	})
}
