package analyzers

import (
	"math"
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
	unitName := a.opt.Unit
	if unitName == "" {
		unitName = "token"
	}
	var phases []span
	var tokens []trace.Marker
	for _, m := range a.marks {
		if m.Name == "phase" {
			name := m.Text
			if name == "" {
				name = "phase"
			}
			to := int64(0)
			if m.Dur > 0 {
				to = m.TS + m.Dur
			}
			phases = append(phases, span{name: name, from: m.TS, to: to, load: isLoadPhase(name)})
		} else if m.Name == unitName {
			tokens = append(tokens, m)
		}
	}
	if a.unitCmds != nil {
		tokens = nil // the commands asked for win over markers
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
	type acc struct {
		msgs, reqs, reps, rts, rtev, sent, recv, bytes uint64
	}
	var unitAcc acc // messages in the unit phase
	var spanAcc acc // messages between the first and the last unit command
	// Units opened by commands: the sending side's (a client), or the receiving side's when
	// only a server is traced. Only the messages of the connections that open units count.
	var unitTS []int64
	procs := make([]bool, maxProcs+1) // by msgRec.proc
	anyProc := false
	var opener uint8
	for _, bit := range []uint8{recUnit, recUnitRecv} {
		for _, blk := range a.recs.blocks {
			for _, r := range blk {
				if r.kind&bit != 0 {
					unitTS = append(unitTS, r.ts)
					procs[r.proc], anyProc = true, true
				}
			}
		}
		if len(unitTS) > 0 {
			opener = bit
			break
		}
	}
	var units []cmdUnit
	if len(tokens) == 0 && len(unitTS) > 0 {
		var rs []msgRec
		for _, blk := range a.recs.blocks {
			for _, r := range blk {
				if procs[r.proc] {
					rs = append(rs, r)
				}
			}
		}
		units = commandUnits(rs, opener, a.cmdName)
	}
	steadySig, steadyN := steadyShape(units)
	if len(tokens) > 0 { // marker units: the connections of the processes that mark them
		clear(procs)
		anyProc = false
		mpids := map[uint32]bool{}
		for _, t := range tokens {
			mpids[t.PID] = true
		}
		for i, pid := range a.sidePID {
			if mpids[pid] {
				procs[i], anyProc = true, true
			}
		}
	}
	// the unit phase: non-load phases; without phase markers, the span of the unit markers
	var unitPhase []span
	for _, p := range phases {
		if !p.load {
			unitPhase = append(unitPhase, p)
		}
	}
	if len(unitPhase) == 0 && len(tokens) > 0 {
		from, to := tokens[0].TS, int64(0)
		for _, t := range tokens {
			from = min(from, t.TS)
			to = max(to, t.TS+t.Dur)
		}
		if to <= from || allInstants(tokens) {
			to = a.last + 1
		}
		unitPhase = []span{{name: unitName, from: from, to: to}}
	}
	var uFirst, uLast int64
	if len(unitTS) > 0 {
		uFirst, uLast = unitTS[0], unitTS[0]
		for _, t := range unitTS {
			uFirst, uLast = min(uFirst, t), max(uLast, t)
		}
	}
	// Without phase markers, the phases are detected: what comes before the first unit of
	// work is loading, the rest the steady state.
	detected := false
	if len(phases) == 0 {
		start := int64(-1)
		switch {
		case len(tokens) > 0:
			start = tokens[0].TS
			for _, t := range tokens {
				start = min(start, t.TS)
			}
		case len(units) > 0:
			phases = a.unitPhases(units, steadySig, steadyN)
		case len(unitTS) > 0:
			start = uFirst
		}
		if len(phases) > 0 {
			detected = true
		} else if start > a.first {
			phases = []span{{name: "load", from: a.first, to: start, load: true}, {name: "steady", from: start, to: a.last + 1}}
			detected = true
		}
	}
	pacc := make([]acc, len(phases))
	origin := a.first
	for _, p := range phases {
		origin = min(origin, p.from)
	}
	add := func(c *acc, r msgRec) {
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
	for _, blk := range a.recs.blocks {
		for _, r := range blk {
			for k := range phases {
				if r.ts >= phases[k].from && r.ts < phases[k].to {
					add(&pacc[k], r)
					break
				}
			}
			if anyProc && !procs[r.proc] {
				continue
			}
			for _, p := range unitPhase {
				if r.ts >= p.from && r.ts <= p.to {
					add(&unitAcc, r)
					break
				}
			}
			if len(unitTS) >= 2 && r.ts >= uFirst && r.ts < uLast {
				add(&spanAcc, r)
			}
		}
	}
	for k, p := range phases {
		a.s.Phases = append(a.s.Phases, PhaseStats{Trace: a.s.Traces[i], Name: p.name, StartS: secs(p.from - origin),
			DurationS: secs(min(p.to, a.last) - p.from), Messages: pacc[k].msgs, Bytes: pacc[k].bytes})
	}
	if detected {
		a.warnf("%s: no phase markers; phases detected from the first unit of work", a.s.Traces[i])
	}
	wait := a.blockedIn
	var u UnitStats
	var svcMarked int64
	svcN := 0
	switch {
	case len(tokens) > 0:
		n := float64(len(tokens))
		rts := unitAcc.rts
		if unitAcc.rtev > 0 {
			rts = unitAcc.rtev // the tracer's own round-trip events: what the client counted
		}
		u = UnitStats{Name: unitName, Count: uint64(len(tokens)), MessagesPerUnit: float64(unitAcc.msgs) / n, Trace: a.s.Traces[i],
			RequestsPerUnit: round3(float64(unitAcc.reqs) / n), RepliesPerUnit: round3(float64(unitAcc.reps) / n), Side: "client",
			RoundTripsPerUnit: float64(rts) / n, BytesSentPerUnit: float64(unitAcc.sent) / n, BytesRecvPerUnit: float64(unitAcc.recv) / n}
		var dur, w int64
		spans := 0
		svcN = len(tokens)
		for _, t := range tokens {
			if t.Dur > 0 {
				dur += t.Dur
				spans++
			}
		}
		var phaseDur int64
		for _, p := range unitPhase {
			phaseDur += min(p.to, a.last) - p.from
			w += wait(p.from, p.to)
			svcMarked += a.serverTimeIn(p.from, p.to)
		}
		if spans == len(tokens) {
			u.UnitTimeUS = float64(dur) / n / 1e3
		} else {
			u.UnitTimeUS = float64(phaseDur) / n / 1e3
		}
		u.NetWaitUS = float64(w) / n / 1e3
	case len(units) > 0:
		a.cmdUnitStats(i, units, steadySig, steadyN, opener == recUnitRecv)
		return
	case len(unitTS) >= 1:
		a.warnf("%s: %d %s command(s) but no complete %s (none was followed by a reply); no per-%s figures", a.s.Traces[i], len(unitTS), a.unitSpec, a.unitSpec, a.unitSpec)
		return
	default:
		return
	}
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
	splitWait(&u, svcMarked, svcN)
	a.s.Units = append(a.s.Units, u)
}

func allInstants(ms []trace.Marker) bool {
	for _, m := range ms {
		if m.Dur > 0 {
			return false
		}
	}
	return true
}

// blockedIn returns the time, in ns, that the trace's processes spent blocked on round trips
// between from and to (the overlap of their blocked intervals with [from, to)).
func (a *analyzer) blockedIn(from, to int64) int64 {
	var w int64
	for _, blk := range a.blocks.blocks {
		for _, b := range blk {
			lo, hi := max(b.from, from), min(b.to, to)
			if hi > lo {
				w += hi - lo
			}
		}
	}
	return w
}
