package protocol

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/perflab/perflab/trace"
)

// Sink receives what a scan of traces yields, in file order: each record before the decoder
// sees it, and the messages the decoder rebuilds, each right after the event that completed it.
// Pointers passed to a Sink are reused after the call returns.
type Sink interface {
	Begin(i int, path string, meta trace.Meta)
	// Record is one record of the trace: an event, a connection, a marker or a lost count.
	Record(rec *trace.Record)
	Message(m *Message)
	// Answered reports, after m, a further request that the reply m answered.
	Answered(m *Message, req Answered)
	// End closes trace i with what its reader recovered and the decoder that decoded it.
	End(i int, rec trace.Recovery, d *Decoder)
}

// MessageStore is a Sink that keeps the messages it is given (in a batch for another
// goroutine, say): the decoder builds each message in the storage NextMessage returns and then
// passes that same pointer to Message, so that a message is written once instead of built and
// copied. The storage is the decoder's from NextMessage until the next call of the Sink.
type MessageStore interface {
	NextMessage() *Message
}

// Decoder decodes the messages of one trace; after the trace, its methods say what it saw.
type Decoder struct {
	trace    int
	fixed    *Spec // the spec chosen by Options; nil for auto
	builtins map[string]*Spec
	conns    map[uint64]*connDecoder
	recent   [recentConns]*connDecoder // conns' entries looked up lately, by key modulo recentConns
	versions map[uint64][3]int
	m        Message
	out      Sink
	store    MessageStore           // out, when it keeps messages: they are built in its storage
	protos   map[string]bool        // protocols seen
	chosen   map[uint64]*Spec       // auto: the protocols the trial chose for connections not started yet
	batch    Batch                  // Message.Batch's storage
	frame    frameInfo              // the frame being emitted, shared by every framer of the trace
	spare    []*framer              // framers released by idle connections, for reuse
	hot      [hotConns]*connDecoder // the connections that carried the latest calls (touch), a ring
	hotPos   int                    // the ring's oldest
	spareQ   [][]pendingReq         // their request queues' storage, empty, for reuse
	retired  retired                // what is kept of the connections finished early (retire)
	flushEv  trace.Event            // scratch for the framers flushed by retire
	// digestBuf is scratch for requestDigest: a request's captured bytes, its ids zeroed
	digestBuf [framePeek]byte

	// auto detection: the connections retired before the trace's end (retire), and those of
	// them that carried data again (Returned)
	gone                  goneSet
	ending                bool // the trace's end retires the rest: nothing more to remember
	resumed, resumedOther uint64
	resumedNotes          []string
}

// Resolve returns the spec that decodes every connection: spec when it is set, else the one
// loaded from file when that is set, else the built-in spec named name; nil for "auto" (or ""),
// which detects each connection's protocol.
func Resolve(name, file string, spec *Spec) (*Spec, error) {
	switch {
	case spec != nil:
		return spec, nil
	case file != "":
		return LoadSpec(file)
	case name == "" || name == "auto":
		return nil, nil
	}
	return BuiltinSpec(name)
}

// NewDecoder returns a decoder of trace i that decodes every connection with fixed, or, when
// fixed is nil, with the protocol its first bytes show (Scan chooses by trial decoding
// instead, in the same pass), and feeds out the messages.
func NewDecoder(i int, fixed *Spec, out Sink) (*Decoder, error) {
	d := &Decoder{trace: i, fixed: fixed, out: out, conns: map[uint64]*connDecoder{},
		versions: map[uint64][3]int{}, builtins: map[string]*Spec{}, protos: map[string]bool{}}
	d.store, _ = out.(MessageStore)
	for _, n := range Builtins() {
		s, err := BuiltinSpec(n)
		if err != nil {
			return nil, err
		}
		d.builtins[n] = s
	}
	return d, nil
}

