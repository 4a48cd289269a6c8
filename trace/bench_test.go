package trace

import (
	"bytes"
	"io"
	"math/rand"
	"testing"
	"time"
)

// pingPongEvents returns n events of one client thread on one connection alternating a send and
// a blocking receive, RTT 40-60 µs, as eBPF records a ping-pong, with payload heads of head bytes.
func pingPongEvents(n, head int) []Event {
	rng := rand.New(rand.NewSource(1))
	evs := make([]Event, n)
	t := int64(1e12)
	for i := range evs {
		e := Event{TS: t, PID: 4242, TID: 4243, Conn: 1, Source: SourceEBPF, Bytes: 24}
		if i%2 == 0 {
			e.Dir, e.Op, e.Dur = DirSend, OpSendto, 2000+int64(rng.Intn(1000))
			t += e.Dur
		} else {
			e.Dir, e.Op, e.Dur = DirRecv, OpRecvfrom, 40_000+int64(rng.Intn(20_000))
			t += e.Dur + 1000 + int64(rng.Intn(1000))
		}
		if head > 0 {
			e.Payload = make([]byte, head)
			rng.Read(e.Payload)
		}
		evs[i] = e
	}
	return evs
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

func benchWrite(b *testing.B, head int) {
	evs := pingPongEvents(1<<16, head)
	var cw countWriter
	w, err := NewWriter(&cw, testMeta, &WriterOptions{FlushInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	start := cw.n
	b.ReportAllocs()
	b.ResetTimer()
	t0 := time.Now()
	for i := 0; i < b.N; i++ {
		if err := w.WriteEvent(&evs[i&(len(evs)-1)]); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	el := time.Since(t0)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/el.Seconds(), "events/s")
	b.ReportMetric(float64(cw.n-start)/float64(b.N), "bytes/event")
	w.Close()
}

// BenchmarkWriter writes ping-pong events without payload heads.
func BenchmarkWriter(b *testing.B) { benchWrite(b, 0) }

// BenchmarkWriterPayload64 writes ping-pong events with 64-byte payload heads.
func BenchmarkWriterPayload64(b *testing.B) { benchWrite(b, 64) }

func benchRead(b *testing.B, head int) {
	evs := pingPongEvents(1<<20, head)
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testMeta, &WriterOptions{FlushInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	for i := range evs {
		if err := w.WriteEvent(&evs[i]); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	open := func() *Reader {
		r, err := NewReader(bytes.NewReader(data))
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	r := open()
	var rec Record
	b.ReportAllocs()
	b.ResetTimer()
	t0 := time.Now()
	for i := 0; i < b.N; i++ {
		err := r.Next(&rec)
		if err == io.EOF {
			r = open()
			err = r.Next(&rec)
		}
		if err != nil || rec.Kind != KindEvent {
			b.Fatal(err, rec.Kind)
		}
	}
	el := time.Since(t0)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/el.Seconds(), "events/s")
	b.ReportMetric(float64(len(data))/float64(len(evs)), "bytes/event")
}

// BenchmarkReader reads ping-pong events without payload heads.
func BenchmarkReader(b *testing.B) { benchRead(b, 0) }

// BenchmarkReaderPayload64 reads ping-pong events with 64-byte payload heads.
func BenchmarkReaderPayload64(b *testing.B) { benchRead(b, 64) }
