package merge

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/perflab/perflab/trace"
)

// connShift is how far each input's connection ids move in the merged trace: input i's id c
// becomes i<<connShift | c, so the merged ids stay distinct and name their host.
const connShift = 40

// Input is one recording to merge.
type Input struct {
	Name string // as given on the command line, for messages and the merged metadata
	File *trace.File
}

// Placement is how one input was placed on the reference's timeline.
type Placement struct {
	Estimate
	Peer  int        // input it was estimated against (-1 for the reference)
	Pairs []ConnPair // matched connections with already-placed inputs
}

// Result is a merge: where each input went, and the warnings a user should see.
type Result struct {
	Inputs     []Input
	Placements []Placement
	Warnings   []string
}

// Error names the input that could not be placed.
type Error struct {
	Input string
	Err   error
}

func (e *Error) Error() string { return e.Input + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Place estimates every input's clock against the first one's. Inputs are placed one at a time,
// each against the placed inputs it shares connections with (their timestamps already moved onto
// the reference's clock); the bounds of a chained placement widen by its peer's.
func Place(inputs []Input) (*Result, error) {
	if len(inputs) < 2 {
		return nil, errors.New("merge needs at least two traces")
	}
	for _, in := range inputs {
		for _, c := range in.File.Connections {
			if c.ID >= 1<<connShift {
				return nil, &Error{in.Name, fmt.Errorf("connection id %d is too large to merge (at most 2^%d)", c.ID, connShift)}
			}
		}
	}
	r := &Result{Inputs: inputs, Placements: make([]Placement, len(inputs))}
	placed := make([]bool, len(inputs))
	placed[0] = true
	r.Placements[0] = Placement{Peer: -1}
	for n := 1; n < len(inputs); n++ {
		progress := false
		var lastErr error
		for j := range inputs {
			if placed[j] {
				continue
			}
			p, err := r.placeOne(j, placed)
			if err != nil {
				lastErr = err
				continue
			}
			r.Placements[j] = p
			placed[j] = true
			progress = true
			break
		}
		if !progress {
			return nil, lastErr
		}
	}
	return r, nil
}

// placeOne estimates input j against the placed inputs.
func (r *Result) placeOne(j int, placed []bool) (Placement, error) {
	var out, back []Msg
	var pairs []ConnPair
	peer := -1
	fj := r.Inputs[j].File
	for k := range r.Inputs {
		if !placed[k] {
			continue
		}
		fk := r.Inputs[k].File
		pk := r.Placements[k]
		cps := MatchConns(k, j, fk, fj)
		for _, cp := range cps {
			o, so, ro := Messages(cp.Family, dataEvents(fk, cp.ConnA, trace.DirSend), dataEvents(fj, cp.ConnB, trace.DirRecv))
			b, sb, rb := Messages(cp.Family, dataEvents(fj, cp.ConnB, trace.DirSend), dataEvents(fk, cp.ConnA, trace.DirRecv))
			if so != ro || sb != rb {
				r.Warnings = append(r.Warnings, fmt.Sprintf("%s and %s: connection %s: the ends moved different byte counts (%d sent, %d received; %d sent, %d received): a recording started late or lost events, and messages may be matched wrongly",
					r.Inputs[k].Name, r.Inputs[j].Name, connName(fk, cp.ConnA), so, ro, sb, rb))
			}
			if k != 0 {
				for i := range o {
					o[i].Send = pk.Map(o[i].Send)
				}
				for i := range b {
					b[i].Recv = pk.Map(b[i].Recv)
				}
			}
			out, back = append(out, o...), append(back, b...)
			if len(o)+len(b) > 0 && peer < 0 {
				peer = k
			}
		}
		pairs = append(pairs, cps...)
	}
	if len(pairs) == 0 {
		return Placement{}, &Error{r.Inputs[j].Name, errors.New("no connection matches one in the other traces (mirrored local and remote TCP or UDP addresses)")}
	}
	est, err := EstimateClock(out, back)
	if err != nil {
		return Placement{}, &Error{r.Inputs[j].Name, err}
	}
	if peer > 0 {
		pp := r.Placements[peer]
		est.OffsetLo -= pp.Offset - pp.OffsetLo
		est.OffsetHi += pp.OffsetHi - pp.Offset
		est.DriftLo -= pp.Drift - pp.DriftLo
		est.DriftHi += pp.DriftHi - pp.Drift
	}
	return Placement{Estimate: est, Peer: peer, Pairs: pairs}, nil
}

func connName(f *trace.File, id uint64) string {
	if c := f.Conn(id); c != nil {
		return c.Local + "↔" + c.Remote
	}
	return fmt.Sprint(id)
}

// Clocks returns the placements as the merged trace's metadata records them.
func (r *Result) Clocks() []trace.Clock {
	cs := make([]trace.Clock, len(r.Inputs))
	for i, in := range r.Inputs {
		p := r.Placements[i]
		cs[i] = trace.Clock{Input: in.Name, Host: in.File.Meta.Host, ConnBase: uint64(i) << connShift,
			RefNS: p.Ref, OffsetNS: int64(math.Round(p.Offset)),
			OffsetLoNS: int64(math.Floor(p.OffsetLo)), OffsetHiNS: int64(math.Ceil(p.OffsetHi)),
			DriftPPM: p.Drift * 1e6, DriftLoPPM: p.DriftLo * 1e6, DriftHiPPM: p.DriftHi * 1e6,
			Messages: p.Out + p.Back, Peer: p.Peer}
	}
	return cs
}

// Write writes the merged trace: every input's events, connections and markers, timestamps on
// the reference's clock, durations scaled by the drift, connection ids moved by ConnBase, in
// time order. Its metadata is the reference's with Clocks set and the inputs' PIDs and labels.
func (r *Result) Write(w func(trace.Meta) (*trace.Writer, error)) error {
	tw, err := w(r.mergedMeta())
	if err != nil {
		return err
	}
	evs, marks, err := r.writePlaced(tw)
	if err == nil {
		err = writeInTimeOrder(tw, evs, marks)
	}
	if err != nil {
		tw.Close()
		return fmt.Errorf("write merged trace: %w", err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("write merged trace: %w", err)
	}
	return nil
}

// mergedMeta is the merged trace's metadata: the first input's, with the clocks of the merge, the
// union of the inputs' labels and process ids, and the source and protocol only where all inputs
// agree.
func (r *Result) mergedMeta() trace.Meta {
	meta := r.Inputs[0].File.Meta
	meta.Clocks = r.Clocks()
	meta.Labels = map[string]string{}
	meta.PIDs = nil
	seenPID := map[uint32]bool{}
	for _, in := range r.Inputs {
		for k, v := range in.File.Meta.Labels {
			meta.Labels[k] = v
		}
		for _, p := range in.File.Meta.PIDs {
			if !seenPID[p] {
				seenPID[p] = true
				meta.PIDs = append(meta.PIDs, p)
			}
		}
		if in.File.Meta.Source != meta.Source {
			meta.Source = ""
		}
		if in.File.Meta.Protocol != meta.Protocol {
			meta.Protocol = ""
		}
	}
	if len(meta.Labels) == 0 {
		meta.Labels = nil
	}
	return meta
}

// writePlaced writes every input's connections (ids moved into the input's range) and lost counts
// (named input:source) to tw, and returns all inputs' events and markers with their connection ids
// moved and, for every input but the first, their times placed on the first input's clock.
func (r *Result) writePlaced(tw *trace.Writer) ([]trace.Event, []trace.Marker, error) {
	var evs []trace.Event
	var marks []trace.Marker
	for i, in := range r.Inputs {
		p := r.Placements[i]
		base := uint64(i) << connShift
		scale := func(d int64) int64 { return d + int64(math.Round(p.Drift*float64(d))) }
		for _, c := range in.File.Connections {
			c.ID += base
			if i > 0 {
				c.FirstSeen, c.LastSeen = p.Map(c.FirstSeen), p.Map(c.LastSeen)
			}
			if err := tw.WriteConnection(&c); err != nil {
				return nil, nil, err
			}
		}
		for _, e := range in.File.Events {
			if e.Conn != 0 {
				e.Conn += base
			}
			if i > 0 {
				e.TS, e.Dur = p.Map(e.TS), scale(e.Dur)
			}
			evs = append(evs, e)
		}
		for _, m := range in.File.Markers {
			if i > 0 {
				m.TS, m.Dur = p.Map(m.TS), scale(m.Dur)
			}
			marks = append(marks, m)
		}
		for src, n := range in.File.Lost {
			if err := tw.WriteLost(fmt.Sprintf("%s:%s", in.Name, src), n); err != nil {
				return nil, nil, err
			}
		}
	}
	return evs, marks, nil
}

// writeInTimeOrder writes evs and marks to tw sorted by time (stable: equal times keep their input
// order), each marker before the events at its time or later.
func writeInTimeOrder(tw *trace.Writer, evs []trace.Event, marks []trace.Marker) error {
	sort.SliceStable(evs, func(a, b int) bool { return evs[a].TS < evs[b].TS })
	sort.SliceStable(marks, func(a, b int) bool { return marks[a].TS < marks[b].TS })
	mi := 0
	for i := range evs {
		for mi < len(marks) && marks[mi].TS <= evs[i].TS {
			if err := tw.WriteMarker(&marks[mi]); err != nil {
				return err
			}
			mi++
		}
		if err := tw.WriteEvent(&evs[i]); err != nil {
			return err
		}
	}
	for ; mi < len(marks); mi++ {
		if err := tw.WriteMarker(&marks[mi]); err != nil {
			return err
		}
	}
	return nil
}
