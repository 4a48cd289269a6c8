package protocol

import (
	"encoding/binary"
	"sync"
)

// frameInfo is a frame rebuilt by a framer, before pairing.
type frameInfo struct {
	ts, end   int64
	firstEnd  int64 // end of the frame's first call
	callNS    int64 // time inside the calls that carried the frame, ns
	size      int64
	calls     int
	cmd       uint64
	hasCmd    bool
	flags     uint64
	hasFlags  bool
	reqID     uint64
	peek      []byte // the first bytes of the frame that were captured (at most framePeek)
	seen      []byte // every captured byte of the frame: its call's head, or peek and framer.more
	lostSync  bool
	truncated bool
}

// framePeek is how many leading bytes of each frame a framer keeps, at most: enough for the
// records of a small coalesced frame within a trace's payload head (trace.MaxPayload), after a
// header of up to 8 bytes that came in a call of its own.
const framePeek = 256 + 8

const (
	stHeader  = iota // collecting header bytes
	stPeek           // collecting the fields that lie past the header
	stPayload        // skipping the rest of the frame
	stLost           // boundaries lost: waiting for a call that starts with a valid header
)

// framer rebuilds the frames of one direction of one connection from the calls that moved its
// bytes. Each call is known by its byte count and its captured head (the first bytes of the
// data); bytes past the head are counted but unseen. A header that lies past the head loses
// sync; the framer then skips to the next call that starts with a valid header. It never
// allocates by a size read from the stream.
type framer struct {
	spec    *Spec
	hdr     *Header
	order   binary.ByteOrder
	big     bool // order is big-endian
	le4     bool // every field of the header is 4 bytes, little-endian: whole reads them inline
	peekEnd int  // bytes of the frame to capture: the header and every field

	state int
	// buf holds the captured bytes of the frame being read; it is taken from peekBufs when the
	// first byte comes and given back when the frame is emitted, so that the framers of the
	// many idle connections of a trace hold no buffer (have > 0 implies buf != nil).
	buf      *[framePeek]byte
	have     int   // bytes in buf
	more     int   // bytes in buf past have: the payload's for the digest (keepMore)
	frameLen int64 // whole frame, header included
	consumed int64 // bytes of the frame seen so far
	ts       int64
	firstEnd int64
	callNS   int64
	calls    int
	lastCall uint64
	lostNext bool // the next frame follows a loss of sync

	lost      uint64     // times sync was lost
	lostBytes int64      // bytes not decoded: skipped while sync was lost
	seenBytes int64      // bytes fed
	out       *frameInfo // the frame being emitted: shared by the framers of a trace, made on first use when not
}

// peekBufs recycles the framers' capture buffers.
var peekBufs = sync.Pool{New: func() any { return new([framePeek]byte) }}

// grab makes sure f has a capture buffer.
func (f *framer) grab() {
	if f.buf == nil {
		f.buf = peekBufs.Get().(*[framePeek]byte)
	}
}

// drop gives f's capture buffer back once it holds nothing.
func (f *framer) drop() {
	if f.buf != nil && f.have == 0 {
		peekBufs.Put(f.buf)
		f.buf = nil
	}
}

func newFramer(spec *Spec, hdr *Header, extra *Field) *framer {
	f := new(framer)
	f.init(spec, hdr, extra)
	return f
}

// init makes f a fresh framer of hdr's frames.
func (f *framer) init(spec *Spec, hdr *Header, extra *Field) {
	*f = framer{spec: spec, hdr: hdr, order: binary.LittleEndian}
	if spec.Endian == "big" {
		f.order, f.big = binary.BigEndian, true
	}
	f.peekEnd = peekEndOf(spec, hdr, extra)
	f.le4 = !f.big && hdr.Size.Size == 4
	for _, fl := range [...]*Field{hdr.Magic, hdr.Command, hdr.Flags, hdr.ReqID} {
		f.le4 = f.le4 && (fl == nil || fl.Size == 4)
	}
}

