// Package tracer is venusd's in-process tracer: one trace event per frame a venusd endpoint
// sends or receives (the shm transport included, which no system-call probe can see), one per
// completed round trip, markers, and VENUS_TRACE_NET's per-100 summaries.
package tracer

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/perflab/perflab/trace"
	"github.com/perflab/perflab/venusd/wire"
)

var nextConnID atomic.Uint64

// netSummary is VENUS_TRACE_NET's per-100 summary of one direction.
type netSummary struct {
	mu     sync.Mutex
	name   string
	calls  int
	sumUS  float64
	bytes  int64
	maxUS  float64
	totalN int64
}

func (s *netSummary) add(w io.Writer, dur time.Duration, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	us := float64(dur) / 1e3
	s.calls++
	s.totalN++
	s.sumUS += us
	s.bytes += int64(n)
	s.maxUS = max(s.maxUS, us)
	if s.calls == 100 {
		fmt.Fprintf(w, "[Net] %s summary: calls=%d avg_us=%.0f avg_bytes=%d max_us=%.0f\n",
			s.name, s.totalN, s.sumUS/100, s.bytes/100, s.maxUS)
		s.calls, s.sumUS, s.bytes, s.maxUS = 0, 0, 0, 0
	}
}

// Tracer records the frames of one connection. A Tracer without a trace writer records
// nothing but the summaries.
type Tracer struct {
	w            *trace.Writer
	conn         uint64
	payloadBytes int
	pid          uint32
	lost         atomic.Uint64
	summaries    bool
	log          io.Writer
	send, recv   netSummary
}

// New returns the tracer of a new connection, writing to w (nil: no trace), keeping the first
// payloadBytes of each frame (0: 64), printing VENUS_TRACE_NET summaries (getenv) to log.
func New(w *trace.Writer, payloadBytes int, getenv func(string) string, log io.Writer) *Tracer {
	if payloadBytes <= 0 {
		payloadBytes = 64
	}
	payloadBytes = min(payloadBytes, trace.MaxPayload)
	t := &Tracer{w: w, conn: nextConnID.Add(1), payloadBytes: payloadBytes, pid: uint32(os.Getpid()), log: log}
	t.send.name, t.recv.name = "send", "recv"
	if v := getenv("VENUS_TRACE_NET"); v != "" && v != "0" && log != nil {
		t.summaries = true
	}
	return t
}

// Timed reports whether frames need their times: a trace is written or summaries printed.
func (t *Tracer) Timed() bool { return t.w != nil || t.summaries }

// Connection writes the connection record (again with LastSeen on close).
func (t *Tracer) Connection(fam trace.Family, local, remote string, first, last int64) {
	if t.w == nil {
		return
	}
	if err := t.w.WriteConnection(&trace.Connection{ID: t.conn, Family: fam, Local: local, Remote: remote,
		PID: t.pid, FirstSeen: first, LastSeen: last}); err != nil {
		t.lost.Add(1)
	}
}

// frameKey returns the command type and request id that label a frame (header included; a
// prefix is enough): the first command's type, and the request id of the first command that
// wants a reply (of a request) or of the first non-deferred record (of a reply), else the first
// command's.
func frameKey(frame []byte) (wire.CommandType, uint32) {
	if len(frame) < wire.HeaderSize+wire.CmdHeaderSize {
		return 0, 0
	}
	first := wire.CommandType(binary.LittleEndian.Uint32(frame[wire.HeaderSize:]))
	req := binary.LittleEndian.Uint32(frame[wire.HeaderSize+12:])
	for off := wire.HeaderSize; off+wire.CmdHeaderSize <= len(frame); {
		flags := binary.LittleEndian.Uint32(frame[off+4:])
		if flags&wire.FlagReplyWanted != 0 || (flags&wire.FlagReply != 0 && flags&wire.FlagDeferred == 0) {
			return first, binary.LittleEndian.Uint32(frame[off+12:])
		}
		size := uint64(binary.LittleEndian.Uint32(frame[off+8:]))
		next := uint64(off) + wire.CmdHeaderSize + size
		if next > uint64(len(frame)) {
			break
		}
		off = int(next)
	}
	return first, req
}

// Frame records one frame (header included in frame).
func (t *Tracer) Frame(dir trace.Dir, ts int64, dur time.Duration, frame []byte) {
	t.FrameSized(dir, ts, dur, frame, len(frame))
}

// FrameSized records a frame of size bytes of which head holds the first ones.
func (t *Tracer) FrameSized(dir trace.Dir, ts int64, dur time.Duration, head []byte, size int) {
	if t.summaries {
		if dir == trace.DirSend {
			t.send.add(t.log, dur, size)
		} else {
			t.recv.add(t.log, dur, size)
		}
	}
	if t.w == nil {
		return
	}
	op := trace.OpFrameSend
	if dir == trace.DirRecv {
		op = trace.OpFrameRecv
	}
	cmd, req := frameKey(head)
	e := trace.Event{TS: ts, Dur: int64(dur), PID: t.pid, Conn: t.conn, Dir: dir, Op: op,
		Source: trace.SourceTracer, Bytes: int64(size), Command: uint32(cmd), ReqID: uint64(req),
		Payload: head[:min(len(head), t.payloadBytes)]}
	if err := t.w.WriteEvent(&e); err != nil {
		t.lost.Add(1)
	}
}

// RoundTrip records a completed request/reply pair.
func (t *Tracer) RoundTrip(ts int64, rtt time.Duration, cmd wire.CommandType, req uint32) {
	if t.w == nil {
		return
	}
	e := trace.Event{TS: ts, Dur: int64(rtt), PID: t.pid, Conn: t.conn, Op: trace.OpRoundTrip,
		Source: trace.SourceTracer, Command: uint32(cmd), ReqID: uint64(req)}
	if err := t.w.WriteEvent(&e); err != nil {
		t.lost.Add(1)
	}
}

// Marker records a span.
func (t *Tracer) Marker(name, text string, value int64, ts, end int64) {
	if t.w == nil {
		return
	}
	if err := t.w.WriteMarker(&trace.Marker{TS: ts, Dur: end - ts, PID: t.pid, Name: name, Value: value, Text: text}); err != nil {
		t.lost.Add(1)
	}
}

// Finish records lost events, if any.
func (t *Tracer) Finish() {
	if t.w != nil && t.lost.Load() > 0 {
		t.w.WriteLost(fmt.Sprintf("tracer.conn%d", t.conn), t.lost.Load())
	}
}
