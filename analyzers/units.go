package analyzers

import (
	"maps"
	"math"
	"slices"
	"sort"

	"github.com/perflab/perflab/trace"
)

type span struct {
	name     string
	from, to int64
	load     bool
}

// phasesAndUnits attributes the trace's messages to its phases and units of work, once the
// whole trace (and so every marker, whenever it was written) has been read.
func (a *analyzer) phasesAndUnits(i int) {
	unitName := a.unitName()
	phases, tokens := a.markerSpans()
	// Units opened by commands: the sending side's (a client), or the receiving side's when
	// only a server is traced. Only the messages of the connections that open units count.
	nOpen, uFirst, procs, anyProc, opener := a.unitOpeners()
	var units []cmdUnit
	if tokens.n == 0 && nOpen > 0 {
		units = commandUnits(a.recs.all(), procs, opener, a.cmdName)
		a.unitWaits(units)
		a.unitServerTimes(units)
	}
	steadySig, steadyN := steadyShape(units)
	if tokens.n > 0 { // marker units: the connections of the processes that mark them
		anyProc = a.markerProcs(tokens, procs)
	}
	unitPhase := a.unitPhase(phases, tokens, unitName)
	phases, detected := a.detectPhases(phases, tokens, units, nOpen, uFirst, steadySig, steadyN)
	pacc, unitAcc := a.countPhases(phases, unitPhase, procs, anyProc)
	a.addPhases(i, phases, pacc)
	if detected {
		a.warnf("%s: no phase markers; phases detected from the first unit of work", a.s.Traces[i])
	}
	switch {
	case tokens.n > 0:
		a.s.Units = append(a.s.Units, a.markerUnits(i, unitName, tokens, unitPhase, unitAcc))
		a.markerUnitsSeen = true
	case len(units) > 0:
		a.cmdUnitStats(i, units, steadySig, steadyN, opener == recUnitRecv)
	case nOpen >= 1:
		a.warnf("%s: %d %s command(s) but no complete %s (none was followed by a reply); no per-%s figures", a.s.Traces[i], nOpen, a.unitSpec, a.unitSpec, a.unitSpec)
	}
}

// markSet is what analyze keeps of a trace's markers: its phase markers, and a sum of its
// unit markers (one per unit of work, so not kept one by one).
type markSet struct {
	phases []trace.Marker
	tokens tokenSum
}

// tokenSum sums unit markers: what the per-unit figures need of them.
type tokenSum struct {
	n        int
	from, to int64 // the earliest start; the latest end (at least 0)
	dur      int64 // ns, the durations of the spans summed
	spans    int   // markers with a duration
	pids     map[uint32]bool
}

// add keeps m if it is a phase marker or a unit marker (named unit).
func (ms *markSet) add(m *trace.Marker, unit string) {
	switch m.Name {
	case "phase":
		ms.phases = append(ms.phases, *m)
	case unit:
		t := &ms.tokens
		if t.n == 0 || m.TS < t.from {
			t.from = m.TS
		}
		t.to = max(t.to, m.TS+m.Dur)
		if m.Dur > 0 {
			t.dur += m.Dur
			t.spans++
		}
		if t.pids == nil {
			t.pids = map[uint32]bool{}
		}
		t.pids[m.PID] = true
		t.n++
	}
}

// copyOf makes ms a copy of o.
func (ms *markSet) copyOf(o *markSet) {
	ms.phases = append(ms.phases[:0], o.phases...)
	ms.tokens = o.tokens
	ms.tokens.pids = maps.Clone(o.tokens.pids)
}

// markerSpans returns the trace's phases (from its phase markers, in time order, each open one
// closed by the next or the trace's end) and its unit markers (none when unit commands were
// asked for: they win over markers).
func (a *analyzer) markerSpans() ([]span, tokenSum) {
	var phases []span
	for _, m := range a.marks.phases {
		name := m.Text
		if name == "" {
			name = "phase"
		}
		to := int64(0)
		if m.Dur > 0 {
			to = m.TS + m.Dur
		}
		phases = append(phases, span{name: name, from: m.TS, to: to, load: isLoadPhase(name)})
	}
	tokens := a.marks.tokens
	if a.unitCmds != nil {
		tokens = tokenSum{}
	}
	sort.SliceStable(phases, func(x, y int) bool { return phases[x].from < phases[y].from })
	for k := range phases {
		if phases[k].to == 0 {
			if k+1 < len(phases) {
				phases[k].to = phases[k+1].from
			} else {
				phases[k].to = a.last + 1
			}
		}
	}
	return phases, tokens
}

// openers counts the messages that open units of work in one direction, as they come.
type openers struct {
	n     int
	first int64  // the earliest one's time
	sides []bool // the sides (msgRec.proc) that carried them
}