// le32 reads the 4-byte little-endian field fl of b, and false when b ends before it.
func le32(b []byte, fl *Field) (uint64, bool) {
	if fl.Offset+4 > len(b) {
		return 0, false
	}
	return uint64(binary.LittleEndian.Uint32(b[fl.Offset:])), true
}

// peekEndOf returns how many leading bytes of each frame a framer of hdr's frames captures.
func peekEndOf(spec *Spec, hdr *Header, extra *Field) int {
	end := hdr.Bytes
	if spec.Records != nil || spec.Stream != "" {
		end = framePeek // walk the records in the head
	}
	for _, fl := range [...]*Field{hdr.Command, hdr.Flags, hdr.ReqID, extra} {
		if fl != nil && fl.Offset+fl.Size > end {
			end = fl.Offset + fl.Size
		}
	}
	if extra != nil && extra.Offset+3 > end && extra.Offset+3 <= framePeek {
		end = extra.Offset + 3 // major, minor, patch
	}
	return end
}

// idle reports whether f holds no part of a frame and no loss of sync: a fresh framer of the
// same frames would go on exactly as f does.
func (f *framer) idle() bool {
	return f.state == stHeader && f.have == 0 && f.consumed == 0 && !f.lostNext
}

func (f *framer) field(fl *Field) (uint64, bool) {
	if fl == nil || fl.Offset+fl.Size > f.have {
		return 0, false
	}
	return f.fieldAt(f.buf[:f.have], fl)
}

// fieldIn is field read from b, the captured bytes of a frame, instead of f's capture buffer.
func (f *framer) fieldIn(b []byte, fl *Field) (uint64, bool) {
	if fl == nil || fl.Offset+fl.Size > len(b) {
		return 0, false
	}
	if fl.Size == 4 && !f.big { // the usual field, read inline
		return uint64(binary.LittleEndian.Uint32(b[fl.Offset:])), true
	}
	return f.fieldAt(b, fl)
}

// fieldAt reads fl, which lies within b.
func (f *framer) fieldAt(b []byte, fl *Field) (uint64, bool) {
	b = b[fl.Offset : fl.Offset+fl.Size]
	if !f.big {
		// the usual order, read without a call through the interface
		switch fl.Size {
		case 1:
			return uint64(b[0]), true
		case 2:
			return uint64(binary.LittleEndian.Uint16(b)), true
		case 4:
			return uint64(binary.LittleEndian.Uint32(b)), true
		default:
			return binary.LittleEndian.Uint64(b), true
		}
	}
	switch fl.Size {
	case 1:
		return uint64(b[0]), true
	case 2:
		return uint64(f.order.Uint16(b)), true
	case 4:
		return uint64(f.order.Uint32(b)), true
	default:
		return f.order.Uint64(b), true
	}
}

// parseHeader checks the header in buf and sets frameLen; false means the bytes are no header.
func (f *framer) parseHeader() bool {
	size, ok := f.headerIn(f.buf[:f.have])
	if ok {
		f.frameLen = int64(size)
	}
	return ok
}

// headerIn checks the header at the start of b (at least hdr.Bytes long) and returns the
// length of its frame; false means the bytes are no header.
func (f *framer) headerIn(b []byte) (uint64, bool) {
	h := f.hdr
	var magic, size uint64
	if f.le4 {
		if h.Magic != nil {
			magic, _ = le32(b, h.Magic)
		}
		size, _ = le32(b, &h.Size)
	} else {
		magic, _ = f.fieldIn(b, h.Magic)
		size, _ = f.fieldIn(b, &h.Size)
	}
	if h.Magic != nil && magic != h.Magic.Value {
		return 0, false
	}
	if h.Counts == "frame" {
		if size < uint64(h.Bytes) {
			return 0, false
		}
	} else {
		size += uint64(h.Bytes)
		if size < uint64(h.Bytes) { // overflow
			return 0, false
		}
	}
	if size > uint64(f.spec.MaxFrame) {
		return 0, false
	}
	if h.Command != nil && h.Command.Offset+h.Command.Size <= h.Bytes && len(f.spec.byID) > 0 {
		if c, _ := f.fieldIn(b, h.Command); f.spec.command(c) == nil {
			return 0, false
		}
	}
	return size, true
}

