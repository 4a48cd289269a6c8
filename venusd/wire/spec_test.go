package wire_test

import (
	"testing"

	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/venusd/wire"
)

// TestSpecMatchesWire ties the frame format venusd writes to the venus protocol spec perflab
// analyze decodes with (protocol/protocols/venus.json): the magic, the header and record
// layouts, the flag bits and every command id venusd speaks with its name. A change on one side
// only fails here.
func TestSpecMatchesWire(t *testing.T) {
	spec, err := protocol.BuiltinSpec("venus")
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]*protocol.Header{"request": spec.Request, "reply": spec.Reply} {
		if h == nil || h.Magic == nil {
			t.Fatalf("%s header: no magic", name)
		}
		if h.Magic.Value != wire.Magic || h.Magic.Offset != 0 || h.Magic.Size != 4 {
			t.Errorf("%s magic: spec 0x%x at %d (%d bytes), wire 0x%x at 0 (4 bytes)", name, h.Magic.Value, h.Magic.Offset, h.Magic.Size, wire.Magic)
		}
		if h.Bytes != wire.HeaderSize || h.Size.Offset != 4 || h.Size.Size != 4 || (h.Counts != "" && h.Counts != "payload") {
			t.Errorf("%s header: spec %d bytes, size at %d (%d bytes) counting %q; wire %d bytes, u32 payload size at 4",
				name, h.Bytes, h.Size.Offset, h.Size.Size, h.Counts, wire.HeaderSize)
		}
		if h.Command == nil || h.Command.Offset != wire.HeaderSize || h.Command.Size != 4 {
			t.Errorf("%s command field: spec %+v, wire u32 at %d (the first record's type)", name, h.Command, wire.HeaderSize)
		}
	}
	if f := spec.Request.Flags; f == nil || f.Offset != wire.HeaderSize+4 || f.Mask != wire.FlagReplyWanted {
		t.Errorf("request flags: spec %+v, wire u32 at %d with reply-wanted bit %d", f, wire.HeaderSize+4, wire.FlagReplyWanted)
	}
	r := spec.Records
	if r == nil {
		t.Fatal("spec has no record layout")
	}
	if r.Offset != wire.HeaderSize || r.Bytes != wire.CmdHeaderSize || r.Size.Offset != 8 || r.Size.Size != 4 ||
		r.Flags == nil || r.Flags.Offset != 4 || r.Flags.Mask != wire.FlagReplyWanted ||
		r.ReplyMask != wire.FlagReply || r.SkipMask != wire.FlagDeferred || r.ReqID == nil || r.ReqID.Offset != 12 {
		t.Errorf("record layout: spec %+v; wire: records from %d, %d-byte header (type, flags, args size, request id), reply-wanted %d, reply %d, deferred %d",
			r, wire.HeaderSize, wire.CmdHeaderSize, wire.FlagReplyWanted, wire.FlagReply, wire.FlagDeferred)
	}
	byID := map[uint64]string{}
	for _, c := range spec.Commands {
		byID[c.ID] = c.Name
	}
	n := 0
	for id := range uint64(1 << 16) {
		checkCommand(t, byID, wire.CommandType(id), &n)
	}
	for id := uint64(0x10000000); id < 0x10000000+64; id++ {
		checkCommand(t, byID, wire.CommandType(id), &n)
	}
	if n < 20 {
		t.Errorf("only %d commands checked; venusd speaks 20", n)
	}
}

func checkCommand(t *testing.T, byID map[uint64]string, c wire.CommandType, n *int) {
	t.Helper()
	if !c.Known() {
		return
	}
	*n++
	if got, ok := byID[uint64(c)]; !ok || got != c.String() {
		t.Errorf("command %d: wire %q, spec %q", uint32(c), c.String(), got)
	}
}

// TestEncoderFrame checks an encoded frame against the layout the spec describes, byte for byte.
func TestEncoderFrame(t *testing.T) {
	var e wire.Encoder
	e.Reset()
	off := e.Begin(wire.CmdPing, wire.FlagReplyWanted, 7)
	e.U32(8)
	e.End(off)
	f := e.Finish()
	h, err := wire.ParseFrameHeader(f, 1<<20)
	if err != nil || h.Size != uint32(len(f)-wire.HeaderSize) {
		t.Fatalf("header %+v, %v", h, err)
	}
	it := wire.NewCommandIter(f[wire.HeaderSize:])
	var c wire.Command
	if !it.Next(&c) || c.Type != wire.CmdPing || c.Flags != wire.FlagReplyWanted || c.ReqID != 7 || len(c.Args) != 4 {
		t.Fatalf("command %+v, err %v", c, it.Err())
	}
	if it.Next(&c) || it.Err() != nil {
		t.Errorf("a second command, or an error: %v", it.Err())
	}
}
