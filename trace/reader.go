package trace

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sort"
)

// readBlock is how much a Reader asks its source for at a time, in bytes.
const readBlock = 64 << 10

// Reader reads a trace as a stream of records. Its memory does not grow with the file: it holds
// at most one chunk (bounded by MaxChunkBody) and a small read-ahead. A Reader is not safe for
// concurrent use.
type Reader struct {
	src    io.Reader
	closer io.Closer // the file Open made, nil otherwise

	buf    []byte // bytes read from src; buf[pos:] not yet consumed
	bufOff int64  // file offset of buf[0]
	pos    int
	eof    bool
	ioErr  error
	remain int64 // bytes the source still holds past buf, when it can tell (a file); -1 otherwise
	empty  int   // reads in a row that returned nothing

	meta      Meta
	hasMeta   bool
	footer    Footer
	hasFooter bool
	rec       Recovery
	firstBad  *FormatError // the first damage seen, for "no complete chunk" errors
	chunkOff  int64        // file offset of the chunk nextChunk returned last

	body    []byte // the records chunk being decoded (a slice of buf)
	bp      int
	st      encState
	pending bool // a chunk found by NewReader waits in pendTyp/pendBody
	pendTyp byte
	pendBdy []byte

	intern map[string]string

	hdrSize int    // chunk header size of the file's format version
	seen    seqSet // sequence numbers of the chunks read (format 2)
	maxSeq  int64  // highest sequence number read, -1 before the first
	ended   bool   // the end-of-file checks ran
}

// NewReader reads the header and meta; it returns a *FormatError when r holds no trace: a wrong
// magic, a format version from the future, or not one complete chunk.
func NewReader(r io.Reader) (*Reader, error) {
	tr := &Reader{src: r, intern: map[string]string{}, remain: sourceSize(r), hdrSize: chunkHeaderSize, maxSeq: -1}
	if !tr.fill(headerSize) {
		if tr.ioErr != nil {
			return nil, tr.ioErr
		}
		n := len(tr.buf)
		if n == 0 {
			return nil, &FormatError{Offset: 0, Msg: "empty file, not a perflab trace"}
		}
		if !bytes.HasPrefix([]byte(Magic), tr.buf) && !bytes.HasPrefix(tr.buf, []byte(Magic)) {
			return nil, &FormatError{Offset: 0, Msg: "not a perflab trace (bad magic)"}
		}
		return nil, &FormatError{Offset: int64(n), Msg: fmt.Sprintf("file ends inside the %d-byte header", headerSize)}
	}
	if !bytes.Equal(tr.buf[:len(Magic)], []byte(Magic)) {
		return nil, &FormatError{Offset: 0, Msg: "not a perflab trace (bad magic)"}
	}
	v := binary.LittleEndian.Uint16(tr.buf[len(Magic):])
	if v == 0 {
		return nil, &FormatError{Offset: int64(len(Magic)), Msg: "format version 0 is not valid"}
	}
	if v > FormatVersion {
		return nil, &FormatError{Offset: int64(len(Magic)), Msg: fmt.Sprintf("format version %d is newer than this perflab reads (up to %d): upgrade perflab", v, FormatVersion)}
	}
	if v == 1 {
		tr.hdrSize = chunkHeaderSizeV1
	}
	tr.pos = headerSize
	for {
		typ, body, err := tr.nextChunk()
		if err == io.EOF {
			if tr.firstBad != nil {
				return nil, tr.firstBad
			}
			return nil, &FormatError{Offset: int64(headerSize), Msg: "no chunk after the header"}
		}
		if err != nil {
			return nil, err
		}
		if typ == chunkMeta {
			if tr.decodeMeta(body) {
				return tr, nil
			}
			continue
		}
		tr.pending, tr.pendTyp, tr.pendBdy = true, typ, body
		return tr, nil
	}
}

