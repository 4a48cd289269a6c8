package analyzers

import "sort"

// textAgg gathers what the text protocols (http, line) add to a Summary: replies by status,
// and the times a stream lost its line boundaries.
type textAgg struct {
	status   map[statusKey]uint64
	blind    uint64
	rejected uint64
}

type statusKey struct {
	proto string
	code  int
}

func (t *textAgg) message(m *Message) {
	if m.Status == 0 || !m.IsReply {
		return
	}
	if t.status == nil {
		t.status = map[statusKey]uint64{}
	}
	t.status[statusKey{m.Protocol, m.Status}]++
}

// end takes the counts of a trace's decoder.
func (t *textAgg) end(d *decoder) {
	for _, c := range d.conns {
		for _, st := range c.text {
			if st != nil {
				t.blind += st.blindSpells
				t.rejected += st.rejected
			}
		}
	}
}

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
	if t.blind > 0 {
		a.warnf("a text protocol's line lay past the captured payload head %d times: those messages were delimited by system calls, and messages that followed them in the same call are not counted (counts are lower bounds; record with --payload-bytes 256)", t.blind)
	}
	if t.rejected > 0 {
		a.warnf("%d times a text protocol's message started with a line that is none of the protocol's; the bytes up to the next message were not decoded", t.rejected)
	}
}
