package analyzers

import "fmt"

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

// BatchStats counts the request frames of venus-mesa connections and the commands split out
// of them (`perflab analyze --format json`: "batches").
type BatchStats struct {
	Frames       uint64 `json:"frames"`            // request frames
	Commands     uint64 `json:"commands"`          // commands found in them
	MultiCommand uint64 `json:"multi_command"`     // frames found to carry more than one command
	NotSplit     uint64 `json:"batched_not_split"` // frames whose commands past the first found could not be told apart
	MaxPerFrame  int    `json:"max_per_frame"`     // most commands found in one frame
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
	c.d.protos["venus-mesa"] = true
	still := false
	for _, o := range c.d.conns {
		if o.spec != nil && o.spec.Name == "venus" {
			still = true
		}
	}
	if !still {
		delete(c.d.protos, "venus")
	}
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

// batchAgg accumulates BatchStats.
type batchAgg struct {
	st   BatchStats
	seen bool
}

// batch counts the commands of a request frame after its first (the frame itself counts the
// first) and the frame's split.
func (a *analyzer) batch(m *Message) {
	b := m.Batch
	st := &a.vb.st
	a.vb.seen = true
	st.Frames++
	st.Commands += uint64(len(b.Commands))
	if len(b.Commands) > 1 {
		st.MultiCommand++
	}
	if !b.Split {
		st.NotSplit++
	}
	st.MaxPerFrame = max(st.MaxPerFrame, len(b.Commands))
	for _, bc := range b.Commands[1:] {
		name := bc.Name
		if name == "" {
			name = fmt.Sprintf("cmd%d", bc.ID)
		}
		k := cmdKey{proto: m.Protocol, name: name, id: bc.ID, dir: m.Dir, reply: false}
		ca := a.cmds[k]
		if ca == nil {
			ca = &cmdAgg{}
			a.cmds[k] = ca
		}
		ca.count++
	}
}

// finishBatches puts the batch counts in the summary, with a warning when frames were not
// split.
func (a *analyzer) finishBatches() {
	if !a.vb.seen {
		return
	}
	st := a.vb.st
	a.s.Batches = &st
	if st.NotSplit > 0 {
		a.warnf("venus-mesa: %d of %d request frames batched, not split: commands past the captured bytes are not counted (record with a larger --payload-bytes to split them)", st.NotSplit, st.Frames)
	}
}
