package analyzers

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// textAgg gathers what the text protocols (http, line) add to a Summary: replies by status,
// and the times a stream lost its line boundaries.
type textAgg struct {
	status    map[statusKey]uint64
	blind     uint64
	rejected  uint64
	pastHead  uint64                    // resp: calls with values past the captured head, every connection's
	pastBytes uint64                    // resp: their bytes past what was seen
	pushes    uint64                    // resp: of those, calls of subscribed connections waiting for no reply
	shares    map[string]*ProtocolShare // by protocol
	atLeast   []lowerBound              // resp: connections with pipelined commands past the head, the first maxLowerBounds by id
}

type statusKey struct {
	proto string
	code  int
}

func (t *textAgg) message(m *protocol.Message) {
	if m.Status == 0 || !m.IsReply {
		return
	}
	if t.status == nil {
		t.status = map[statusKey]uint64{}
	}
	t.status[statusKey{m.Protocol, m.Status}]++
}

// end takes the counts of a trace's decoder; meta is the trace's.
func (t *textAgg) end(d *protocol.Decoder, meta trace.Meta) {
	if t.shares == nil {
		t.shares = map[string]*ProtocolShare{}
	}
	d.Conns(func(c *protocol.ConnInfo) {
		if c.Spec != nil && c.Data > 0 {
			p := t.shares[c.Spec.Name]
			if p == nil {
				p = &ProtocolShare{Name: c.Spec.Name}
				t.shares[c.Spec.Name] = p
			}
			p.Connections += c.Count
			p.Bytes += uint64(c.Data)
			p.DecodedBytes += uint64(c.Decoded)
			p.UnseenBytes += uint64(c.Unseen)
		}
		if c.RESP != nil {
			for dir := range c.RESP {
				st := &c.RESP[dir]
				t.pastHead += st.AtLeast + st.Maybe
				t.pastBytes += st.PastBytes
				t.pushes += st.PushesAtLeast + st.PushesMaybe
				if st.PushesAtLeast+st.PushesMaybe > 0 && t.keepsLowerBound(c.ID) {
					t.addLowerBound(c.ID, fmt.Sprintf("resp: connection %d (pid %d) %s pushes: at least %d (%d decoded; %s; they answer no request, so the requests and round trips are counted exactly; %s)",
						c.ID, c.PID, trace.Dir(dir), st.Pushes+st.PushesAtLeast, st.Pushes, unseenCalls(st.PushesAtLeast, st.PushesMaybe, "messages"), HeadAdvice([]trace.Meta{meta}, "see more")))
				}
				if st.AtLeast+st.Maybe > 0 && t.keepsLowerBound(c.ID) {
					what := "commands"
					if trace.Dir(dir) != c.ReqDir {
						what = "replies"
					}
					t.addLowerBound(c.ID, fmt.Sprintf("resp: connection %d (pid %d) %s %s: at least %d (%d decoded; %s; %s)",
						c.ID, c.PID, trace.Dir(dir), what, st.Count-st.Pushes+st.AtLeast, st.Count-st.Pushes, unseenCalls(st.AtLeast, st.Maybe, "pipelined "+what), HeadAdvice([]trace.Meta{meta}, "see more")))
				}
			}
		}
		t.blind += c.Blind
		t.rejected += c.Rejected
	})
}

// unseenCalls says what sure calls (more values of what lay past the head) and maybe calls
// (the head ended inside a value that may have been followed by others) hid.
func unseenCalls(sure, maybe uint64, what string) string {
	switch {
	case maybe == 0:
		return fmt.Sprintf("%d calls held more %s than their captured payload head shows", sure, what)
	case sure == 0:
		return fmt.Sprintf("in %d calls the captured payload head ended inside a value, and more %s may have followed it unseen", maybe, what)
	}
	return fmt.Sprintf("%d calls held more %s than their captured payload head shows, and in %d more the head ended inside a value that more may have followed", sure, what, maybe)
}

// maxLowerBounds is how many connections' "at least" warnings a trace gives.
const maxLowerBounds = 16

// lowerBound is the warning of a connection whose counts are lower bounds.
type lowerBound struct {
	conn uint64
	text string
}

