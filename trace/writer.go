package trace

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// DefaultFlushRecords is the default WriterOptions.FlushRecords: records per chunk. 4096 events
// take about 30 KiB on disk without payload heads, so the per-chunk overhead (a 17-byte header
// and two CRCs) is negligible, a reader's working set stays small, and a crash loses at most one
// chunk: about 4096 records.
const DefaultFlushRecords = 4096

// DefaultFlushInterval is the default WriterOptions.FlushInterval. At 100 ms a slow or idle
// producer still reaches the disk ten times a second, so a crash loses at most the last 100 ms
// of records, while a busy producer (millions of events per second) fills chunks by count long
// before the timer fires.
const DefaultFlushInterval = 100 * time.Millisecond

// ErrClosed is returned by a Writer's methods after Close.
var ErrClosed = errors.New("trace: writer closed")

// Writer writes a trace file. It is safe for concurrent use.
type Writer struct {
	mu       sync.Mutex
	w        io.Writer
	closer   io.Closer // the file Create made, nil otherwise
	flushN   int
	interval time.Duration
	now      func() time.Time
	start    time.Time
	meta     Meta

	buf   []byte // chunkHeaderSize reserved bytes, then the records of the open chunk
	n     int    // records in buf
	st    encState
	timer *time.Timer
	armed bool // the timer is pending for the records in buf

	err    error // first write error: sticky
	closed bool

	events, conns, markers, chunks uint64
	connIDs                        map[uint64]struct{} // ids written: a connection updated later counts once
	lost                           map[string]uint64
	stats                          map[string]int64
}

// encState is the per-chunk delta state; it starts at zero in every chunk.
type encState struct {
	ts       int64
	pid, tid uint32
	conn     uint64
	op       [3]Op
	src      [3]Source
	req      uint64
	markerTS int64
}

// NewWriter writes the header and meta to w and returns a Writer.
func NewWriter(w io.Writer, meta Meta, opt *WriterOptions) (*Writer, error) {
	tw := &Writer{
		w:        w,
		flushN:   DefaultFlushRecords,
		interval: DefaultFlushInterval,
		now:      time.Now,
		meta:     meta,
		lost:     map[string]uint64{},
		stats:    map[string]int64{},
	}
	if opt != nil {
		if opt.FlushRecords > 0 {
			tw.flushN = opt.FlushRecords
		}
		if opt.FlushInterval != 0 {
			tw.interval = opt.FlushInterval
		}
		if opt.Now != nil {
			tw.now = opt.Now
		}
	}
	tw.start = tw.now()
	js, err := json.Marshal(&meta)
	if err != nil {
		return nil, fmt.Errorf("encode meta: %w", err)
	}
	if len(js) > maxJSONBody {
		return nil, fmt.Errorf("encode meta: %d bytes, more than %d", len(js), maxJSONBody)
	}
	hdr := make([]byte, 0, headerSize+chunkHeaderSize+len(js))
	hdr = append(hdr, Magic...)
	hdr = binary.LittleEndian.AppendUint16(hdr, FormatVersion)
	hdr = append(hdr, make([]byte, chunkHeaderSize)...)
	putChunkHeader(hdr[headerSize:], chunkMeta, 0, js)
	hdr = append(hdr, js...)
	if _, err := w.Write(hdr); err != nil {
		return nil, fmt.Errorf("write trace header: %w", err)
	}
	tw.chunks = 1
	tw.buf = make([]byte, chunkHeaderSize, 64<<10)
	return tw, nil
}

// Create creates the file path and returns a Writer whose Close also closes the file.
func Create(path string, meta Meta, opt *WriterOptions) (*Writer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create trace: %w", err)
	}
	w, err := NewWriter(f, meta, opt)
	if err != nil {
		f.Close()
		return nil, err
	}
	w.closer = f
	return w, nil
}

// begin locks w and checks that a record may be added.
func (w *Writer) begin() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	if w.err != nil {
		err := w.err
		w.mu.Unlock()
		return err
	}
	return nil
}