func (o *openers) add(r *msgRec) {
	if o.n == 0 || r.ts < o.first {
		o.first = r.ts
	}
	o.n++
	if o.sides == nil {
		o.sides = make([]bool, maxProcs+1)
	}
	o.sides[r.proc] = true
}

// unitOpeners returns how many messages open a unit of work and the earliest one's time, the
// sides (msgRec.proc) that carried them, and which of recUnit (sent) and recUnitRecv
// (received) they are: the sent ones when there are any.
func (a *analyzer) unitOpeners() (n int, first int64, procs []bool, anyProc bool, opener uint8) {
	for b, bit := range []uint8{recUnit, recUnitRecv} {
		if o := a.openers[b]; o.n > 0 {
			return o.n, o.first, slices.Clone(o.sides), true, bit
		}
	}
	return 0, 0, make([]bool, maxProcs+1), false, 0
}

// markerProcs sets procs to the sides of the processes that wrote the unit markers, and
// reports whether there is any.
func (a *analyzer) markerProcs(tokens tokenSum, procs []bool) bool {
	clear(procs)
	anyProc := false
	for i, pid := range a.sidePID {
		if tokens.pids[pid] {
			procs[i], anyProc = true, true
		}
	}
	return anyProc
}

// unitPhase returns the phase units of work are counted in: the non-load phases; without phase
// markers, the span of the unit markers.
func (a *analyzer) unitPhase(phases []span, tokens tokenSum, unitName string) []span {
	var unitPhase []span
	for _, p := range phases {
		if !p.load {
			unitPhase = append(unitPhase, p)
		}
	}
	if len(unitPhase) == 0 && tokens.n > 0 {
		from, to := tokens.from, tokens.to
		if to <= from || tokens.spans == 0 {
			to = a.last + 1
		}
		unitPhase = []span{{name: unitName, from: from, to: to}}
	}
	return unitPhase
}

// detectPhases returns phases, or, without phase markers, the phases detected: what comes
// before the first unit of work is loading, the rest the steady state; detected says which.
func (a *analyzer) detectPhases(phases []span, tokens tokenSum, units []cmdUnit, nOpen int, uFirst int64, steadySig string, steadyN int) ([]span, bool) {
	if len(phases) > 0 {
		return phases, false
	}
	start := int64(-1)
	switch {
	case tokens.n > 0:
		start = tokens.from
	case len(units) > 0:
		phases = a.unitPhases(units, steadySig, steadyN)
	case nOpen > 0:
		start = uFirst
	}
	if len(phases) > 0 {
		return phases, true
	}
	if start > a.first {
		return []span{{name: "load", from: a.first, to: start, load: true}, {name: "steady", from: start, to: a.last + 1}}, true
	}
	return phases, false
}

// phaseAcc counts the messages of a phase.
type phaseAcc struct {
	msgs, reqs, reps, rts, rtev, sent, recv, bytes uint64
}

func (c *phaseAcc) add(r *msgRec) {
	if r.kind&recRTEvent != 0 {
		c.rtev++
		return
	}
	c.msgs++
	if r.kind&recReply != 0 {
		c.reps++
	} else {
		c.reqs++
	}
	c.bytes += uint64(r.size)
	if r.kind&recSend != 0 {
		c.sent += uint64(r.size)
	} else {
		c.recv += uint64(r.size)
	}
	c.rts += uint64(r.rts)
}

// countPhases counts the messages of each phase, and those of the unit phase on the sides that
// open units (all sides when anyProc is false).
func (a *analyzer) countPhases(phases, unitPhase []span, procs []bool, anyProc bool) ([]phaseAcc, phaseAcc) {
	pacc := make([]phaseAcc, len(phases))
	var unitAcc phaseAcc
	for blk := range a.recs.chunks() { // a block at a time: no call per record
		for i := range blk {
			r := &blk[i]
			for k := range phases {
				if r.ts >= phases[k].from && r.ts < phases[k].to {
					pacc[k].add(r)
					break
				}
			}
			if anyProc && !procs[r.proc] {
				continue
			}
			for _, p := range unitPhase {
				if r.ts >= p.from && r.ts <= p.to {
					unitAcc.add(r)
					break
				}
			}
		}
	}
	return pacc, unitAcc
}

// addPhases puts trace i's phases in the summary, their starts counted from the earliest.
func (a *analyzer) addPhases(i int, phases []span, pacc []phaseAcc) {
	origin := a.first
	for _, p := range phases {
		origin = min(origin, p.from)
	}
	for k, p := range phases {
		a.s.Phases = append(a.s.Phases, PhaseStats{Trace: a.s.Traces[i], Name: p.name, StartS: secs(p.from - origin),
			DurationS: secs(min(p.to, a.last) - p.from), Messages: pacc[k].msgs, Bytes: pacc[k].bytes})
	}
}