// detect picks a protocol for a connection from its first data event: the Venus magic, a
// ggml-rpc HELLO (command byte 14, alone or followed by a small size), a RESP array, or raw.
func (d *Decoder) detect(ev *trace.Event) *Spec {
	if d.fixed != nil {
		return d.fixed
	}
	p := ev.Payload
	switch {
	case ev.Op == trace.OpFrameSend || ev.Op == trace.OpFrameRecv:
		return d.builtins["venus"]
	case len(p) >= 4 && uint64(le.Uint32(p)) == d.builtins["venus"].Request.Magic.Value: // the VPLS magic, from the spec
		return d.builtins["venus"]
	case len(p) >= 1 && p[0] == 14 && (ev.Bytes == 1 || (len(p) >= 9 && le.Uint64(p[1:9]) <= 4096)):
		return d.builtins["ggml-rpc"]
	case len(p) >= 4 && p[0] == '*' && p[1] >= '0' && p[1] <= '9':
		return d.builtins["resp"]
	}
	return d.builtins["raw"]
}

// choice returns the protocol of the connection whose first data event is ev: the one the
// trial chose for it (taken: the trial's choices last only until the connection starts), else
// the one its first bytes show (detect).
func (d *Decoder) choice(ev *trace.Event) *Spec {
	key := connKey(ev)
	if s := d.chosen[key]; s != nil {
		delete(d.chosen, key)
		return s
	}
	if c := d.recent[key%recentConns]; c != nil && c.key == key && c.first != nil {
		return d.resumedChoice(c, ev)
	}
	return d.detect(ev)
}

// recentConns is how many connections the decoder finds without a map look-up (a power of 2).
const recentConns = 64

func (d *Decoder) conn(ev *trace.Event) *connDecoder {
	key := connKey(ev)
	slot := &d.recent[key%recentConns]
	if c := *slot; c != nil && c.key == key {
		return c
	}
	c := d.conns[key]
	if c == nil {
		c = &connDecoder{d: d, key: key, id: ev.Conn, pid: ev.PID}
		if d.fixed != nil {
			c.spec = d.fixed
			c.version = d.fixed.defVer
		} else if first, ok := d.gone.find(key); ok {
			c.first = first // retired while idle, and back
		}
		d.conns[key] = c
	}
	*slot = c
	return c
}

// forget drops connection key's decoding state.
func (d *Decoder) forget(key uint64) {
	if slot := &d.recent[key%recentConns]; *slot != nil && (*slot).key == key {
		*slot = nil
	}
	delete(d.conns, key)
}

// Event decodes one event of the trace; failed calls and calls that moved no bytes are skipped.
func (d *Decoder) Event(ev *trace.Event) { d.event(ev) }

// event is Event; it returns the connection when ev is a data event it took (one that moved
// bytes, in a direction), else nil.
func (d *Decoder) event(ev *trace.Event) *connDecoder {
	if ev.Errno != 0 || ev.Bytes <= 0 {
		return nil
	}
	c := d.conn(ev)
	if ev.Dir != trace.DirSend && ev.Dir != trace.DirRecv {
		return nil // the connection is known, with nothing to decode
	}
	c.event(ev)
	return c
}

// msg returns the storage of the next message (slot), reset and filled from ev.
func (d *Decoder) msg(c *connDecoder, ev *trace.Event) *Message {
	m := d.slot()
	*m = Message{Trace: d.trace, Conn: ev.Conn, Dir: ev.Dir, TS: ev.TS, End: ev.TS + ev.Dur,
		PID: ev.PID, TID: ev.TID, Source: ev.Source, Protocol: c.spec.Name, spec: c.spec, FirstEnd: ev.TS + ev.Dur, CallNS: ev.Dur}
	return m
}

// slot returns where to build the next message: the sink's storage when it keeps messages,
// else the decoder's own.
func (d *Decoder) slot() *Message {
	if d.store != nil {
		return d.store.NextMessage()
	}
	return &d.m
}

func (d *Decoder) deliver(m *Message) { d.out.Message(m) }

// framer returns a fresh framer of hdr's frames, a spare one when there is any.
func (d *Decoder) framer(spec *Spec, hdr *Header, extra *Field) *framer {
	var f *framer
	if n := len(d.spare); n > 0 {
		f, d.spare = d.spare[n-1], d.spare[:n-1]
		f.init(spec, hdr, extra)
	} else {
		f = newFramer(spec, hdr, extra)
	}
	f.out = &d.frame
	return f
}

// Flush ends every connection: frames in progress come out truncated.
func (d *Decoder) Flush() {
	ev := new(trace.Event) // one for every framer: a trace of many connections would make one each
	// In connection order, not the map's: what the flush delivers feeds order-dependent
	// aggregates (a process's blocked time), and the same trace must give the same report.
	for _, id := range slices.Sorted(maps.Keys(d.conns)) {
		d.flushConn(d.conns[id], ev)
	}
}