// end counts the record just appended, flushes a full chunk, arms the timer, and unlocks.
func (w *Writer) end() error {
	w.n++
	var err error
	if w.n >= w.flushN || len(w.buf) >= maxBodyTarget {
		err = w.flushLocked()
	} else if !w.armed && w.interval > 0 {
		w.armed = true
		if w.timer == nil {
			w.timer = time.AfterFunc(w.interval, w.timedFlush)
		} else {
			w.timer.Reset(w.interval)
		}
	}
	w.mu.Unlock()
	return err
}

func (w *Writer) timedFlush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed = false
	if w.closed || w.err != nil || w.n == 0 {
		return
	}
	w.flushLocked() // the error is sticky and returned by the next call
}

// WriteEvent buffers e; its Payload is copied (at most MaxPayload bytes of it).
func (w *Writer) WriteEvent(e *Event) error {
	if err := w.begin(); err != nil {
		return err
	}
	w.buf = appendEvent(w.buf, &w.st, e)
	w.events++
	return w.end()
}

func appendEvent(b []byte, st *encState, e *Event) []byte {
	dir := byte(e.Dir)
	if e.Dir > DirRecv {
		dir = evDirEsc
	}
	tag := byte(tagEvent) | dir<<evDirShift
	var extra byte
	samePT := e.PID == st.pid && e.TID == st.tid
	sameConn := e.Conn == st.conn
	sameOpSrc := dir != evDirEsc && e.Op == st.op[dir] && e.Source == st.src[dir]
	if samePT {
		tag |= evSamePIDTID
	}
	if sameConn {
		tag |= evSameConn
	}
	if sameOpSrc {
		tag |= evSameOpSrc
	}
	if e.Errno != 0 {
		tag |= evErrno
	}
	payload := e.Payload
	if len(payload) > MaxPayload {
		payload = payload[:MaxPayload]
	}
	if e.Command != 0 {
		extra |= exCommand
	}
	if e.ReqID != 0 {
		extra |= exReqID
	}
	if len(payload) > 0 {
		extra |= exPayload
	}
	if extra != 0 {
		tag |= evExtra
		b = append(b, tag, extra)
	} else {
		b = append(b, tag)
	}
	if dir == evDirEsc {
		b = append(b, byte(e.Dir))
	}
	b = binary.AppendVarint(b, e.TS-st.ts)
	b = binary.AppendVarint(b, e.Dur)
	if !samePT {
		b = binary.AppendUvarint(b, uint64(e.PID))
		b = binary.AppendUvarint(b, uint64(e.TID))
	}
	if !sameConn {
		b = binary.AppendUvarint(b, e.Conn)
	}
	if !sameOpSrc {
		b = append(b, byte(e.Op), byte(e.Source))
	}
	b = binary.AppendVarint(b, e.Bytes)
	if e.Errno != 0 {
		b = binary.AppendUvarint(b, uint64(e.Errno))
	}
	if e.Command != 0 {
		b = binary.AppendUvarint(b, uint64(e.Command))
	}
	if e.ReqID != 0 {
		b = binary.AppendVarint(b, int64(e.ReqID-st.req))
		st.req = e.ReqID
	}
	if len(payload) > 0 {
		b = binary.AppendUvarint(b, uint64(len(payload)))
		b = append(b, payload...)
	}
	st.ts = e.TS
	st.pid, st.tid = e.PID, e.TID
	st.conn = e.Conn
	if dir != evDirEsc {
		st.op[dir], st.src[dir] = e.Op, e.Source
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func checkString(what, s string) error {
	if len(s) > MaxString {
		return fmt.Errorf("write %s: %d bytes, more than %d", what, len(s), MaxString)
	}
	return nil
}

// WriteConnection buffers c. A connection may be written again to update it (LastSeen).
func (w *Writer) WriteConnection(c *Connection) error {
	if err := checkString("connection address", c.Local); err != nil {
		return err
	}
	if err := checkString("connection address", c.Remote); err != nil {
		return err
	}
	if err := w.begin(); err != nil {
		return err
	}
	b := append(w.buf, tagConnection)
	b = binary.AppendUvarint(b, c.ID)
	b = append(b, byte(c.Family))
	b = appendString(b, c.Local)
	b = appendString(b, c.Remote)
	b = binary.AppendUvarint(b, uint64(c.PID))
	b = binary.AppendVarint(b, c.FirstSeen)
	b = binary.AppendVarint(b, c.LastSeen-c.FirstSeen)
	w.buf = b
	if _, seen := w.connIDs[c.ID]; !seen {
		if w.connIDs == nil {
			w.connIDs = map[uint64]struct{}{}
		}
		w.connIDs[c.ID] = struct{}{}
		w.conns++
	}
	return w.end()
}

// WriteMarker buffers m.
func (w *Writer) WriteMarker(m *Marker) error {
	if err := checkString("marker name", m.Name); err != nil {
		return err
	}
	if err := checkString("marker text", m.Text); err != nil {
		return err
	}
	if err := w.begin(); err != nil {
		return err
	}
	b := append(w.buf, tagMarker)
	b = binary.AppendVarint(b, m.TS-w.st.markerTS)
	w.st.markerTS = m.TS
	b = binary.AppendVarint(b, m.Dur)
	b = binary.AppendUvarint(b, uint64(m.PID))
	b = binary.AppendUvarint(b, uint64(m.TID))
	b = appendString(b, m.Name)
	b = binary.AppendVarint(b, m.Value)
	b = appendString(b, m.Text)
	w.buf = b
	w.markers++
	return w.end()
}

// WriteLost records that source has lost total events so far (a cumulative count).
func (w *Writer) WriteLost(source string, total uint64) error {
	if err := checkString("lost source", source); err != nil {
		return err
	}
	if err := w.begin(); err != nil {
		return err
	}
	b := append(w.buf, tagLost)
	b = appendString(b, source)
	b = binary.AppendUvarint(b, total)
	w.buf = b
	w.lost[source] = total
	return w.end()
}

// SetStat sets a producer counter stored in the footer.
func (w *Writer) SetStat(name string, v int64) {
	w.mu.Lock()
	w.stats[name] = v
	w.mu.Unlock()
}

// Flush writes buffered records as a chunk.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	if w.err != nil {
		return w.err
	}
	return w.flushLocked()
}