// sourceSize returns how many bytes r still holds when r can seek (a regular file, a
// bytes.Reader), or -1. The size only sizes buffers: the reader still stops where reads stop.
func sourceSize(r io.Reader) int64 {
	s, ok := r.(io.Seeker)
	if !ok {
		return -1
	}
	cur, err := s.Seek(0, io.SeekCurrent)
	if err != nil {
		return -1
	}
	end, err := s.Seek(0, io.SeekEnd)
	if err != nil {
		return -1
	}
	if _, err := s.Seek(cur, io.SeekStart); err != nil || end < cur {
		return -1
	}
	return end - cur
}

// Open opens the trace file path; Close closes it.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		f.Close()
		return nil, &FormatError{Offset: 0, Msg: "is a directory, not a trace file"}
	}
	r, err := NewReader(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.closer = f
	return r, nil
}

// Close closes the file if Open made the Reader; otherwise it does nothing.
func (r *Reader) Close() error {
	if r.closer != nil {
		c := r.closer
		r.closer = nil
		return c.Close()
	}
	return nil
}

// Meta returns the recording's metadata (the zero Meta when the meta chunk was damaged).
func (r *Reader) Meta() Meta { return r.meta }

// Recovery reports what was read and skipped so far.
func (r *Reader) Recovery() Recovery { return r.rec }

// Footer returns the footer, and false when none was read. The footer is the last chunk of a
// file: it is known once Next has returned io.EOF.
func (r *Reader) Footer() (Footer, bool) { return r.footer, r.hasFooter }

// Next fills rec with the next record; io.EOF at the end. Only the field of rec named by
// rec.Kind is set; rec.Event.Payload points into the Reader's buffer until the next call.
// Damage is not an error: damaged chunks are skipped and counted in Recovery.
func (r *Reader) Next(rec *Record) error {
	for {
		if r.bp < len(r.body) {
			if r.decodeRecord(rec) {
				return nil
			}
			r.rec.ChunksRead--
			r.noteBad(r.chunkOff, "records chunk does not decode")
			r.body, r.bp = nil, 0
			continue
		}
		r.body, r.bp = nil, 0
		var typ byte
		var body []byte
		if r.pending {
			typ, body = r.pendTyp, r.pendBdy
			r.pending, r.pendBdy = false, nil
		} else {
			var err error
			typ, body, err = r.nextChunk()
			if err == io.EOF {
				r.end()
			}
			if err != nil {
				return err
			}
		}
		switch typ {
		case chunkRecords:
			r.body, r.bp = body, 0
			r.st = encState{}
		case chunkMeta:
			if !r.hasMeta {
				r.decodeMeta(body)
			}
		case chunkFooter:
			var f Footer
			if len(body) > maxJSONBody {
				r.rec.ChunksRead--
				r.noteBad(r.chunkOff, fmt.Sprintf("footer chunk of %d bytes exceeds %d", len(body), maxJSONBody))
				continue
			}
			if err := json.Unmarshal(body, &f); err != nil {
				r.rec.ChunksRead--
				r.noteBad(r.chunkOff, "footer chunk is not valid JSON")
				continue
			}
			r.footer, r.hasFooter = f, true
			r.rec.Clean = true
		default:
			r.rec.UnknownChunks++
		}
	}
}

func (r *Reader) decodeMeta(body []byte) bool {
	var m Meta
	if len(body) > maxJSONBody {
		r.rec.ChunksRead--
		r.noteBad(r.chunkOff, fmt.Sprintf("meta chunk of %d bytes exceeds %d", len(body), maxJSONBody))
		return false
	}
	if err := json.Unmarshal(body, &m); err != nil {
		r.rec.ChunksRead--
		r.noteBad(r.chunkOff, "meta chunk is not valid JSON")
		return false
	}
	r.meta, r.hasMeta = m, true
	return true
}

// off returns the file offset of buf[pos].
func (r *Reader) off() int64 { return r.bufOff + int64(r.pos) }