// call feeds one call: n bytes moved, head the captured first bytes (len(head) <= n). seq
// identifies the call. emit's frame is called for every frame that ends in this call.
func (f *framer) call(seq uint64, ts, end, n int64, head []byte, emit *connDecoder) {
	if int64(len(head)) > n {
		head = head[:n]
	}
	h := int64(len(head))
	f.seenBytes += n
	if f.state == stHeader && f.have == 0 && f.consumed == 0 && h >= int64(f.hdr.Bytes) && f.whole(seq, ts, end, n, head, emit) {
		return
	}
	var pos int64
	if f.state == stLost {
		if !f.resync(head) {
			f.lostBytes += n
			return
		}
	}
	for pos < n {
		if f.lastCall != seq || f.calls == 0 {
			if f.have == 0 && f.consumed == 0 {
				f.ts, f.firstEnd = ts, end
				f.calls, f.callNS = 0, 0
			}
			f.calls++
			f.callNS += end - ts
			f.lastCall = seq
		}
		switch f.state {
		case stHeader:
			need := int64(f.hdr.Bytes - f.have)
			k := min(need, h-pos)
			if k <= 0 {
				f.loseSync()
				f.lostBytes += n - pos
				return
			}
			f.grab()
			copy(f.buf[f.have:], head[pos:pos+k])
			f.have += int(k)
			pos += k
			f.consumed += k
			if f.have < f.hdr.Bytes {
				continue
			}
			if !f.parseHeader() {
				f.loseSync()
				f.lostBytes += n - pos + k
				return
			}
			if f.peekEnd > f.have && f.frameLen > int64(f.have) {
				f.state = stPeek
			} else {
				f.state = stPayload
			}
		case stPeek:
			need := min(int64(f.peekEnd), f.frameLen) - int64(f.have)
			k := min(need, h-pos)
			if k > 0 {
				f.grab()
				copy(f.buf[f.have:], head[pos:pos+k])
				f.have += int(k)
				pos += k
				f.consumed += k
			}
			if k == need || pos < n { // done, or the rest of the fields is past the head
				f.state = stPayload
			}
		case stPayload:
			k := min(f.frameLen-f.consumed, n-pos)
			if f.consumed == int64(f.have+f.more) { // every byte so far kept: keep on
				f.keepMore(head, pos, k)
			}
			pos += k
			f.consumed += k
		}
		if f.state == stPayload && f.consumed == f.frameLen {
			f.finish(end, false, emit)
		}
	}
}

// digestMore is how many captured bytes of a frame past its fields a framer keeps for the
// frame's digest.
const digestMore = 64

// keepMore keeps, for the frame's digest, the captured ones of the next k bytes of the frame,
// at pos in head, up to digestMore past the fields and within buf. It is called only while no
// byte of the frame has gone uncaptured, so what buf holds is the frame's start without a gap:
// a request written in several calls shows its payload in a later call's head.
func (f *framer) keepMore(head []byte, pos, k int64) {
	room := int64(min(digestMore-f.more, framePeek-f.have-f.more))
	c := min(k, room, max(0, int64(len(head))-pos))
	if c <= 0 {
		return
	}
	f.grab()
	copy(f.buf[f.have+f.more:], head[pos:pos+c])
	f.more += int(c)
}

