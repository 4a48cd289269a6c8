package export

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/perflab/perflab/fixtures"
	"github.com/perflab/perflab/trace"
)

// Venus command ids used by the synthetic traces (protocol/protocols/venus.json).
const (
	vkAllocateMemory          = 21
	vkQueueSubmit             = 18
	vkFlushMappedMemoryRanges = 25
	vkWaitForFences           = 39
)

// venusFrame returns a Venus frame: the 8-byte header (magic "VPLS" little-endian, payload size)
// and a payload of one command (type, flags) padded to size bytes in total.
func venusFrame(cmd uint32, wantReply bool, size int) []byte {
	b := make([]byte, size)
	binary.LittleEndian.PutUint32(b[0:], 0x56504C53)
	binary.LittleEndian.PutUint32(b[4:], uint32(size-8))
	binary.LittleEndian.PutUint32(b[8:], cmd)
	if wantReply {
		binary.LittleEndian.PutUint32(b[12:], 1)
	}
	return b
}

// synthTrace describes a small Venus-like recording: a load phase of allocations, then tokens
// each made of a flush, a submit and a wait for fences, the last token pipelined (two waits in
// flight). Times are fixed, so outputs are deterministic.
type synthTrace struct {
	tokens int
	tracer bool // write tracer frame and round-trip events instead of system calls
}

// write writes the trace to dir/name and returns its path.
func (st synthTrace) write(t testing.TB, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	src, srcName := trace.SourceEBPF, "ebpf"
	if st.tracer {
		src, srcName = trace.SourceTracer, "tracer"
	}
	meta := trace.Meta{
		Version: "test", Host: "lab", Kernel: "6.18.0",
		Start:     time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		StartMono: 1_000_000_000,
		Command:   []string{"/usr/bin/venus-client", "--tokens", "4"},
		PIDs:      []uint32{100}, Source: srcName, PayloadBytes: 64,
		Labels: map[string]string{"mode": "baseline", "note": "<b>bold</b>"},
	}
	w, err := trace.Create(path, meta, nil)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	const pid, tid = 100, 100
	now := int64(1_000_000_000)
	must(w.WriteConnection(&trace.Connection{ID: 1, Family: trace.FamilyTCP, Local: "127.0.0.1:40000",
		Remote: "127.0.0.1:5556", PID: pid, FirstSeen: now, LastSeen: now}))
	seed := uint32(1)
	jitter := func(n int64) int64 { // deterministic pseudo-random 0..n-1
		seed = seed*1664525 + 1013904223
		return int64(seed>>8) % n
	}
	var req uint64
	send := func(cmd uint32, reply bool, size int) uint64 {
		req++
		d := 4_000 + jitter(3_000)
		e := trace.Event{TS: now, Dur: d, PID: pid, TID: tid, Conn: 1, Dir: trace.DirSend, Op: trace.OpSendmsg,
			Source: src, Bytes: int64(size), Payload: venusFrame(cmd, reply, size)[:min(size, 64)]}
		if st.tracer {
			e.Op, e.Command, e.ReqID = trace.OpFrameSend, cmd, req
		}
		must(w.WriteEvent(&e))
		now += d + 500
		return req
	}
	recv := func(cmd uint32, id uint64, sent int64) {
		wait := 40_000 + jitter(30_000)
		if jitter(10) == 0 {
			wait += 400_000 // a slow population
		}
		e := trace.Event{TS: now, Dur: wait, PID: pid, TID: tid, Conn: 1, Dir: trace.DirRecv, Op: trace.OpRecvmsg,
			Source: src, Bytes: 24, Payload: venusFrame(cmd, false, 24)}
		if st.tracer {
			e.Op, e.Command, e.ReqID = trace.OpFrameRecv, cmd, id
		}
		must(w.WriteEvent(&e))
		now += wait
		if st.tracer {
			must(w.WriteEvent(&trace.Event{TS: sent, Dur: now - sent, PID: pid, TID: tid, Conn: 1,
				Op: trace.OpRoundTrip, Source: src, Command: cmd, ReqID: id}))
		}
		now += 2_000
	}
	roundTrip := func(cmd uint32, size int) {
		start := now
		id := send(cmd, true, size)
		recv(cmd, id, start)
	}

	loadStart := now
	for range 6 {
		roundTrip(vkAllocateMemory, 48)
	}
	must(w.WriteMarker(&trace.Marker{TS: loadStart, Dur: now - loadStart, PID: pid, TID: tid, Name: "phase", Text: "load"}))
	genStart := now
	for tok := range st.tokens {
		must(w.WriteMarker(&trace.Marker{TS: now, PID: pid, TID: tid, Name: "token", Value: int64(tok)}))
		send(vkFlushMappedMemoryRanges, false, 4096)
		send(vkQueueSubmit, false, 256)
		if tok == st.tokens-1 {
			// Pipelined: two waits in flight at once.
			s1 := now
			a := send(vkWaitForFences, true, 40)
			s2 := now
			b := send(vkWaitForFences, true, 40)
			recv(vkWaitForFences, a, s1)
			recv(vkWaitForFences, b, s2)
		} else {
			roundTrip(vkWaitForFences, 40)
		}
		now += 100_000 // compute between tokens
	}
	must(w.WriteMarker(&trace.Marker{TS: genStart, Dur: now - genStart, PID: pid, TID: tid, Name: "phase", Text: "generate"}))
	// A failed call and a second thread on a unix socket.
	must(w.WriteEvent(&trace.Event{TS: now, Dur: 800, PID: pid, TID: tid, Conn: 1, Dir: trace.DirRecv,
		Op: trace.OpRecvmsg, Source: src, Bytes: 0, Errno: 11}))
	must(w.WriteConnection(&trace.Connection{ID: 2, Family: trace.FamilyUnix, Local: "/tmp/venus.sock",
		Remote: "", PID: pid, FirstSeen: now, LastSeen: now}))
	must(w.WriteEvent(&trace.Event{TS: now + 1000, Dur: 3000, PID: pid, TID: tid + 1, Conn: 2, Dir: trace.DirSend,
		Op: trace.OpWrite, Source: src, Bytes: 16, Payload: []byte("hello <script>")}))
	must(w.Close())
	return path
}

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
