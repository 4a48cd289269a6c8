package protocol

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/perflab/perflab/trace"
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
	if _, err := os.Stat(path); err == nil {
		return path
	}
	w, err := trace.Create(path+".tmp", trace.Meta{Source: "ebpf", Protocol: "venus", PayloadBytes: 16}, &trace.WriterOptions{FlushInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	head := func(flags uint32) []byte {
		p := make([]byte, 16)
		binary.LittleEndian.PutUint32(p[0:], 0x56504C53)
		binary.LittleEndian.PutUint32(p[4:], 16)
		binary.LittleEndian.PutUint32(p[8:], 39)
		binary.LittleEndian.PutUint32(p[12:], flags)
		return p
	}
	req, rep := head(1), head(2)
	ts := int64(1e9)
	for i := 0; i < n/2; i++ {
		conn := uint64(i%4 + 1)
		e := trace.Event{TS: ts, Dur: 2000, PID: 100, TID: 100 + uint32(conn), Conn: conn, Dir: trace.DirSend, Op: trace.OpSendto,
			Source: trace.SourceEBPF, Bytes: 24, Payload: req}
		if err := w.WriteEvent(&e); err != nil {
			b.Fatal(err)
		}
		e.TS, e.Dur, e.Dir, e.Op, e.Payload = ts+3000, 40000+int64(i%7)*1000, trace.DirRecv, trace.OpRecvfrom, rep
		if err := w.WriteEvent(&e); err != nil {
			b.Fatal(err)
		}
		if i%50 == 0 {
			if err := w.WriteMarker(&trace.Marker{TS: ts, PID: 100, Name: "token", Value: int64(i / 50)}); err != nil {
				b.Fatal(err)
			}
		}
		ts += 50000
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		b.Fatal(err)
	}
	return path
}
