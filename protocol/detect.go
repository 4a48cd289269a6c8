package protocol

import (
	"github.com/perflab/perflab/trace"
)

// trialEvents is how many data events of each connection every candidate decoder is tried on
// when the protocol is chosen automatically.
const trialEvents = 256

// maxTrialConns bounds how many connections are on trial at once. Every candidate decoder keeps
// state for each connection on trial, and the pass holds back the records from the first data
// event of the oldest one on, so a trace of many short connections (which never reach
// trialEvents) would otherwise hold five decoders' state and its records until the end: beyond
// this many, the connection on trial the longest is decided on what it has shown.
const maxTrialConns = 4096

// candidates are the protocols auto detection tries on each connection, in order of
// preference when two explain as many bytes. venus tells venusd's framing from real Venus
// itself; raw explains nothing and is what is left.
var candidates = []string{"venus", "ggml-rpc", "resp", "http", "memcached"}

// trial chooses, for each connection of a trace, the protocol whose decoder explains the most
// bytes of its first trialEvents data events (bytes of messages it decoded whole), while the
// trace is read: it sees every record as it is read, ahead of the decoder, which waits for a
// connection's choice before its first data event (pass). Connections whose first data event
// is a tracer's frame, the Venus magic or a ggml-rpc HELLO keep the first-bytes detection.
type trial struct {
	decs   []*Decoder       // the candidates, decoding into nothing
	first  *Decoder         // for the first-bytes detection
	cf     *CipherFilter    // the trial's own, asked only of the data events
	seen   keyInts          // connection key -> data events tried, or firstBytes
	chosen map[uint64]*Spec // decided and not yet taken by the decoder (Decoder.chosen)
	order  []uint64         // connections on trial, oldest first (some may be decided already)

	// bare holds the connections on trial whose data events so far carried no captured byte
	// (a trace recorded without payload heads): the candidates have not seen them yet, since
	// no decoder can explain a byte it never saw. The first event with bytes hands the
	// candidates the connection's earlier events (replay) and then its own; a connection
	// decided while bare is raw, as the candidates would have found it, without their state.
	bare   map[uint64]bool
	replay func(key uint64, fn func(*trace.Event)) // the connection's data events held so far, in order
	eager  bool                                    // feed bare connections too (tests compare both)

	// over holds connections lately found off trial for good (seen firstBytes or
	// trialEvents, which never changes again), by key modulo recentConns, plus one: 0 is none.
	over [recentConns]uint64
}

// seen values besides the number of data events tried.
const (
	firstBytes = -1 // the first data event said what the connection speaks: not tried
)

// newTrial returns the trial of trace i (with meta); what it decides goes into chosen.
func newTrial(i int, meta trace.Meta, chosen map[uint64]*Spec) (*trial, error) {
	sink := &msgSink{fn: func(*Message) error { return nil }}
	t := &trial{decs: make([]*Decoder, len(candidates)), cf: NewCipherFilter(meta),
		chosen: chosen, bare: map[uint64]bool{}}
	for k, n := range candidates {
		s, err := BuiltinSpec(n)
		if err != nil {
			return nil, err
		}
		if t.decs[k], err = NewDecoder(i, s, sink); err != nil {
			return nil, err
		}
	}
	var err error
	t.first, err = NewDecoder(i, nil, sink)
	return t, err
}

// record tries the candidates on rec, when it is a data event of a connection on trial.
func (t *trial) record(rec *trace.Record) {
	ev := &rec.Event
	if rec.Kind != trace.KindEvent || !trialData(ev) {
		return
	}
	key := connKey(ev)
	// A connection off trial for good is done with, its ciphertext too: what the filter
	// would learn of it is never asked again.
	if t.over[key%recentConns] == key+1 || t.cf.Cipher(ev) {
		return
	}
	k, ok := t.seen.get(key)
	if !ok {
		// A tracer's frames, the Venus magic and a ggml-rpc HELLO say what the connection
		// speaks; the others are tried.
		if sp := t.first.detect(ev); sp.Name == "venus" || sp.Name == "ggml-rpc" {
			t.seen.set(key, firstBytes)
			t.over[key%recentConns] = key + 1
			return
		}
	}
	if k < 0 || k >= trialEvents {
		t.over[key%recentConns] = key + 1
		return
	}
	if k == 0 {
		t.begin(key)
	}
	t.seen.set(key, k+1)
	t.feed(key, k, ev)
	if k+1 == trialEvents {
		t.decide(key)
	}
}

