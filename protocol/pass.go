package protocol

import (
	"cmp"
	"io"
	"maps"
	"slices"

	"github.com/perflab/perflab/trace"
)

// pass reads one trace once and drives its decoder. With a protocol given, every record goes
// to the sink and the decoder as it is read. With auto detection, the trial sees each record
// as it is read, and the sink and the decoder see it in the same order but may see it later:
// from the first data event of a connection still on trial, records wait in a queue (held)
// until the trial has decided that connection, so that every message comes out exactly where
// it would had the choice been known from the start. The queue holds at most the records read
// while the oldest connection on trial shows its first trialEvents data events or
// maxTrialConns newer connections come to trial, and never more than maxHeld.
type pass struct {
	path  string
	d     *Decoder
	out   Sink
	cf    *CipherFilter
	trial *trial         // nil with a protocol given
	held  []trace.Record // records waiting for the trial, oldest first from held[head]
	head  int

	// Auto detection retires the connections that have carried data least recently once more
	// than maxLiveConns have: stamp numbers the data events, each live connection holds its
	// latest (connDecoder.stamp, 0 once retired), live counts them, and lru has the
	// (connection, stamp) pairs in stamp order, stale ones among them (a later stamp of the
	// same connection, or a retired connection).
	retires bool
	stamp   uint64
	live    int
	lru     []lruEntry
	lruAt   int
	lruOn   bool // lru is kept: live went past maxLiveConns once (until then no connection retires)
}

type lruEntry struct {
	c     *connDecoder
	stamp uint64
}

// maxLiveConns is how many connections that carried data auto detection keeps decoding state
// for; beyond, the one whose data is oldest is retired: what it holds in progress is delivered
// and its counts kept (Decoder.retire). A trace of many short connections then holds the state
// of this many at most, besides those in the middle of an exchange (midExchange), which stay.
// A retired connection that carries data again is decoded afresh, as the protocol it was
// counted as unless its bytes show another (Decoder.resumedChoice), and counts once.
const maxLiveConns = 4096

// retireLooks is how many live connections a data event looks at, at most, for one to retire
// (pass.touch): one more than each event can add, so that the live connections come back down
// to maxLiveConns once the exchanges in progress end.
const retireLooks = 4

// scanOne reads trace i from in in one pass, decoding it with spec (nil: auto detection).
func scanOne(i int, in Input, spec *Spec, out Sink, rec *trace.Record) error {
	f, err := openInput(in)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := trace.NewReader(f)
	if err != nil {
		return &ReadError{in.Name, err}
	}
	d, err := NewDecoder(i, spec, out)
	if err != nil {
		return err
	}
	p := &pass{path: in.Name, d: d, out: out, cf: NewCipherFilter(r.Meta())}
	if spec == nil {
		if p, err = newAutoPass(i, in.Name, r.Meta(), d, out); err != nil {
			return err
		}
	}
	out.Begin(i, in.Name, r.Meta())
	for {
		err := r.Next(rec)
		if err == io.EOF {
			break
		}
		if err != nil {
			p.finish() // what was read before the damage is decoded, as it would have been
			return &ReadError{in.Name, err}
		}
		p.record(rec)
	}
	p.finish()
	p.end()
	out.End(i, r.Recovery(), d)
	return nil
}

// newAutoPass is the pass of trace i (named name, with meta) when its protocols are detected:
// each connection on trial among the candidate decoders, their choices kept in d, and
// connections retired once enough others have carried data since.
func newAutoPass(i int, name string, meta trace.Meta, d *Decoder, out Sink) (*pass, error) {
	p := &pass{path: name, d: d, out: out, cf: NewCipherFilter(meta), retires: true}
	d.chosen = map[uint64]*Spec{}
	var err error
	if p.trial, err = newTrial(i, meta, d.chosen); err != nil {
		return nil, err
	}
	p.trial.replay = p.heldEvents
	return p, nil
}

// record takes the next record of the trace.
func (p *pass) record(rec *trace.Record) {
	if p.trial == nil {
		p.decode(rec)
		return
	}
	p.trial.record(rec)
	if p.head == len(p.held) && !p.waits(rec) {
		p.decode(rec)
		return
	}
	p.hold(rec)
	p.drain()
	for len(p.held)-p.head > maxHeld {
		// The oldest connection on trial has kept too many records waiting: it is decided on
		// what it has shown (a connection quiet after a few events while others talk).
		p.trial.decide(connKey(&p.held[p.head].Event))
		p.drain()
	}
}

// maxHeld bounds the records that wait for the trial (each at most some 500 bytes with its
// payload head): beyond, the connection that holds them back is decided early.
const maxHeld = 1 << 17

// waits reports whether rec must wait for the trial: an event of a connection on trial and
// not decided yet.
func (p *pass) waits(rec *trace.Record) bool {
	return rec.Kind == trace.KindEvent && p.trial.waiting(connKey(&rec.Event))
}