// markerUnits returns the unit figures of trace i from its unit markers and the messages of
// the unit phase (unitAcc).
func (a *analyzer) markerUnits(i int, unitName string, tokens tokenSum, unitPhase []span, unitAcc phaseAcc) UnitStats {
	n := float64(tokens.n)
	rts := unitAcc.rts
	if unitAcc.rtev > 0 {
		rts = unitAcc.rtev // the tracer's own round-trip events: what the client counted
	}
	u := UnitStats{Name: unitName, Count: uint64(tokens.n), MessagesPerUnit: float64(unitAcc.msgs) / n, Trace: a.s.Traces[i],
		RequestsPerUnit: round3(float64(unitAcc.reqs) / n), RepliesPerUnit: round3(float64(unitAcc.reps) / n), Side: "client",
		RoundTripsPerUnit: float64(rts) / n, BytesSentPerUnit: float64(unitAcc.sent) / n, BytesRecvPerUnit: float64(unitAcc.recv) / n}
	var w, svcMarked, phaseDur int64
	dur, spans := tokens.dur, tokens.spans
	in := make([]interval, len(unitPhase))
	for k, p := range unitPhase {
		in[k] = interval{p.from, p.to}
	}
	for _, v := range a.serverTimes(in) {
		svcMarked += v
	}
	for _, p := range unitPhase {
		phaseDur += min(p.to, a.last) - p.from
		w += a.blockedIn(p.from, p.to)
	}
	if spans == tokens.n {
		u.UnitTimeUS = float64(dur) / n / 1e3
	} else {
		u.UnitTimeUS = float64(phaseDur) / n / 1e3
	}
	u.NetWaitUS = float64(w) / n / 1e3
	if u.UnitTimeUS > 0 {
		u.UnitsPerS = 1e6 / u.UnitTimeUS
		if u.NetWaitUS < u.UnitTimeUS {
			u.MaxSpeedup = u.UnitTimeUS / (u.UnitTimeUS - u.NetWaitUS)
			if u.NetWaitUS > 0 {
				u.SpeedupAssumes = "every µs waiting on replies is removable (the server's time is not known from this trace; trace the server to split it)"
			}
		}
	}
	u.MessagesPerUnit = round3(u.MessagesPerUnit)
	u.RoundTripsPerUnit = round3(u.RoundTripsPerUnit)
	u.BytesSentPerUnit = math.Round(u.BytesSentPerUnit)
	u.BytesRecvPerUnit = math.Round(u.BytesRecvPerUnit)
	u.UnitTimeUS = round3(u.UnitTimeUS)
	u.NetWaitUS = round3(u.NetWaitUS)
	u.UnitsPerS = round3(u.UnitsPerS)
	u.MaxSpeedup = round3(u.MaxSpeedup)
	splitWait(&u, svcMarked, tokens.n)
	return u
}

// blockedIn returns the time, in ns, that the trace's processes spent blocked on round trips
// between from and to (the overlap of their blocked intervals with [from, to)).
func (a *analyzer) blockedIn(from, to int64) int64 {
	var w int64
	for b := range a.blocks.all() {
		lo, hi := max(b.from, from), min(b.to, to)
		if hi > lo {
			w += hi - lo
		}
	}
	return w
}

// unitServerTimes sets each unit's svc to serverTimeIn(from, to), for all the units at once.
func (a *analyzer) unitServerTimes(units []cmdUnit) {
	if a.srvRecv.len() == 0 {
		return
	}
	spans := make([]interval, len(units))
	for k, u := range units {
		spans[k] = interval{u.from, u.to}
	}
	for k, v := range a.serverTimes(spans) {
		units[k].svc = v
	}
}

// unitWaits sets each unit's wait to blockedIn(from, to), in one pass over the blocked
// intervals when the units come in time order (each block then finds the units it overlaps by
// binary search), else unit by unit.
func (a *analyzer) unitWaits(units []cmdUnit) {
	for k := 1; k < len(units); k++ {
		if units[k].from < units[k-1].from || units[k].to < units[k-1].to {
			for j := range units {
				units[j].wait = a.blockedIn(units[j].from, units[j].to)
			}
			return
		}
	}
	for b := range a.blocks.all() {
		k := sort.Search(len(units), func(k int) bool { return units[k].to > b.from })
		for ; k < len(units) && units[k].from < b.to; k++ {
			if lo, hi := max(b.from, units[k].from), min(b.to, units[k].to); hi > lo {
				units[k].wait += hi - lo
			}
		}
	}
}