// fill makes at least need bytes available at buf[pos:], reading as needed, and reports whether
// it could. The buffer grows only as bytes arrive, never by a length read from the file.
func (r *Reader) fill(need int) bool {
	for len(r.buf)-r.pos < need {
		if r.eof || r.ioErr != nil {
			return false
		}
		if cap(r.buf)-len(r.buf) < readBlock && r.pos > 0 {
			n := copy(r.buf, r.buf[r.pos:])
			r.bufOff += int64(r.pos)
			r.buf = r.buf[:n]
			r.pos = 0
		}
		if cap(r.buf)-len(r.buf) < readBlock {
			var nc int
			if r.remain >= 0 {
				// The source's size is known: make room for what is needed, bounded by what the
				// source still holds, in one step.
				nc = len(r.buf) + int(min(int64(need-(len(r.buf)-r.pos)), r.remain)) + readBlock
			} else {
				// Unknown size: double, so that the buffer grows only as bytes arrive.
				nc = max(2*cap(r.buf), len(r.buf)+readBlock)
				if lim := r.hdrSize + MaxChunkBody + readBlock; nc > lim {
					nc = max(lim, len(r.buf)+readBlock)
				}
			}
			nb := make([]byte, len(r.buf), nc)
			copy(nb, r.buf)
			r.buf = nb
		}
		n, err := r.src.Read(r.buf[len(r.buf):cap(r.buf)])
		if n == 0 && err == nil {
			if r.empty++; r.empty >= 100 {
				r.ioErr = fmt.Errorf("read trace at offset %d: %w", r.bufOff+int64(len(r.buf)), io.ErrNoProgress)
			}
			continue
		}
		r.empty = 0
		r.buf = r.buf[:len(r.buf)+n]
		if r.remain >= 0 {
			r.remain = max(r.remain-int64(n), 0)
		}
		if err == io.EOF {
			r.eof = true
		} else if err != nil {
			r.ioErr = fmt.Errorf("read trace at offset %d: %w", r.bufOff+int64(len(r.buf)), err)
		}
	}
	return true
}

func (r *Reader) noteBad(off int64, msg string) {
	r.rec.ChunksBad++
	if r.firstBad == nil {
		r.firstBad = &FormatError{Offset: off, Msg: msg}
	}
}

// nextChunk returns the next chunk whose header and body CRCs match, resynchronising past
// damage; io.EOF at the end, with Recovery updated.
func (r *Reader) nextChunk() (byte, []byte, error) {
	for {
		start := r.off()
		if !r.fill(r.hdrSize) {
			if r.ioErr != nil {
				return 0, nil, r.ioErr
			}
			rem := len(r.buf) - r.pos
			if rem == 0 {
				return 0, nil, io.EOF
			}
			tail := r.buf[r.pos:]
			if n := min(len(tail), len(syncBytes)); !bytes.Equal(tail[:n], syncBytes[:n]) {
				r.noteBad(start, "damaged bytes at the end of the file")
			} else if r.firstBad == nil {
				r.firstBad = &FormatError{Offset: start, Msg: "file ends inside a chunk header"}
			}
			r.rec.TruncatedBytes += int64(rem)
			r.pos = len(r.buf)
			return 0, nil, io.EOF
		}
		h, ok := parseChunkHeader(r.buf[r.pos:], r.hdrSize)
		if !ok || h.length > MaxChunkBody {
			if !ok {
				r.noteBad(start, "bad chunk header (sync word or checksum)")
			} else {
				r.noteBad(start+5, fmt.Sprintf("chunk length %d exceeds the limit %d", h.length, MaxChunkBody))
			}
			if err := r.resync(start); err != nil {
				return 0, nil, err
			}
			continue
		}
		n := r.hdrSize + int(h.length)
		if !r.fill(n) {
			if r.ioErr != nil {
				return 0, nil, r.ioErr
			}
			rem := len(r.buf) - r.pos
			if r.firstBad == nil {
				r.firstBad = &FormatError{Offset: start + 5, Msg: fmt.Sprintf("chunk length %d runs past the end of the file (%d bytes left)", h.length, rem-r.hdrSize)}
			}
			r.rec.TruncatedBytes += int64(rem)
			r.pos = len(r.buf)
			return 0, nil, io.EOF
		}
		body := r.buf[r.pos+r.hdrSize : r.pos+n]
		r.pos += n
		if crc32.Checksum(body, castagnoli) != h.bodyCRC {
			r.noteBad(start+int64(r.hdrSize), "chunk body checksum mismatch")
			continue
		}
		r.chunkOff = start
		if r.hasFooter {
			// A writer writes nothing after its footer: this chunk was appended (another
			// file's, or a copy of one of this file's), and is not part of the recording.
			r.rec.ChunksAfterFooter++
			continue
		}
		if r.hdrSize == chunkHeaderSize {
			switch r.sequence(h.seq) {
			case seqDuplicate:
				r.rec.ChunksDuplicate++
				continue
			case seqTooMany:
				r.noteBad(start+9, fmt.Sprintf("more than %d runs of chunks out of order", maxOutOfOrder))
				continue
			case seqReordered:
				r.rec.ChunksReordered++
			}
		}
		r.rec.ChunksRead++
		return h.typ, body, nil
	}
}