// hold queues a copy of rec; its payload goes into the storage of the slot it takes.
func (p *pass) hold(rec *trace.Record) {
	if p.head == len(p.held) {
		p.held, p.head = p.held[:0], 0
	} else if p.head >= 1024 && p.head >= len(p.held)/2 {
		n := copy(p.held, p.held[p.head:])
		clear(p.held[n:len(p.held)]) // their payloads now belong to the slots moved down
		p.held, p.head = p.held[:n], 0
	}
	var buf []byte
	if n := len(p.held); n < cap(p.held) {
		buf = p.held[:n+1][n].Event.Payload[:0]
	}
	payload := rec.Event.Payload
	p.held = append(p.held, *rec)
	if payload != nil {
		p.held[len(p.held)-1].Event.Payload = append(buf, payload...)
	}
}

// heldEvents calls fn with each held event of connection key, in order. A connection on trial
// and not decided has every record from its first data event on held (it waits), so these are
// all its events since then.
func (p *pass) heldEvents(key uint64, fn func(*trace.Event)) {
	for i := p.head; i < len(p.held); i++ {
		if rec := &p.held[i]; rec.Kind == trace.KindEvent && connKey(&rec.Event) == key {
			fn(&rec.Event)
		}
	}
}

// drain decodes the held records up to the first that still waits for the trial.
func (p *pass) drain() {
	for p.head < len(p.held) && !p.waits(&p.held[p.head]) {
		p.decode(&p.held[p.head])
		p.head++
	}
}

// finish decides the connections still on trial and decodes what was held for them.
func (p *pass) finish() {
	if p.trial == nil {
		return
	}
	p.trial.finish()
	p.drain()
	p.held, p.head = nil, 0
}

// decode hands rec to the sink, and a data event to the decoder; TLS ciphertext is not
// decoded (its plaintext is).
func (p *pass) decode(rec *trace.Record) {
	p.out.Record(rec)
	if rec.Kind != trace.KindEvent {
		return
	}
	ev := &rec.Event
	if p.cf.Cipher(ev) {
		return
	}
	// a data event the decoder takes keeps its connection live; TLS ciphertext does not
	if c := p.d.event(ev); c != nil && p.retires {
		p.touch(c)
	}
}

// touch notes a data event of connection c, and retires the connection whose data is oldest
// when more than maxLiveConns have carried data.
func (p *pass) touch(c *connDecoder) {
	p.stamp++
	if c.stamp == 0 {
		p.live++
	}
	c.stamp = p.stamp
	if p.lruOn || p.live > maxLiveConns {
		p.order(c)
	}
}

// order keeps c's place in the order of the live connections by their latest data, and
// retires the connection whose data is oldest when more than maxLiveConns have carried data.
func (p *pass) order(c *connDecoder) {
	if !p.lruOn {
		// Until a connection must retire (touch) the order is not kept; it is needed from
		// then on: the live connections by stamp, as lru would hold them compacted
		// (compactLRU).
		p.lruOn = true
		for _, c := range p.d.conns {
			if c.stamp != 0 {
				p.lru = append(p.lru, lruEntry{c, c.stamp})
			}
		}
		slices.SortFunc(p.lru, func(a, b lruEntry) int { return cmp.Compare(a.stamp, b.stamp) })
	} else {
		p.lru = append(p.lru, lruEntry{c, p.stamp})
	}
	// Connections in the middle of an exchange stay live past maxLiveConns and go to the back
	// of the queue; each data event looks at a few entries at most, so that a trace of very
	// many connections waiting at once costs no more per event.
	for look := 0; p.live > maxLiveConns && look < retireLooks && p.lruAt < len(p.lru); look++ {
		e := p.lru[p.lruAt]
		p.lru[p.lruAt].c = nil
		p.lruAt++
		if e.c.stamp != e.stamp {
			look--
			continue
		}
		if e.c.midExchange() {
			p.lru = append(p.lru, e)
			continue
		}
		e.c.stamp = 0
		p.live--
		p.d.retire(e.c.key)
	}
	if len(p.lru) > 2*p.live+1024 {
		p.compactLRU()
	}
}

// compactLRU drops the stale entries of lru and those popped already.
func (p *pass) compactLRU() {
	live := p.lru[:0]
	for _, e := range p.lru[p.lruAt:] {
		if e.c.stamp == e.stamp {
			live = append(live, e)
		}
	}
	clear(p.lru[len(live):]) // the retired connections go
	p.lru, p.lruAt = live, 0
}

// end ends every connection at the end of the trace. With auto detection, the connections that
// carried data are retired (their counts summed by protocol, as Conns reports them, like the
// ones retired before), in connection order, like the rest that Flush ends.
func (p *pass) end() {
	d := p.d
	if p.trial == nil {
		d.Flush()
		return
	}
	d.ending = true
	for _, key := range slices.Sorted(maps.Keys(d.conns)) {
		if c := d.conns[key]; c.data > 0 {
			d.retire(key)
		} else {
			d.flushConn(c, &d.flushEv)
		}
	}
}
