package venusd

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/perflab/perflab/trace"
	"github.com/perflab/perflab/venusd/device"
	"github.com/perflab/perflab/venusd/tracer"
	"github.com/perflab/perflab/venusd/transport"
	"github.com/perflab/perflab/venusd/wire"
)

// memConn is a transport.Conn over a byte slice: reads come from it, writes are counted and dropped.
type memConn struct {
	r       *bytes.Reader
	written int
	ctr     transport.Counters
}

func (m *memConn) Read(p []byte) (int, error)         { return m.r.Read(p) }
func (m *memConn) Write(p []byte) (int, error)        { m.written += len(p); return len(p), nil }
func (m *memConn) SetReadDeadline(t time.Time) error  { return nil }
func (m *memConn) SetWriteDeadline(t time.Time) error { return nil }
func (m *memConn) Close() error                       { return nil }
func (m *memConn) Counters() *transport.Counters      { return &m.ctr }
func (m *memConn) Family() trace.Family               { return trace.FamilyUnknown }
func (m *memConn) LocalAddr() string                  { return "mem" }
func (m *memConn) RemoteAddr() string                 { return "mem" }

// fuzzSeeds are valid VPLS sessions and near misses.
func fuzzSeeds() [][]byte {
	ping := frameOf(cmdOf(wire.CmdPing, wire.FlagReplyWanted, 1, func(e *wire.Encoder) { e.U32(8); e.Bytes([]byte("abcd")) }))
	session := append(frameOf(
		cmdOf(wire.CmdAllocateMemory, 0, 1, alloc(9, 4096, wire.MemHostVisible|wire.MemHostCoherent)),
		cmdOf(wire.CmdMapMemory, 0, 2, u64s(9, 0, device.WholeSize)),
		cmdOf(wire.CmdTransferMemoryData, 0, 3, func(e *wire.Encoder) { u64s(9, 0, 8)(e); e.Bytes([]byte{0, 0, 128, 63, 0, 0, 0, 64}) }),
		cmdOf(wire.CmdAllocateMemory, 0, 4, alloc(0x100, 64, wire.MemHostVisible)),
		cmdOf(wire.CmdCreateFence, 0, 5, func(e *wire.Encoder) { e.U64(0x400); e.U32(0) }),
		cmdOf(wire.CmdAllocateCommandBuffers, 0, 6, u64s(0x300)),
		cmdOf(wire.CmdBeginCommandBuffer, 0, 7, u64s(0x300)),
		cmdOf(wire.CmdDispatch, 0, 8, func(e *wire.Encoder) {
			e.U64(0x300)
			e.U32(device.KernelMatVecTanh)
			e.U32(0)
			u64s(0x100, 0, 9, 0, 9, 64)(e)
			e.U32(2)
			e.U32(2)
			e.U32(0)
			e.U32(0)
		}),
		cmdOf(wire.CmdEndCommandBuffer, 0, 9, u64s(0x300)),
		cmdOf(wire.CmdResetFences, 0, 10, func(e *wire.Encoder) { e.U32(1); e.U64(0x400) }),
		cmdOf(wire.CmdQueueSubmit, wire.FlagReplyWanted, 11, func(e *wire.Encoder) { e.U64(1); e.U64(0x400); e.U32(1); e.U64(0x300) }),
	), frameOf(
		cmdOf(wire.CmdWaitForFences, wire.FlagReplyWanted, 12, func(e *wire.Encoder) { e.U32(1); e.U64(1e9); e.U32(1); e.U64(0x400) }),
		cmdOf(wire.CmdReadMemoryData, wire.FlagReplyWanted, 13, func(e *wire.Encoder) { e.U32(1); u64s(9, 0, 4096)(e) }),
		cmdOf(wire.CmdGetFenceStatus, wire.FlagReplyWanted, 14, u64s(0x400)),
		cmdOf(wire.CmdFreeMemory, 0, 15, u64s(9)),
		cmdOf(wire.CmdFreeMemory, wire.FlagReplyWanted, 16, u64s(9)),
	)...)
	badMagic := append([]byte(nil), ping...)
	binary.LittleEndian.PutUint32(badMagic, 0x53504C56)
	huge := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, wire.Magic), 0xFFFFFFF0)
	return [][]byte{ping, session, badMagic, huge, ping[:11], {}, frameOf(cmdOf(12345, 1, 1, nil))}
}

// FuzzServeFrame feeds arbitrary bytes to a server connection: the frame reader, the command
// walker and the dispatcher. It must never panic, and every object must be freed at the end.
func FuzzServeFrame(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := &Server{cfg: ServerConfig{MaxFrameBytes: 1 << 20, MaxMemoryBytes: 1 << 20, MaxObjects: 64}.withDefaults(),
			getenv: noEnv, conns: map[*serverConn]struct{}{}}
		s.cfg.Getenv = noEnv
		m := &memConn{r: bytes.NewReader(data)}
		s.serveConn(&serverConn{}, m)
		if st := s.Stats(); st.LiveObjects != 0 || st.LiveBytes != 0 {
			t.Fatalf("objects left after the connection ended: %+v", st)
		}
	})
}

// FuzzClientReply feeds arbitrary bytes to the client's reply reader: a server is a peer too.
func FuzzClientReply(f *testing.F) {
	reply := func(recs ...func(e *wire.Encoder)) []byte { return frameOf(recs...) }
	f.Add(reply(cmdOf(wire.CmdPing, wire.FlagReply, 1, func(e *wire.Encoder) { e.I32(0); e.Bytes([]byte("data")) })))
	f.Add(reply(cmdOf(wire.CmdWaitForFences, wire.FlagReply, 2, func(e *wire.Encoder) { e.I32(2) }),
		cmdOf(wire.CmdQueueSubmit, wire.FlagReply|wire.FlagDeferred, 1, func(e *wire.Encoder) { e.I32(-4) })))
	f.Add(reply(cmdOf(wire.CmdPing, wire.FlagReply, 1, nil)))
	f.Add([]byte("SLPV\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m := &memConn{r: bytes.NewReader(data)}
		c := &client{raw: m, fc: transport.NewDirectFrames(m, 1<<20), tr: tracer.New(nil, 0, noEnv, nil)}
		for i := 0; i < 4; i++ {
			rs, _, err := c.recv(nil)
			if err != nil {
				return
			}
			for _, r := range rs {
				c.noteErr(&r)
			}
		}
	})
}