// Outcomes of Reader.sequence.
const (
	seqInOrder = iota
	seqReordered
	seqDuplicate
	seqTooMany
)

// sequence records chunk number seq and says whether it comes in order, after a later chunk
// (reordered, still read), or again (a duplicate, skipped).
func (r *Reader) sequence(seq uint32) int {
	s := int64(seq)
	if r.seen.contains(s) {
		return seqDuplicate
	}
	if !r.seen.add(s) {
		return seqTooMany
	}
	if s < r.maxSeq {
		return seqReordered
	}
	r.maxSeq = s
	return seqInOrder
}

// end runs the checks that need the whole file: the chunks the footer counts against the
// chunks read.
func (r *Reader) end() {
	if r.ended || !r.hasFooter {
		r.ended = true
		return
	}
	r.ended = true
	n := int64(r.footer.Chunks)
	if r.hdrSize == chunkHeaderSize {
		if n < 1<<32 {
			r.rec.ChunksMissing = int(n - r.seen.countBelow(n))
		}
		return
	}
	// Format 1 has no sequence numbers: compare counts. The footer counts the chunks before
	// it; ChunksRead counts them and the footer.
	read := int64(r.rec.ChunksRead - 1)
	switch {
	case read < n:
		r.rec.ChunksMissing = int(n - read)
	case read > n:
		r.rec.ChunksExtra = int(read - n)
	}
}

// seqSet is a set of chunk sequence numbers kept as sorted, disjoint, non-adjacent intervals:
// a file read in order is one interval, and each gap (a damaged chunk) or chunk out of order
// adds at most one.
type seqSet struct{ iv [][2]int64 }

// find returns the index of the first interval that ends at s-1 or later.
func (q *seqSet) find(s int64) int {
	return sort.Search(len(q.iv), func(i int) bool { return q.iv[i][1]+1 >= s })
}

func (q *seqSet) contains(s int64) bool {
	i := q.find(s)
	return i < len(q.iv) && q.iv[i][0] <= s && s <= q.iv[i][1]
}

// add adds s (not in the set); it returns false when that would need more than maxOutOfOrder
// intervals.
func (q *seqSet) add(s int64) bool {
	i := q.find(s)
	switch {
	case i < len(q.iv) && q.iv[i][1]+1 == s:
		q.iv[i][1] = s
		if i+1 < len(q.iv) && q.iv[i+1][0] == s+1 {
			q.iv[i][1] = q.iv[i+1][1]
			q.iv = append(q.iv[:i+1], q.iv[i+2:]...)
		}
	case i < len(q.iv) && q.iv[i][0] == s+1:
		q.iv[i][0] = s
	default:
		if len(q.iv) >= maxOutOfOrder {
			return false
		}
		q.iv = append(q.iv, [2]int64{})
		copy(q.iv[i+1:], q.iv[i:])
		q.iv[i] = [2]int64{s, s}
	}
	return true
}