// feed hands ev, the k-th data event of connection key on trial, to the candidates, unless the
// connection is bare (no captured byte yet); its first event with bytes first hands them the
// events they were spared, so that they see each connection's events exactly as if fed all
// along.
func (t *trial) feed(key uint64, k int, ev *trace.Event) {
	switch {
	case !hasBytes(ev) && (k == 0 || t.bare[key]) && !t.eager:
		t.bare[key] = true
		return
	case t.bare[key]:
		delete(t.bare, key)
		t.replay(key, func(e *trace.Event) {
			if trialData(e) && !hasBytes(e) && !t.cf.Cipher(e) {
				t.all(e)
			}
		})
	}
	t.all(ev)
}

// all hands ev to every candidate.
func (t *trial) all(ev *trace.Event) {
	for _, d := range t.decs {
		d.Event(ev)
	}
}

// hasBytes reports whether a candidate could explain any of ev's bytes: it carries a captured
// head, or it is a tracer's frame (a whole message by itself).
func hasBytes(ev *trace.Event) bool {
	return len(ev.Payload) > 0 || ev.Op == trace.OpFrameSend || ev.Op == trace.OpFrameRecv
}

// trialData reports whether ev is a data event the trial counts (before the cipher filter).
func trialData(ev *trace.Event) bool {
	return ev.Errno == 0 && ev.Bytes > 0 && (ev.Dir == trace.DirSend || ev.Dir == trace.DirRecv)
}

// begin puts connection key on trial, and decides the oldest on trial when there are too many.
func (t *trial) begin(key uint64) {
	t.order = append(t.order, key)
	for len(t.order) > maxTrialConns {
		old := t.order[0]
		t.order = t.order[1:]
		if n, _ := t.seen.get(old); n > 0 && n < trialEvents {
			t.decide(old)
		}
	}
}

// decide chooses the protocol of connection key on what the candidates have seen of it.
func (t *trial) decide(key uint64) {
	if t.bare[key] {
		delete(t.bare, key)
		t.chosen[key], _ = BuiltinSpec("raw")
	} else {
		t.chosen[key] = best(t.decs, key)
	}
	t.seen.set(key, trialEvents)
}

// waiting reports whether connection key is on trial and not decided yet: the decoder must not
// take its data events yet.
func (t *trial) waiting(key uint64) bool {
	if t.over[key%recentConns] == key+1 {
		return false
	}
	n, _ := t.seen.get(key)
	return n > 0 && n < trialEvents
}

// finish decides every connection still on trial, at the end of the trace (or where it could
// not be read further), after the candidates have ended theirs.
func (t *trial) finish() {
	for _, d := range t.decs {
		d.Flush()
	}
	for _, key := range t.order {
		if t.waiting(key) {
			t.decide(key)
		}
	}
	t.order = nil
}

// minTrialShare is the least share of a connection's bytes a decoder must explain to be
// chosen for it, of the bytes it could see: those past the captured heads that it could not
// frame (pipelined requests past a short head) are no evidence against it. Below, the
// connection is raw.
const minTrialShare = 0.5

// best returns the candidate that explained the most of connection key's bytes, and forgets
// the candidates' state of it.
func best(decs []*Decoder, key uint64) *Spec {
	var sp *Spec
	var most, data, unseen int64
	for _, d := range decs {
		c := d.conns[key]
		if c == nil {
			continue
		}
		data = c.data
		if x := c.decoded(); x > most {
			sp, most, unseen = c.spec, x, c.unseen
		}
		d.forget(key)
	}
	if sp == nil || float64(most) < minTrialShare*float64(data-unseen) {
		sp, _ = BuiltinSpec("raw")
	}
	return sp
}

// connKey is the key of an event's connection in decoder.conns.
// TLS plaintext has a stream of its own, next to the ciphertext of the same connection.
func connKey(ev *trace.Event) uint64 {
	if ev.Conn == 0 {
		return 1<<63 | uint64(ev.PID)
	}
	if ev.Op.Plaintext() {
		return 1<<62 | ev.Conn
	}
	return ev.Conn
}

// decoded returns the bytes of the connection that its decoder explained: bytes of messages
// decoded whole.
func (c *connDecoder) decoded() int64 {
	x := c.explained
	for _, st := range c.text {
		if st != nil {
			x += st.explained
		}
	}
	return min(x, c.data)
}