// whole is call's fast path for a call that starts a frame with its header in head: when the
// call carries that frame exactly (the common case, one message a call), the frame is emitted
// as call would, its fields read from head in place, and whole reports true; otherwise f is
// left as it was, for call's general path.
func (f *framer) whole(seq uint64, ts, end, n int64, head []byte, emit *connDecoder) bool {
	size, ok := f.headerIn(head)
	if !ok || int64(size) != n {
		return false
	}
	peek := head[:min(int64(f.peekEnd), n, int64(len(head)))]
	if f.out == nil {
		f.out = new(frameInfo)
	}
	o := f.out
	// field by field: a composite literal would be built aside and copied
	o.ts, o.end, o.firstEnd, o.callNS, o.size, o.calls = ts, end, end, end-ts, n, 1
	o.lostSync, o.truncated, o.peek, o.seen = f.lostNext, false, peek, head[:min(n, int64(len(head)))]
	if h := f.hdr; f.le4 {
		o.cmd, o.hasCmd, o.flags, o.hasFlags, o.reqID = 0, false, 0, false, 0
		if h.Command != nil {
			o.cmd, o.hasCmd = le32(peek, h.Command)
		}
		if h.Flags != nil {
			o.flags, o.hasFlags = le32(peek, h.Flags)
		}
		if h.ReqID != nil {
			o.reqID, _ = le32(peek, h.ReqID)
		}
	} else {
		o.cmd, o.hasCmd = f.fieldIn(peek, h.Command)
		o.flags, o.hasFlags = f.fieldIn(peek, h.Flags)
		o.reqID, _ = f.fieldIn(peek, h.ReqID)
	}
	f.lastCall = seq
	f.lostNext = false
	emit.frame(o)
	o.peek, o.seen = nil, nil
	return true
}

// resync reports whether a call starting with head starts a frame, and primes the framer.
func (f *framer) resync(head []byte) bool {
	if len(head) < f.hdr.Bytes {
		return false
	}
	f.grab()
	f.have = copy(f.buf[:f.hdr.Bytes], head)
	ok := f.parseHeader()
	f.have = 0
	f.drop()
	f.frameLen = 0
	if !ok {
		return false
	}
	f.state = stHeader
	f.lostNext = true
	return true
}

func (f *framer) loseSync() {
	f.lost++
	f.state = stLost
	f.reset()
	f.drop()
}

func (f *framer) reset() {
	f.have = 0
	f.more = 0
	f.consumed = 0
	f.frameLen = 0
	f.calls = 0
}

func (f *framer) finish(end int64, truncated bool, emit *connDecoder) {
	if f.out == nil {
		f.out = new(frameInfo)
	}
	o := f.out
	var peek, seen []byte
	if f.buf != nil {
		peek, seen = f.buf[:f.have], f.buf[:f.have+f.more]
	}
	*o = frameInfo{ts: f.ts, end: end, firstEnd: f.firstEnd, callNS: f.callNS, size: f.consumed, calls: f.calls, lostSync: f.lostNext, truncated: truncated, peek: peek, seen: seen}
	if truncated {
		o.size = max(f.frameLen, f.consumed)
	}
	o.cmd, o.hasCmd = f.field(f.hdr.Command)
	o.flags, o.hasFlags = f.field(f.hdr.Flags)
	o.reqID, _ = f.field(f.hdr.ReqID)
	f.lostNext = false
	f.state = stHeader
	f.reset()
	emit.frame(o)
	o.peek, o.seen = nil, nil // the capture buffer stays for the next frame (releaseFramers gives it back)
}

// flush ends the stream: a frame in progress is emitted as truncated.
func (f *framer) flush(end int64, emit *connDecoder) {
	if f.state == stLost || (f.have == 0 && f.consumed == 0) {
		return
	}
	f.lostBytes += f.consumed // a frame whose end never came: its bytes are not a message seen whole
	if f.have < f.hdr.Bytes { // not even a header: count the bytes as lost
		f.lost++
		f.reset()
		f.drop()
		return
	}
	f.finish(end, true, emit)
}