// countBelow returns how many members are below n.
func (q *seqSet) countBelow(n int64) int64 {
	var c int64
	for _, v := range q.iv {
		if v[0] >= n {
			break
		}
		c += min(v[1], n-1) - v[0] + 1
	}
	return c
}

// resync scans forward from the damaged chunk at file offset start (== r.off()) for the next
// chunk header whose CRC matches. Bytes passed over count as skipped when a chunk is found, and
// as truncated when the file ends first. It returns only I/O errors.
func (r *Reader) resync(start int64) error {
	r.pos++
	for {
		i := bytes.Index(r.buf[r.pos:], syncBytes)
		if i < 0 {
			keep := min(len(r.buf)-r.pos, len(syncBytes)-1)
			r.pos = len(r.buf) - keep
			if !r.fill(keep + 1) {
				if r.ioErr != nil {
					return r.ioErr
				}
				break
			}
			continue
		}
		r.pos += i
		if !r.fill(r.hdrSize) {
			if r.ioErr != nil {
				return r.ioErr
			}
			break
		}
		if h, ok := parseChunkHeader(r.buf[r.pos:], r.hdrSize); ok && h.length <= MaxChunkBody {
			r.rec.BytesSkipped += r.off() - start
			return nil
		}
		r.pos++
	}
	r.pos = len(r.buf)
	r.rec.TruncatedBytes += r.off() - start
	return nil
}

// dec is a cursor over a chunk body.
type dec struct {
	b   []byte
	p   int
	bad bool
}

// uvarint reads an unsigned varint (uvarintAt).
func (d *dec) uvarint() uint64 {
	v, p := uvarintAt(d.b, d.p)
	if p < 0 {
		d.bad = true
		d.p = len(d.b)
		return 0
	}
	d.p = p
	return v
}

// varint reads a signed (zig-zag) varint, as binary.Varint.
func (d *dec) varint() int64 { return zigzag(d.uvarint()) }

// zigzag decodes a signed varint's value from its unsigned encoding, as binary.Varint.
func zigzag(u uint64) int64 {
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

// uvarintAt reads the unsigned varint at b[p:] and returns it and the position past it, or p < 0
// when it is malformed or p is already. A one-byte varint (most of a trace's: deltas, sizes,
// ids) is read inline.
func uvarintAt(b []byte, p int) (uint64, int) {
	if uint(p) < uint(len(b)) && b[p] < 0x80 {
		return uint64(b[p]), p + 1
	}
	return uvSlow(b, p)
}

// uvSlow is uvarintAt for any varint, as binary.Uvarint reads them: at most 10 bytes, the last of
// them at most 1.
func uvSlow(b []byte, p int) (uint64, int) {
	if p < 0 {
		return 0, -1
	}
	if len(b)-p >= 3 { // two or three bytes (time deltas and durations), unrolled
		c0, c1, c2 := b[p], b[p+1], b[p+2]
		switch {
		case c0 < 0x80:
			return uint64(c0), p + 1
		case c1 < 0x80:
			return uint64(c0&0x7f) | uint64(c1)<<7, p + 2
		case c2 < 0x80:
			return uint64(c0&0x7f) | uint64(c1&0x7f)<<7 | uint64(c2)<<14, p + 3
		}
	}
	var x uint64
	var s uint
	for i := 0; i < binary.MaxVarintLen64 && p+i < len(b); i++ {
		c := b[p+i]
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				return 0, -1 // overflow
			}
			return x | uint64(c)<<s, p + i + 1
		}
		x |= uint64(c&0x7f) << s
		s += 7
	}
	return 0, -1
}

func (d *dec) byte1() byte {
	if d.p >= len(d.b) {
		d.bad = true
		return 0
	}
	c := d.b[d.p]
	d.p++
	return c
}