// flushConn ends connection c: its frame in progress comes out truncated, its burst or text
// in progress is delivered. ev is scratch for the framers.
func (d *Decoder) flushConn(c *connDecoder, ev *trace.Event) {
	c.flushRaw()
	for dir, f := range c.framers {
		if f == nil {
			continue
		}
		*ev = trace.Event{Conn: c.id, PID: c.pid, Dir: trace.Dir(dir)}
		c.ev = ev
		f.flush(f.ts, c)
	}
	send, recv := c.text[trace.DirSend], c.text[trace.DirRecv]
	if send != nil && recv != nil && recvFirst(send.open, send.ts, recv.open, recv.ts) {
		send, recv = recv, send
	}
	for _, st := range [...]*textStream{c.text[trace.DirNone], send, recv} {
		if st != nil {
			st.flush()
		}
	}
	if c.spec != nil && c.spec.Kind == "resp" {
		c.respFlush()
	}
}

// recvFirst reports whether, at a connection's end, the message in progress received (open,
// started at recvTS) ends before the one sent: the messages in progress end in the order they
// started, so that a server's last request comes before the reply it was answered with, which
// would otherwise, its direction first, find no request to answer.
func recvFirst(sendOpen bool, sendTS int64, recvOpen bool, recvTS int64) bool {
	return recvOpen && (!sendOpen || recvTS < sendTS)
}

// Stats returns how many times framers lost frame boundaries, requests dropped from pairing,
// and requests still awaiting a reply.
func (d *Decoder) Stats() (lostSync, dropped, waiting uint64) {
	lostSync, dropped, waiting = d.retired.lostSync, d.retired.dropped, d.retired.waiting
	for _, c := range d.conns {
		if !c.tracer && c.reqDir == trace.DirSend { // a client's requests
			waiting += c.pairs.waiting()
		}
		lostSync += c.lostSync
		for _, f := range c.framers {
			if f != nil {
				lostSync += f.lost
			}
		}
		if !c.tracer { // a tracer's own round-trip events count its unanswered requests
			dropped += c.dropped + c.pairs.dropped
		}
	}
	return
}

// Scan reads the traces ins in turn, each opened once, decodes their messages with spec (nil:
// detect each connection's protocol) and feeds out. A trace that cannot be read gives a
// *ReadError naming it (and the offset, for a bad format); the traces before it have been fed.
func Scan(ins []Input, spec *Spec, out Sink) error {
	var rec trace.Record
	for i, in := range ins {
		if err := scanOne(i, in, spec, out, &rec); err != nil {
			return err
		}
	}
	return nil
}

// ReadError is a trace that could not be read: it names the file.
type ReadError struct {
	Path string
	Err  error
}

func (e *ReadError) Error() string { return fmt.Sprintf("read %s: %v", e.Path, e.Err) }
func (e *ReadError) Unwrap() error { return e.Err }

// NewReadError returns the ReadError of the trace at path: err, without the path when err
// names it already (an *os.PathError).
func NewReadError(path string, err error) *ReadError { return &ReadError{path, unwrapPath(err)} }

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// msgSink delivers messages to a callback and ignores the rest.
type msgSink struct {
	fn  func(*Message) error
	err error
}

func (s *msgSink) Begin(int, string, trace.Meta)     {}
func (s *msgSink) Record(*trace.Record)              {}
func (s *msgSink) End(int, trace.Recovery, *Decoder) {}
func (s *msgSink) Answered(*Message, Answered)       {}
func (s *msgSink) Message(m *Message) {
	if s.err == nil {
		s.err = s.fn(m)
	}
}

// Messages decodes the protocol messages of the traces ins with spec (nil: detect each
// connection's protocol), in each trace's order, and calls fn for each; fn's Message is reused
// after fn returns. Replies carry their request's command and the round-trip time. An error
// from fn stops the scan and is returned. A trace that cannot be read gives a *ReadError naming
// the file (and the offset, for a bad format).
func Messages(ins []Input, spec *Spec, fn func(*Message) error) error {
	s := &msgSink{fn: fn}
	err := Scan(ins, spec, s)
	if err != nil {
		return err
	}
	return s.err
}
