package export

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/perflab/perflab/breakdown"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// perfettoPass is the one pass of the Perfetto JSON export over its traces (a
// protocol.Visitor): it writes each record as it comes, keeps the messages for the round
// trips in log, and feeds flows the pass for the flows between the hosts of a merged trace.
type perfettoPass struct {
	pw    *perfettoWriter
	st    *traceState
	log   *messageLog
	flows *breakdown.Visitor
	other []string         // each trace's description, for otherData
	recs  []trace.Recovery // what each trace's reader recovered
}

func newPerfettoPass(pw *perfettoWriter) (*perfettoPass, error) {
	log, err := newMessageLog()
	if err != nil {
		return nil, err
	}
	return &perfettoPass{pw: pw, log: log, flows: breakdown.NewVisitor(nil)}, nil
}

func (pp *perfettoPass) Begin(i int, path string, meta trace.Meta) {
	pp.st = &traceState{index: i, path: path, meta: meta, conns: map[uint64]string{}, lost: map[string]uint64{}}
	pp.pw.clocks = append(pp.pw.clocks, meta.Clocks)
}

func (pp *perfettoPass) Record(rec *trace.Record) {
	if pp.pw.err == nil {
		pp.pw.record(pp.st, rec)
	}
}

func (pp *perfettoPass) Message(m *protocol.Message)                   { pp.log.add(m) }
func (pp *perfettoPass) Answered(*protocol.Message, protocol.Answered) {}

func (pp *perfettoPass) End(_ int, rc trace.Recovery) {
	pp.other = append(pp.other, describeTrace(pp.st, rc))
	pp.recs = append(pp.recs, rc)
}

// messageLog keeps, in a temporary file, what the round trips and the in-flight counters need
// of each message of the pass, in order, so that they can be written after every record
// without holding the messages in memory or reading the traces again.
type messageLog struct {
	f   *os.File
	w   *bufio.Writer
	buf []byte
	err error // the first write error
}

func newMessageLog() (*messageLog, error) {
	f, err := os.CreateTemp("", "perflab-perfetto-*")
	if err != nil {
		return nil, fmt.Errorf("keep the round trips: %w", err)
	}
	// Unix keeps the open file until it is closed; Windows refuses, and close removes it.
	os.Remove(f.Name())
	return &messageLog{f: f, w: bufio.NewWriterSize(f, 64<<10)}, nil
}

// Kinds of log entries: a message that only moves the time of its process's counter, and a
// reply that ends a round trip.
const (
	logTime      = 0
	logRoundTrip = 1
)

// add logs m.
func (l *messageLog) add(m *protocol.Message) {
	b := l.buf[:0]
	rt := m.IsReply && m.RTT > 0
	if rt {
		b = append(b, logRoundTrip)
	} else {
		b = append(b, logTime)
	}
	b = binary.AppendUvarint(b, uint64(m.Trace))
	b = binary.AppendUvarint(b, uint64(m.PID))
	b = binary.AppendUvarint(b, m.Conn)
	b = binary.AppendVarint(b, m.TS)
	if rt {
		b = binary.AppendUvarint(b, uint64(m.TID))
		b = binary.AppendVarint(b, m.End)
		b = binary.AppendVarint(b, m.ReqTS)
		b = binary.AppendVarint(b, m.RTT)
		b = binary.AppendUvarint(b, m.Command)
		b = binary.AppendVarint(b, m.Size)
		b = binary.AppendUvarint(b, m.ReqID)
		b = appendLogString(b, m.Name)
		b = appendLogString(b, m.Protocol)
	}
	l.buf = b
	if l.err == nil {
		_, l.err = l.w.Write(b)
	}
}

func appendLogString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// replay calls fn with each logged message, in order; the Message is reused.
func (l *messageLog) replay(fn func(*protocol.Message) error) error {
	if l.err == nil {
		l.err = l.w.Flush()
	}
	if l.err != nil {
		return fmt.Errorf("keep the round trips: %w", l.err)
	}
	if _, err := l.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("read the round trips back: %w", err)
	}
	r := logReader{r: bufio.NewReaderSize(l.f, 64<<10)}
	var m protocol.Message
	for {
		ok, err := r.next(&m)
		if err != nil {
			return fmt.Errorf("read the round trips back: %w", err)
		}
		if !ok {
			return nil
		}
		if err := fn(&m); err != nil {
			return err
		}
	}
}

func (l *messageLog) close() {
	l.f.Close()
	os.Remove(l.f.Name())
}

// logReader decodes messageLog entries.
type logReader struct {
	r      *bufio.Reader
	str    []byte
	intern map[string]string // command and protocol names: few, repeated
	err    error
}

// maxInterned bounds the names a logReader keeps to hand out again.
const maxInterned = 4096

// next decodes the next entry into m; false at the end of the log.
func (r *logReader) next(m *protocol.Message) (bool, error) {
	kind, err := r.r.ReadByte()
	if err == io.EOF {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	*m = protocol.Message{Trace: int(r.uvarint()), PID: uint32(r.uvarint()), Conn: r.uvarint(), TS: r.varint()}
	if kind == logRoundTrip {
		m.IsReply = true
		m.TID = uint32(r.uvarint())
		m.End, m.ReqTS, m.RTT = r.varint(), r.varint(), r.varint()
		m.Command, m.Size, m.ReqID = r.uvarint(), r.varint(), r.uvarint()
		m.Name, m.Protocol = r.string(), r.string()
	}
	if r.err == io.EOF {
		r.err = errors.New("log cut short")
	}
	return true, r.err
}

func (r *logReader) uvarint() uint64 {
	v, err := binary.ReadUvarint(r.r)
	if r.err == nil {
		r.err = err
	}
	return v
}

func (r *logReader) varint() int64 {
	v, err := binary.ReadVarint(r.r)
	if r.err == nil {
		r.err = err
	}
	return v
}

func (r *logReader) string() string {
	n := r.uvarint()
	if r.err != nil || n > 1<<20 {
		if r.err == nil {
			r.err = errors.New("string too long")
		}
		return ""
	}
	if uint64(cap(r.str)) < n {
		r.str = make([]byte, n)
	}
	r.str = r.str[:n]
	if _, err := io.ReadFull(r.r, r.str); err != nil && r.err == nil {
		r.err = err
	}
	s, ok := r.intern[string(r.str)]
	if !ok {
		s = string(r.str)
		if r.intern == nil {
			r.intern = map[string]string{}
		}
		if len(r.intern) < maxInterned {
			r.intern[s] = s
		}
	}
	return s
}