func (d *dec) u32() uint32 {
	v := d.uvarint()
	if v > 1<<32-1 {
		d.bad = true
	}
	return uint32(v)
}

// bytesN returns the next n bytes where n was read from the body: it checks n against max and
// the bytes left before slicing.
func (d *dec) bytesN(max int) []byte {
	n := d.uvarint()
	if d.bad || n > uint64(max) || n > uint64(len(d.b)-d.p) {
		d.bad = true
		d.p = len(d.b)
		return nil
	}
	s := d.b[d.p : d.p+int(n)]
	d.p += int(n)
	return s
}

func (r *Reader) str(d *dec) string {
	b := d.bytesN(MaxString)
	if len(b) == 0 {
		return ""
	}
	if s, ok := r.intern[string(b)]; ok {
		return s
	}
	s := string(b)
	// Names and addresses repeat; interning them keeps Next from allocating. The table is
	// bounded so that a file of distinct strings cannot grow it.
	if len(b) <= 64 && len(r.intern) < 256 {
		r.intern[s] = s
	}
	return s
}

// decodeRecord decodes the record at body[bp] into rec and reports whether it was well formed.
func (r *Reader) decodeRecord(rec *Record) bool {
	b, p := r.body, r.bp
	if p >= len(b) {
		return false
	}
	tag := b[p]
	p++
	if tag&tagEvent == 0 {
		return r.decodeOther(tag, rec)
	}
	// Events are nearly every record: they are decoded here, without a call, from the
	// body and a position held in registers (p < 0 once a varint was malformed).
	e := &rec.Event
	st := &r.st
	var extra byte
	if tag&evExtra != 0 {
		if p >= len(b) {
			return false
		}
		extra = b[p]
		p++
		if extra&^(exCommand|exReqID|exPayload) != 0 {
			return false
		}
	}
	dir := tag >> evDirShift & evDirMask
	e.Dir = Dir(dir)
	if dir == evDirEsc {
		if p >= len(b) {
			return false
		}
		if e.Dir = Dir(b[p]); e.Dir <= DirRecv {
			return false // not the writer's encoding
		}
		p++
	}
	var u uint64
	// the varints of every event are read inline when one byte long (uvarintAt)
	// (the time delta and the duration when two bytes long too)
	if uint(p) < uint(len(b)) && b[p] < 0x80 {
		u, p = uint64(b[p]), p+1
	} else if p >= 0 && p+1 < len(b) && b[p+1] < 0x80 {
		u, p = uint64(b[p]&0x7f)|uint64(b[p+1])<<7, p+2
	} else {
		u, p = uvSlow(b, p)
	}
	e.TS = st.ts + zigzag(u)
	if uint(p) < uint(len(b)) && b[p] < 0x80 {
		u, p = uint64(b[p]), p+1
	} else if p >= 0 && p+1 < len(b) && b[p+1] < 0x80 {
		u, p = uint64(b[p]&0x7f)|uint64(b[p+1])<<7, p+2
	} else {
		u, p = uvSlow(b, p)
	}
	e.Dur = zigzag(u)
	if tag&evSamePIDTID != 0 {
		e.PID, e.TID = st.pid, st.tid
	} else {
		var t uint64
		u, p = uvarintAt(b, p)
		t, p = uvarintAt(b, p)
		if u > 1<<32-1 || t > 1<<32-1 {
			return false
		}
		e.PID, e.TID = uint32(u), uint32(t)
	}
	if tag&evSameConn != 0 {
		e.Conn = st.conn
	} else {
		e.Conn, p = uvarintAt(b, p)
	}
	if tag&evSameOpSrc != 0 {
		if dir == evDirEsc {
			return false
		}
		e.Op, e.Source = st.op[dir], st.src[dir]
	} else {
		if p < 0 || len(b)-p < 2 {
			return false
		}
		e.Op, e.Source = Op(b[p]), Source(b[p+1])
		p += 2
	}
	if uint(p) < uint(len(b)) && b[p] < 0x80 {
		u, p = uint64(b[p]), p+1
	} else {
		u, p = uvSlow(b, p)
	}
	e.Bytes = zigzag(u)
	e.Errno, e.Command, e.ReqID, e.Payload = 0, 0, 0, nil
	switch {
	case extra == exPayload && tag&evErrno == 0:
		// a payload head alone, the usual extra
		if uint(p) < uint(len(b)) && b[p] < 0x80 {
			u, p = uint64(b[p]), p+1
		} else {
			u, p = uvSlow(b, p)
		}
		if p < 0 || u == 0 || u > MaxPayload || u > uint64(len(b)-p) {
			return false
		}
		e.Payload = b[p : p+int(u)]
		p += int(u)
	case tag&evErrno != 0 || extra != 0:
		if p < 0 {
			return false
		}
		d := dec{b: b, p: p}
		if !r.decodeEventExtras(&d, tag, extra, e) || d.bad {
			return false
		}
		p = d.p
	}
	if p < 0 {
		return false
	}
	st.ts, st.pid, st.tid, st.conn = e.TS, e.PID, e.TID, e.Conn
	if dir != evDirEsc {
		st.op[dir], st.src[dir] = e.Op, e.Source
	}
	rec.Kind = KindEvent
	r.bp = p
	return true
}

