package tracer

import (
	"bytes"
	"testing"
	"time"

	"github.com/perflab/perflab/trace"
	"github.com/perflab/perflab/venusd/wire"
)

// TestTracerEvents records a coalesced request frame, its reply and the round trip, and reads
// them back: each frame is labelled with its first command and the request id that wants a
// reply, the payload is cut to the asked bytes.
func TestTracerEvents(t *testing.T) {
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, trace.Meta{Source: "tracer", Protocol: "venus"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := New(w, 24, func(string) string { return "" }, nil)
	if !tr.Timed() {
		t.Error("a tracer with a writer is not timed")
	}
	var e wire.Encoder
	e.Reset()
	off := e.Begin(wire.CmdFlushMappedMemoryRanges, 0, 7)
	e.U32(0)
	e.End(off)
	off = e.Begin(wire.CmdWaitForFences, wire.FlagReplyWanted, 8)
	e.U32(0)
	e.End(off)
	req := append([]byte(nil), e.Finish()...)
	now := trace.Monotonic()
	tr.Connection(trace.FamilyUnix, "a", "b", now, 0)
	tr.Frame(trace.DirSend, now, time.Microsecond, req)
	tr.RoundTrip(now, 50*time.Microsecond, wire.CmdWaitForFences, 8)
	tr.Marker("phase", "load", 0, now, now+10)
	tr.Finish()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := trace.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Events) != 2 || len(f.Markers) != 1 {
		t.Fatalf("%d events, %d markers; want 2, 1", len(f.Events), len(f.Markers))
	}
	fr := f.Events[0]
	if fr.Op != trace.OpFrameSend || fr.Command != uint32(wire.CmdFlushMappedMemoryRanges) || fr.ReqID != 8 ||
		fr.Bytes != int64(len(req)) || len(fr.Payload) != 24 {
		t.Errorf("frame event %+v", fr)
	}
	if rt := f.Events[1]; rt.Op != trace.OpRoundTrip || rt.Dur != int64(50*time.Microsecond) || rt.ReqID != 8 {
		t.Errorf("round trip event %+v", rt)
	}
}

// TestTracerWithoutWriter checks that a tracer without a trace records nothing and costs
// nothing but its summaries.
func TestTracerWithoutWriter(t *testing.T) {
	tr := New(nil, 0, func(string) string { return "" }, nil)
	if tr.Timed() {
		t.Error("a tracer without writer or summaries is timed")
	}
	tr.Frame(trace.DirRecv, 1, 0, []byte{1, 2, 3})
	tr.Finish()
}