func (w *Writer) flushLocked() error {
	if w.n == 0 {
		return nil
	}
	if w.chunks >= 1<<32-1 {
		// A sequence number would wrap: at one chunk per 100 ms that takes 13 years.
		w.err = errors.New("write trace chunk: more than 2^32-2 chunks in one file")
		return w.err
	}
	putChunkHeader(w.buf, chunkRecords, uint32(w.chunks), w.buf[chunkHeaderSize:])
	_, err := w.w.Write(w.buf)
	w.buf = w.buf[:chunkHeaderSize]
	w.n = 0
	w.st = encState{}
	if err != nil {
		w.err = fmt.Errorf("write trace chunk: %w", err)
		return w.err
	}
	w.chunks++
	return nil
}

// Close flushes, writes the footer, and closes the file if the Writer made it.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	w.closed = true
	if w.timer != nil {
		w.timer.Stop()
	}
	err := w.err
	if err == nil {
		err = w.flushLocked()
	}
	if err == nil {
		err = w.writeFooter()
	}
	if w.closer != nil {
		if cerr := w.closer.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close trace: %w", cerr)
		}
	}
	return err
}

func (w *Writer) writeFooter() error {
	end := w.now()
	f := Footer{
		Events:      w.events,
		Connections: w.conns,
		Markers:     w.markers,
		Chunks:      w.chunks,
		End:         end,
	}
	if w.meta.StartMono != 0 {
		// The writer has no access to the recorder's monotonic clock; it extends StartMono by
		// the time elapsed since the Writer was made.
		f.EndMono = w.meta.StartMono + int64(end.Sub(w.start))
	}
	if len(w.lost) > 0 {
		f.Lost = w.lost
	}
	if len(w.stats) > 0 {
		f.Stats = w.stats
	}
	js, err := json.Marshal(&f)
	if err != nil {
		return fmt.Errorf("encode footer: %w", err)
	}
	if len(js) > maxJSONBody {
		return fmt.Errorf("encode footer: %d bytes, more than %d (too many stats or lost sources)", len(js), maxJSONBody)
	}
	b := make([]byte, chunkHeaderSize, chunkHeaderSize+len(js))
	b = append(b, js...)
	putChunkHeader(b, chunkFooter, uint32(w.chunks), b[chunkHeaderSize:])
	if _, err := w.w.Write(b); err != nil {
		w.err = fmt.Errorf("write trace footer: %w", err)
		return w.err
	}
	return nil
}
