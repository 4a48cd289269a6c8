package protocol

// Batch is the commands of one request frame whose payload is a command stream (venus-mesa).
type Batch struct {
	// Commands are the commands found, in frame order; the first is the frame's Command.
	Commands []BatchCmd
	// Split is true when every command of the frame was found (the walk ended exactly at the
	// frame's end). False means "batched, not split": the frame goes on past the last command
	// found, because its arguments run past the captured bytes or its layout is unknown.
	Split bool
}

// BatchCmd is one command of a frame.
type BatchCmd struct {
	ID         uint64
	Name       string
	WantsReply bool // its flags ask for a reply
}

// venusPlusBase is where Venus Plus's own command ids start: a frame that begins with one
// holds that one command in a C-struct layout, and always gets a reply.
const venusPlusBase = 0x10000000

// venusVariant switches an auto-detected venus connection to venus-mesa when its first
// request frame is not venusd's: venusd's records carry a size and a non-zero request id in
// their first 16 bytes, where a real Venus command has its arguments.
func (c *connDecoder) venusVariant(fi *frameInfo) {
	if c.variantDone || c.d.fixed != nil || c.tracer || c.spec == nil || c.spec.Name != "venus" || c.ev.Dir != c.reqDir {
		return
	}
	c.variantDone = true
	if looksVenusd(fi.peek, fi.size) {
		return
	}
	mesa := c.d.builtins["venus-mesa"]
	if mesa == nil {
		return
	}
	c.spec = mesa
	for _, f := range c.framers {
		if f != nil {
			f.spec = mesa
			f.peekEnd = max(f.peekEnd, framePeek)
		}
	}
	c.d.protos["venus-mesa"] = true // Protocols drops venus if no connection stayed venusd's
}

// looksVenusd reports whether a frame (header included) starts with a venusd record: known
// flag bits, a size within the frame and a request id. A head too short to hold a record
// header cannot tell: the connection stays venusd (--protocol venus-mesa forces real Venus).
func looksVenusd(peek []byte, size int64) bool {
	if len(peek) < 8+16 {
		return true
	}
	flags := le.Uint32(peek[12:])
	args := int64(le.Uint32(peek[16:]))
	id := le.Uint32(peek[20:])
	return flags&^7 == 0 && 8+16+args <= size && id != 0
}

// streamRequest fills m.Batch for a request frame whose payload is a Venus command stream, and
// returns whether the frame wants a reply (a hint: true when a command found asks for one, or
// when commands past the captured bytes may).
func (c *connDecoder) streamRequest(m *Message, fi *frameInfo) bool {
	hdr := c.spec.Request.Bytes
	if len(fi.peek) < hdr+4 {
		return true
	}
	b := &c.d.batch
	b.Commands, b.Split = b.Commands[:0], false
	payload := fi.peek[hdr:]
	size := fi.size - int64(hdr)
	m.Batch = b
	defer func() {
		if len(b.Commands) == 0 {
			m.Batch = nil
		}
	}()
	if id := le.Uint32(payload); id >= venusPlusBase {
		b.Commands = append(b.Commands, BatchCmd{ID: uint64(id), Name: c.spec.CommandName(uint64(id)), WantsReply: true})
		b.Split = true
		if off, n, ok := coalescedStream(payload, size); ok && n > 0 {
			// a coalesced submit or wait carries a Venus command stream: its commands count too
			b.Split = false
			if off < int64(len(payload)) {
				c.addStream(b, payload[off:], n)
			}
		}
		return true
	}
	return c.addStream(b, payload, size)
}

// Venus Plus's coalescing envelopes (remote_perf.h): a 16-byte header (u32 command, u32 flags,
// two u32 sizes), then a memory batch and a Venus command stream (submit), or a command stream
// and a read batch (wait).
const (
	vpCoalesceSubmit = 0x10000020
	vpCoalesceWait   = 0x10000021
)

// coalescedStream returns where the Venus command stream of a coalescing frame's payload
// starts and how long it is; ok is false for other frames, or when the sizes do not add up to
// the payload's size.
func coalescedStream(payload []byte, size int64) (off, n int64, ok bool) {
	if len(payload) < 16 {
		return 0, 0, false
	}
	a, b := int64(le.Uint32(payload[8:])), int64(le.Uint32(payload[12:]))
	if 16+a+b != size {
		return 0, 0, false
	}
	switch le.Uint32(payload) {
	case vpCoalesceSubmit: // transfer_size, command_size
		return 16 + a, b, true
	case vpCoalesceWait: // wait_command_size, invalidate_size
		return 16, a, true
	}
	return 0, 0, false
}

// addStream appends to b the commands split out of a Venus command stream of size bytes whose
// head is stream, and returns whether it wants a reply (a hint, see streamRequest).
func (c *connDecoder) addStream(b *Batch, stream []byte, size int64) bool {
	sp := splitVenus(stream, size)
	wants := sp.more
	for _, vc := range sp.cmds[:sp.n] {
		w := vc.flags&1 != 0
		wants = wants || w
		b.Commands = append(b.Commands, BatchCmd{ID: uint64(vc.id), Name: c.spec.CommandName(uint64(vc.id)), WantsReply: w})
	}
	b.Split = sp.split
	return wants
}
