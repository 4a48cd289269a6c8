package protocol

import (
	"cmp"
	"slices"
	"strings"

	"github.com/perflab/perflab/trace"
)

// Fixed returns the spec every connection was decoded with, nil when each connection's
// protocol was detected.
func (d *Decoder) Fixed() *Spec { return d.fixed }

// Protocols returns the names of the protocols the trace's connections were decoded as, sorted.
func (d *Decoder) Protocols() []string {
	out := make([]string, 0, len(d.protos))
	for p := range d.protos {
		if p == "venus" && d.protos["venus-mesa"] && !d.venusdStayed() {
			continue // every venus connection turned out to be real Venus (venusVariant)
		}
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// ConnInfo is what a decoder tells of one connection of its trace.
type ConnInfo struct {
	// Count is how many connections this stands for: 1, or, for connections finished before
	// the end of the trace and summed by protocol, their number (ID, PID and ReqDir are then
	// zero).
	Count   int
	ID      uint64
	PID     uint32
	Spec    *Spec     // the spec it was decoded with; nil when it carried no data
	ReqDir  trace.Dir // the direction of its requests (the side that spoke first)
	Data    int64     // bytes its data events moved
	Decoded int64     // of them, bytes of messages decoded whole
	// Unseen is, of Data, the bytes past the calls' captured payload heads that no decoder
	// could frame: on a resp connection, pipelined values the head did not reach
	Unseen int64
	// RESP holds, on a resp connection, by direction, the values decoded and the values at least
	// not seen (pipelined past the captured payload head); nil otherwise.
	RESP *[3]RESPCount
	// Blind counts the times a text protocol's line lay past the captured payload head;
	// Rejected the messages whose first line was none of the protocol's.
	Blind, Rejected uint64
}

// RESPCount counts the values of one direction of a resp connection.
type RESPCount struct {
	Count   uint64 // values decoded, pushes included
	AtLeast uint64 // values not seen: at least one per call whose head ended before its bytes did
	// Maybe counts the calls whose head ended inside a value, not their first, whose length it
	// did not show: values may have followed it in the call unseen.
	Maybe uint64
	// Pushes counts, of Count, the pushes (Message.Push); PushesAtLeast and PushesMaybe are
	// AtLeast and Maybe for the calls of a subscribed connection waiting for no reply: the
	// values not seen are pushes, not replies.
	Pushes, PushesAtLeast, PushesMaybe uint64
	// PastBytes sums, over the calls counted in AtLeast and Maybe, their bytes past what was
	// seen: the most the values not counted can take (each takes 3 bytes at least)
	PastBytes uint64
}

// Conns calls fn for each connection of the trace, in connection order; connections finished
// before the end of the trace come summed by protocol (ConnInfo.Count), each sum where its
// least connection falls in that order, a connection finished early that carried data again
// counting once.
func (d *Decoder) Conns(fn func(ci *ConnInfo)) {
	type entry struct {
		key uint64
		at  int // < 0: a live connection; < len(infos): a RESP connection retired; else a sum
		c   *connDecoder
		agg *retiredAgg
	}
	all := make([]entry, 0, len(d.conns)+len(d.retired.infos)+len(d.retired.bySpec))
	for key, c := range d.conns {
		all = append(all, entry{key: key, at: -1, c: c})
	}
	for k := range d.retired.infos {
		all = append(all, entry{key: d.retired.infos[k].ID, at: k})
	}
	for _, agg := range d.retired.bySpec {
		all = append(all, entry{key: agg.minKey, at: len(d.retired.infos), agg: agg})
	}
	slices.SortFunc(all, func(x, y entry) int {
		if x.key != y.key {
			return cmp.Compare(x.key, y.key)
		}
		if x.at != y.at {
			return cmp.Compare(x.at, y.at)
		}
		if x.agg != nil && y.agg != nil {
			return strings.Compare(x.agg.Spec.Name, y.agg.Spec.Name)
		}
		return 0
	})
	var ci ConnInfo
	var rc [3]RESPCount
	for _, e := range all {
		switch {
		case e.c != nil:
			e.c.info(&ci, &rc)
		case e.agg != nil:
			ci = e.agg.ConnInfo
		default:
			ci = d.retired.infos[e.at]
		}
		fn(&ci)
	}
}

// info fills ci with what c tells of itself; rc is the storage of ci.RESP.
func (c *connDecoder) info(ci *ConnInfo, rc *[3]RESPCount) {
	*ci = ConnInfo{Count: 1, ID: c.id, PID: c.pid, Spec: c.spec, ReqDir: c.reqDir, Data: c.data, Decoded: c.decoded(), Unseen: c.unseen}
	if c.spec != nil && c.spec.Kind == "resp" && c.resp != nil {
		for dir := range c.resp {
			st := &c.resp[dir]
			rc[dir] = RESPCount{Count: st.count, AtLeast: st.atLeast, Maybe: st.maybe,
				Pushes: st.pushes, PushesAtLeast: st.pushesAtLeast, PushesMaybe: st.pushesMaybe, PastBytes: st.pastBytes}
		}
		ci.RESP = rc
	}
	for _, st := range c.text {
		if st != nil {
			ci.Blind += st.blindSpells
			ci.Rejected += st.rejected
		}
	}
}

// Spec returns the spec of the decoder that produced m; nil for a Message made elsewhere.
func (m *Message) Spec() *Spec { return m.spec }

// venusdStayed reports whether a connection detected as venus is still decoded as venusd's
// framing or was retired as such. venusVariant switches connections to venus-mesa one at a
// time; asking once here keeps that linear in connections.
func (d *Decoder) venusdStayed() bool {
	if d.retired.venus > 0 {
		return true
	}
	for _, o := range d.conns {
		if o.spec != nil && o.spec.Name == "venus" {
			return true
		}
	}
	return false
}