// decodeOther decodes the record at body[bp] whose tag is not an event's.
func (r *Reader) decodeOther(tag byte, rec *Record) bool {
	d := dec{b: r.body, p: r.bp + 1}
	switch {
	case tag == tagConnection:
		if !r.decodeConnection(&d, &rec.Conn) {
			return false
		}
		rec.Kind = KindConnection
	case tag == tagMarker:
		if !r.decodeMarker(&d, &rec.Marker) {
			return false
		}
		rec.Kind = KindMarker
	case tag == tagLost:
		if !r.decodeLost(&d, &rec.Lost) {
			return false
		}
		rec.Kind = KindLost
	default:
		return false
	}
	r.bp = d.p
	return true
}

// decodeEventExtras decodes an event's optional fields flagged in tag and extra (errno, command,
// request id as a delta to the previous one, payload) into e and reports whether they were well formed.
func (r *Reader) decodeEventExtras(d *dec, tag, extra byte, e *Event) bool {
	if tag&evErrno != 0 {
		e.Errno = d.u32()
	}
	if extra&exCommand != 0 {
		e.Command = d.u32()
	}
	if extra&exReqID != 0 {
		e.ReqID = r.st.req + uint64(d.varint())
		r.st.req = e.ReqID
	}
	if extra&exPayload != 0 {
		e.Payload = d.bytesN(MaxPayload)
		if len(e.Payload) == 0 {
			return false
		}
	}
	return true
}

// decodeConnection decodes the body of a connection record into c and reports whether it was well
// formed.
func (r *Reader) decodeConnection(d *dec, c *Connection) bool {
	c.ID = d.uvarint()
	c.Family = Family(d.byte1())
	c.Local = r.str(d)
	c.Remote = r.str(d)
	c.PID = d.u32()
	c.FirstSeen = d.varint()
	c.LastSeen = c.FirstSeen + d.varint()
	return !d.bad
}

// decodeMarker decodes the body of a marker record into m, against and then updating the marker
// time delta state, and reports whether it was well formed.
func (r *Reader) decodeMarker(d *dec, m *Marker) bool {
	m.TS = r.st.markerTS + d.varint()
	m.Dur = d.varint()
	m.PID = d.u32()
	m.TID = d.u32()
	m.Name = r.str(d)
	m.Value = d.varint()
	m.Text = r.str(d)
	if d.bad {
		return false
	}
	r.st.markerTS = m.TS
	return true
}

// decodeLost decodes the body of a lost-events record into l and reports whether it was well formed.
func (r *Reader) decodeLost(d *dec, l *Lost) bool {
	l.Source = r.str(d)
	l.Count = d.uvarint()
	return !d.bad
}
