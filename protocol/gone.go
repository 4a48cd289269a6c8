package protocol

import (
	"fmt"
	"slices"

	"github.com/perflab/perflab/trace"
)

// goneSet remembers, with auto detection, the connections retired before the end of the trace
// and the protocol each was counted as, in about 9 bytes each: a sorted list of keys with a
// protocol index beside each, and a map of those retired since the last merge into it (at most
// an eighth of the list, or goneBatch), so that merging stays linear in all.
type goneSet struct {
	keys  []uint64 // sorted
	specs []uint8  // specs[k]: index in list of keys[k]'s protocol
	fresh map[uint64]uint8
	list  []*Spec
}

// goneBatch is the least number of retired connections merged into the sorted list at once.
const goneBatch = 4096

// add remembers connection key, counted as spec; a key remembered already keeps its protocol.
func (g *goneSet) add(key uint64, spec *Spec) {
	if _, ok := g.find(key); ok {
		return
	}
	i := slices.Index(g.list, spec)
	if i < 0 {
		if len(g.list) == 255 {
			return // more protocols than an index holds: not remembered (auto detection has 7)
		}
		g.list = append(g.list, spec)
		i = len(g.list) - 1
	}
	if g.fresh == nil {
		g.fresh = map[uint64]uint8{}
	}
	g.fresh[key] = uint8(i)
	if len(g.fresh) >= max(goneBatch, len(g.keys)/8) {
		g.merge()
	}
}

// find returns the protocol connection key was counted as, if it was retired.
func (g *goneSet) find(key uint64) (*Spec, bool) {
	if i, ok := g.fresh[key]; ok {
		return g.list[i], true
	}
	if k, ok := slices.BinarySearch(g.keys, key); ok {
		return g.list[g.specs[k]], true
	}
	return nil, false
}

// merge moves the fresh keys into the sorted list.
func (g *goneSet) merge() {
	add := make([]uint64, 0, len(g.fresh))
	for k := range g.fresh {
		add = append(add, k)
	}
	slices.Sort(add)
	keys := make([]uint64, 0, len(g.keys)+len(add))
	specs := make([]uint8, 0, cap(keys))
	i := 0
	for _, k := range add {
		for i < len(g.keys) && g.keys[i] < k {
			keys, specs = append(keys, g.keys[i]), append(specs, g.specs[i])
			i++
		}
		keys, specs = append(keys, k), append(specs, g.fresh[k])
	}
	keys, specs = append(keys, g.keys[i:]...), append(specs, g.specs[i:]...)
	g.keys, g.specs = keys, specs
	clear(g.fresh)
}

// maxResumedWarnings is how many resumed connections decoded as another protocol a trace
// names (Decoder.Returned); the rest are counted.
const maxResumedWarnings = 16

// resumedChoice returns the protocol of connection c, retired while idle after it was counted
// as c.first, now carrying data again with ev: its first protocol, unless ev's bytes now show
// another (detect), which it is then decoded as, and which Returned reports.
func (d *Decoder) resumedChoice(c *connDecoder, ev *trace.Event) *Spec {
	first, fresh := c.first, d.detect(ev)
	d.resumed++
	switch {
	case fresh == first || fresh.Name == "raw":
		if first.Name == "venus-mesa" {
			return d.builtins["venus"] // found to be real Venus again from its first frames
		}
		return first
	case isVenus(fresh) && isVenus(first):
		return fresh
	}
	d.resumedOther++
	if len(d.resumedNotes) < maxResumedWarnings {
		d.resumedNotes = append(d.resumedNotes, fmt.Sprintf("connection %d (pid %d) was retired while idle as %s and, carrying data again, decoded as %s; it counts once, as %s",
			c.id, c.pid, first.Name, fresh.Name, first.Name))
	}
	return fresh
}

func isVenus(s *Spec) bool { return s.Name == "venus" || s.Name == "venus-mesa" }

// Returned returns, with auto detection, how many connections carried data again after they
// were retired while idle (each still counts as one connection, in ConnInfo.Count, as the
// protocol it was first decoded as), how many of them were then decoded as another protocol,
// and a sentence for each of the first of those.
func (d *Decoder) Returned() (resumed, other uint64, notes []string) {
	return d.resumed, d.resumedOther, d.resumedNotes
}