// addLowerBound keeps the warning text of connection conn if it is among the maxLowerBounds
// lowest connection ids seen (the decoder gives connections in no fixed order), in id order.
func (t *textAgg) addLowerBound(conn uint64, text string) {
	i := t.lowerBoundAt(conn)
	if i >= maxLowerBounds {
		return
	}
	t.atLeast = slices.Insert(t.atLeast, i, lowerBound{conn, text})
	if len(t.atLeast) > maxLowerBounds {
		t.atLeast = t.atLeast[:maxLowerBounds]
	}
}

// lowerBoundAt is where connection conn's warning goes among those kept, in id order.
func (t *textAgg) lowerBoundAt(conn uint64) int {
	return sort.Search(len(t.atLeast), func(i int) bool { return t.atLeast[i].conn > conn })
}

// keepsLowerBound reports whether a warning of connection conn would be kept (addLowerBound),
// so that the others are not written at all.
func (t *textAgg) keepsLowerBound(conn uint64) bool { return t.lowerBoundAt(conn) < maxLowerBounds }

func (t *textAgg) finish(a *analyzer) {
	for k, n := range t.status {
		a.s.Statuses = append(a.s.Statuses, StatusCount{Protocol: k.proto, Code: k.code, Count: n})
	}
	sort.Slice(a.s.Statuses, func(i, j int) bool {
		x, y := a.s.Statuses[i], a.s.Statuses[j]
		if x.Protocol != y.Protocol {
			return x.Protocol < y.Protocol
		}
		return x.Code < y.Code
	})
	t.decoding(a)
	a.s.CallsPastHead, a.s.CallsBlind, a.s.PushesPastHead, a.s.BytesPastHead = t.pastHead, t.blind, t.pushes, t.pastBytes
	for _, w := range t.atLeast {
		a.warnf("%s", w.text)
	}
	if t.blind > 0 {
		// the counts are lower bounds only if replies answer requests not seen (Summary.CountsLowerBound)
		verdict := "every reply found its request, so none hid that way: the counts stand"
		if a.s.CountsLowerBound() {
			verdict = "replies answer requests not seen: counts are lower bounds"
		}
		a.warnf("a text protocol's line lay past the captured payload head %d times: those messages were delimited by system calls, and messages that followed them in the same call (pipelining) would not be counted; %s (%s)", t.blind, verdict, HeadAdvice(a.s.Meta, "see more of each call"))
	}
	if t.rejected > 0 {
		a.warnf("%d times a text protocol's message started with a line that is none of the protocol's; the bytes up to the next message were not decoded", t.rejected)
	}
}

// minForcedShare is the share of the bytes below which a protocol given by name is warned
// about: the traffic is mostly something else.
const minForcedShare = 0.9

// decoding fills Summary.Decoding: the choice per protocol and the share of the bytes decoded.
func (t *textAgg) decoding(a *analyzer) {
	if len(t.shares) == 0 {
		return
	}
	dc := &Decoding{Mode: "auto", Protocols: []ProtocolShare{}}
	if sp := a.opt.Spec; sp != nil {
		dc.Mode = "spec"
		if a.opt.Protocol == sp.Name {
			dc.Mode = "forced"
		}
	}
	for _, p := range t.shares {
		p.Share = share(p.DecodedBytes, p.Bytes)
		dc.Bytes += p.Bytes
		dc.DecodedBytes += p.DecodedBytes
		dc.UnseenBytes += p.UnseenBytes
		dc.Protocols = append(dc.Protocols, *p)
	}
	sort.Slice(dc.Protocols, func(i, j int) bool {
		x, y := dc.Protocols[i], dc.Protocols[j]
		if x.Bytes != y.Bytes {
			return x.Bytes > y.Bytes
		}
		return x.Name < y.Name
	})
	dc.Share = share(dc.DecodedBytes, dc.Bytes)
	a.s.Decoding = dc
	if dc.Mode != "auto" && share(dc.DecodedBytes, dc.Bytes-dc.UnseenBytes) < minForcedShare {
		a.warnf("protocol %s decoded %.1f%% of the %d bytes of data (less than %.0f%%): the traffic is mostly not %s, or its framing was lost; the counts cover the decoded part only (try --protocol auto)",
			a.opt.Spec.Name, 100*dc.Share, dc.Bytes, 100*minForcedShare, a.opt.Spec.Name)
	}
}

func share(part, whole uint64) float64 {
	if whole == 0 {
		return 0
	}
	return math.Round(1e4*float64(part)/float64(whole)) / 1e4
}
