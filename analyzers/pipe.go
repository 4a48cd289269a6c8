package analyzers

import (
	"runtime"
	"slices"

	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// pipeBatch is how many records and messages the reading side hands the analysing side at
// once; pipeDepth how many such batches may be on their way (the memory of the pipe is about
// pipeDepth+2 batches of a few hundred bytes an item, about 9 MiB). Every hand-over can wake a
// goroutine parked on the other CPU, which on a VM is a halted vCPU's wake-up: 4,096 items a
// batch spends a quarter as many of them as 1,024 did (analyze of a 10 M-event trace 0.955 of
// the time; 256 took 1.34 times as long, 8,192 and 16,384 no less than 4,096).
const (
	pipeBatch = 4096
	pipeDepth = 4
)

// Kinds of the items of a batch, in the order the scan yielded them.
const (
	itemEvent    = iota // batch.events[idx]
	itemRecord          // batch.records[idx]: a connection, marker or lost count
	itemMessage         // batch.msgs[idx]
	itemAnswered        // batch.answered[idx], for the latest message
	itemBegin           // batch.begins[idx]
	itemEnd             // batch.ends[idx]
)

type item struct {
	kind uint8
	idx  int32
}

type beginItem struct {
	i    int
	path string
	meta trace.Meta
}

type endItem struct {
	i   int
	rec trace.Recovery
	d   *protocol.Decoder
}

// batch holds copies of what a scan yielded, payload heads and command batches included,
// since the scan reuses its own.
type batch struct {
	items    []item
	events   []trace.Event
	records  []trace.Record
	msgs     []protocol.Message
	answered []protocol.Answered
	begins   []beginItem
	ends     []endItem
	payload  []byte              // the events' payload heads
	cmds     []protocol.BatchCmd // the messages' batched commands
	mbatches []protocol.Batch
}

func (b *batch) reset() {
	b.items, b.events, b.records, b.msgs = b.items[:0], b.events[:0], b.records[:0], b.msgs[:0]
	b.answered, b.begins, b.payload, b.cmds = b.answered[:0], b.begins[:0], b.payload[:0], b.cmds[:0]
	b.mbatches = b.mbatches[:0]
	clear(b.ends)
	b.ends = b.ends[:0]
}

// pipe is a protocol.Sink that runs another (the analyzer's) on a goroutine of its own: the
// scan (reading and decoding) goes on while the analysis of the previous batch runs, in the
// same order, on the second CPU. Every call of the scan is copied into a batch; a batch goes
// when it is full and at the end of each trace.
type pipe struct {
	out  protocol.Sink
	size int // items a batch holds before it goes (pipeBatch)
	cur  *batch
	full chan *batch
	free chan *batch
	done chan struct{}
}

// newPipe starts the goroutine that feeds out batches of size items; close must be called once
// the scan is over.
func newPipe(out protocol.Sink, size int) *pipe {
	p := &pipe{out: out, size: size, full: make(chan *batch, pipeDepth), free: make(chan *batch, pipeDepth+2), done: make(chan struct{})}
	for range pipeDepth + 2 {
		p.free <- &batch{}
	}
	p.cur = <-p.free
	go p.run()
	return p
}

// run feeds out every batch in turn until the pipe is closed.
func (p *pipe) run() {
	defer close(p.done)
	for b := range p.full {
		b.feed(p.out)
		b.reset()
		p.free <- b
	}
}

// feed makes the calls of the scan that b holds on out, in order.
func (b *batch) feed(out protocol.Sink) {
	if s, ok := out.(*sink); ok {
		b.feedSink(s)
		return
	}
	var rec trace.Record
	var last *protocol.Message
	for _, it := range b.items {
		switch it.kind {
		case itemEvent:
			rec.Kind, rec.Event = trace.KindEvent, b.events[it.idx]
			out.Record(&rec)
		case itemRecord:
			out.Record(&b.records[it.idx])
		case itemMessage:
			last = &b.msgs[it.idx]
			out.Message(last)
		case itemAnswered:
			out.Answered(last, b.answered[it.idx])
		case itemBegin:
			x := &b.begins[it.idx]
			out.Begin(x.i, x.path, x.meta)
		case itemEnd:
			x := &b.ends[it.idx]
			out.End(x.i, x.rec, x.d)
		}
	}
}

// feedSink is feed for the analyzer's sink, called directly; its events are handed over in
// place, copied into a record only for a visitor.
func (b *batch) feedSink(s *sink) {
	var rec trace.Record
	var last *protocol.Message
	for _, it := range b.items {
		switch it.kind {
		case itemEvent:
			s.event(&b.events[it.idx], &rec)
		case itemRecord:
			s.Record(&b.records[it.idx])
		case itemMessage:
			last = &b.msgs[it.idx]
			s.Message(last)
		case itemAnswered:
			s.Answered(last, b.answered[it.idx])
		case itemBegin:
			x := &b.begins[it.idx]
			s.Begin(x.i, x.path, x.meta)
		case itemEnd:
			x := &b.ends[it.idx]
			s.End(x.i, x.rec, x.d)
		}
	}
}

// send hands the current batch over and takes an empty one.
func (p *pipe) send() {
	if len(p.cur.items) == 0 {
		return
	}
	p.full <- p.cur
	p.cur = <-p.free
}

// add appends an item; a full batch goes, but never right after a message or an Answered, so
// that the requests a reply answers (its Answered calls, which come right after it, one per
// request past the first) all travel with it: the batch goes with the next item of another
// kind.
func (p *pipe) add(kind uint8, idx int) {
	p.cur.items = append(p.cur.items, item{kind, int32(idx)})
	if len(p.cur.items) >= p.size && kind != itemMessage && kind != itemAnswered {
		p.send()
	}
}

// close hands over what is left and waits until out has seen it all.
func (p *pipe) close() {
	p.send()
	close(p.full)
	<-p.done
}

func (p *pipe) Begin(i int, path string, meta trace.Meta) {
	b := p.cur
	b.begins = append(b.begins, beginItem{i, path, meta})
	p.add(itemBegin, len(b.begins)-1)
}

func (p *pipe) Record(rec *trace.Record) {
	b := p.cur
	if rec.Kind != trace.KindEvent {
		b.records = append(b.records, *rec)
		b.records[len(b.records)-1].Event.Payload = nil
		p.add(itemRecord, len(b.records)-1)
		return
	}
	n := len(b.events)
	if n == cap(b.events) {
		b.events = slices.Grow(b.events, 1)
	}
	b.events = b.events[:n+1]
	e := &b.events[n]
	pl := rec.Event.Payload
	*e = rec.Event
	if pl != nil {
		at := len(b.payload)
		b.payload = append(b.payload, pl...)
		// the slice is taken now and stays valid when payload grows later: the old array is
		// left as it is
		e.Payload = b.payload[at:len(b.payload):len(b.payload)]
	}
	// add, inline: an event never comes right before the Answered of a message
	b.items = append(b.items, item{itemEvent, int32(n)})
	if len(b.items) >= p.size {
		p.send()
	}
}

var _ protocol.MessageStore = (*pipe)(nil)

// NextMessage returns the storage of the next message, the slot past the batch's messages:
// the decoder builds its message there (protocol.MessageStore), and Message finds it in place.
func (p *pipe) NextMessage() *protocol.Message {
	b := p.cur
	if len(b.msgs) == cap(b.msgs) {
		b.msgs = slices.Grow(b.msgs, 1)
	}
	return &b.msgs[:len(b.msgs)+1][len(b.msgs)]
}

func (p *pipe) Message(m *protocol.Message) {
	b := p.cur
	if n := len(b.msgs); n < cap(b.msgs) && m == &b.msgs[:n+1][n] {
		b.msgs = b.msgs[:n+1] // built in place (NextMessage)
	} else {
		b.msgs = append(b.msgs, *m)
	}
	if m.Batch != nil {
		at := len(b.cmds)
		b.cmds = append(b.cmds, m.Batch.Commands...)
		b.mbatches = append(b.mbatches, protocol.Batch{Commands: b.cmds[at:len(b.cmds):len(b.cmds)], Split: m.Batch.Split})
		b.msgs[len(b.msgs)-1].Batch = &b.mbatches[len(b.mbatches)-1]
	}
	p.add(itemMessage, len(b.msgs)-1)
}

func (p *pipe) Answered(m *protocol.Message, req protocol.Answered) {
	b := p.cur
	b.answered = append(b.answered, req)
	p.add(itemAnswered, len(b.answered)-1)
}

func (p *pipe) End(i int, rec trace.Recovery, d *protocol.Decoder) {
	b := p.cur
	b.ends = append(b.ends, endItem{i, rec, d})
	p.add(itemEnd, len(b.ends)-1)
	p.send() // the decoder is the analysis's now
}

// scan is protocol.Scan into out, with out on a goroutine of its own (pipe) when there are
// two CPUs or more to run the two sides at once. out sees the same calls in the same order
// either way, and has seen them all when scan returns.
func scan(ins []protocol.Input, spec *protocol.Spec, out protocol.Sink) error {
	size := 0
	if runtime.GOMAXPROCS(0) >= 2 {
		size = pipeBatch
	}
	return scanPiped(ins, spec, out, size)
}

// scanPiped is scan, through a pipe of batches of size items, or directly when size is 0.
func scanPiped(ins []protocol.Input, spec *protocol.Spec, out protocol.Sink, size int) error {
	if size <= 0 {
		return protocol.Scan(ins, spec, out)
	}
	p := newPipe(out, size)
	err := protocol.Scan(ins, spec, p)
	p.close()
	return err
}
