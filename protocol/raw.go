package protocol

import (
	"maps"

	"github.com/perflab/perflab/trace"
)

// rawBurst is the burst of calls in one direction being gathered on a connection of unknown
// protocol: consecutive calls in one direction make one message, and a burst in the
// requesting direction followed by one in the other is one exchange (a request and its
// reply), on a client's trace and a server's alike.
type rawBurst struct {
	active    bool
	dir       trace.Dir
	ts, end   int64
	firstEnd  int64
	size      int64
	calls     int
	callNS    int64
	tid       uint32
	pid       uint32
	src       trace.Source
	lastEnd   [3]int64 // end of the last call in each direction
	lastTID   [3]uint32
	unsafe    bool // calls in both directions overlapped: full-duplex, exchanges not inferable
	overlaps  uint64
	exchanges uint64
}

// rawCall gathers one call of a connection of unknown protocol.
func (c *connDecoder) rawCall(ev *trace.Event) {
	if c.raw == nil {
		c.raw = new(rawBurst)
	}
	b := c.raw
	other := trace.DirSend
	if ev.Dir == trace.DirSend {
		other = trace.DirRecv
	}
	// a call that starts before the last call in the other direction ended, on another
	// thread: both directions are in flight at once
	if b.lastEnd[other] > ev.TS && b.lastTID[other] != ev.TID {
		b.unsafe = true
		b.overlaps++
	}
	b.lastEnd[ev.Dir], b.lastTID[ev.Dir] = ev.TS+ev.Dur, ev.TID
	if b.active && b.dir == ev.Dir {
		b.end = ev.TS + ev.Dur
		b.size += ev.Bytes
		b.calls++
		b.callNS += ev.Dur
		return
	}
	c.flushRaw()
	*b = rawBurst{active: true, dir: ev.Dir, ts: ev.TS, end: ev.TS + ev.Dur, firstEnd: ev.TS + ev.Dur, size: ev.Bytes,
		calls: 1, callNS: ev.Dur, tid: ev.TID, pid: ev.PID, src: ev.Source, lastEnd: b.lastEnd, lastTID: b.lastTID,
		unsafe: b.unsafe, overlaps: b.overlaps, exchanges: b.exchanges}
}

// flushRaw delivers the burst being gathered, if any, as one message: a request in the
// connection's requesting direction (the side that spoke first), else the reply to the
// request before it.
func (c *connDecoder) flushRaw() {
	b := c.raw
	if b == nil || !b.active {
		return
	}
	b.active = false
	ev := trace.Event{TS: b.ts, Dur: b.end - b.ts, Conn: c.id, PID: b.pid, TID: b.tid, Dir: b.dir, Source: b.src}
	m := c.d.msg(c, &ev)
	m.Size, m.Calls, m.FirstEnd, m.CallNS = b.size, b.calls, b.firstEnd, b.callNS
	if b.dir == c.reqDir {
		c.pairs.add(pendingReq{ts: m.TS, end: m.End, tid: m.TID}, hintYes)
		m.WantsReply = true
	} else {
		m.IsReply = true
		if p, ok := c.pairs.reply(0); ok {
			m.ReqTS, m.ReqEnd, m.RTT, m.Answered = p.ts, p.end, m.End-p.ts, 1
			b.exchanges++
		}
	}
	c.d.deliver(m)
}

// RawStats counts, over the trace's connections of unknown protocol, the connections whose
// directions overlapped (full-duplex: exchanges not inferable) and the exchanges inferred.
func (d *Decoder) RawStats() (conns, unsafe, exchanges uint64, unsafeIDs map[uint64]bool) {
	r := &d.retired
	conns, unsafe, exchanges = r.rawConns, r.rawUnsafe, r.rawExchange
	if len(r.rawUnsafeIDs) > 0 {
		unsafeIDs = maps.Clone(r.rawUnsafeIDs)
	}
	for k, c := range d.conns {
		if c.spec == nil || c.spec.Kind != "raw" || c.reqDir == trace.DirNone || c.raw == nil {
			continue
		}
		conns++
		exchanges += c.raw.exchanges
		if c.raw.unsafe {
			unsafe++
			if unsafeIDs == nil {
				unsafeIDs = map[uint64]bool{}
			}
			unsafeIDs[k] = true
		}
	}
	return
}
