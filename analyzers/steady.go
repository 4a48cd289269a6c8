package analyzers

import (
	"fmt"
	"iter"
	"math"
	"sort"
	"strconv"
	"strings"
)

// cmdUnit is one unit of work opened by a unit command (a decode step): from the message
// after the previous unit's end through the first reply after its unit command.
type cmdUnit struct {
	from, to int64 // ns: the previous unit's end (or the unit's first message), the unit's end
	wait     int64 // ns blocked on round trips within [from, to) (analyzer.unitWaits)
	svc      int64 // ns of the wait during which a server traced with the client was at work (analyzer.serverTimes)
	acc      unitAcc
	sig      string // its requests' commands, in order
}

// unitAcc sums the messages of some units.
type unitAcc struct {
	msgs, reqs, reps, rts, sent, recv uint64
	busyRecv                          int64 // ns inside the calls that received messages
}

func (u *unitAcc) add(r msgRec) {
	if r.kind&recRTEvent != 0 {
		u.rts++
		return
	}
	u.msgs++
	if r.kind&recReply != 0 {
		u.reps++
	} else {
		u.reqs++
	}
	if r.kind&recSend != 0 {
		u.sent += uint64(r.size)
	} else {
		u.recv += uint64(r.size)
		u.busyRecv += int64(r.busy)
	}
	u.rts += uint64(r.rts)
}

// completes reports whether record r completes a round trip (a reply, or a tracer's event).
func completes(r msgRec) bool { return r.rts > 0 || r.kind&recRTEvent != 0 }

// commandUnits cuts the records of the sides in procs (in the order of recs) into units, one
// pass, holding only the unit being cut: unit k runs from the message after unit k-1's end
// through the first reply (completed round trip) after its unit command (a record with
// opener); the first unit starts after the last reply before its unit command. A unit command
// with no reply after it before the next one ends its unit just before the next; the last unit
// command with no reply after it opens no complete unit and is not counted.
func commandUnits(recs iter.Seq[*msgRec], procs []bool, opener uint8, cmdSig func(uint32) string) []cmdUnit {
	const (
		before = iota // no unit command yet: the unit starts after the last reply
		open          // a unit command seen, its reply not yet
		closed        // the unit ended; the next one starts with the next message
	)
	var (
		units  []cmdUnit
		cur    cmdUnit
		sig    strings.Builder
		state  = before
		prevTS int64
		seen   bool
		shapes = map[string]string{} // one copy of each command sequence
	)
	add := func(r *msgRec) {
		cur.acc.add(*r)
		if r.kind&(recReply|recRTEvent) == 0 {
			sig.WriteString(cmdSig(r.cmd))
			sig.WriteByte(0)
		}
	}
	emit := func(to int64) {
		cur.to = to
		s := sig.String()
		if sh, ok := shapes[s]; ok {
			s = sh
		} else {
			shapes[s] = s
		}
		cur.sig = s
		units = append(units, cur)
		cur, sig = cmdUnit{from: to}, strings.Builder{}
	}
	for r := range recs {
		if !procs[r.proc] {
			continue
		}
		if !seen {
			cur.from, seen = r.ts-1, true
		}
		isOpener := r.kind&opener != 0
		switch {
		case isOpener && state == open: // the previous unit never completed: it ends here
			emit(prevTS)
			add(r)
		case isOpener:
			add(r)
			state = open
		case state == before && completes(*r):
			cur, sig = cmdUnit{from: r.ts}, strings.Builder{}
		case state == open && completes(*r):
			add(r)
			emit(r.ts)
			state = closed
		default:
			add(r)
		}
		prevTS = r.ts
	}
	return units
}

// steadyShape returns the command sequence shared by the most units (ties: the one whose last
// unit comes last), and how many units have it.
func steadyShape(units []cmdUnit) (string, int) {
	count := map[string]int{}
	lastAt := map[string]int{}
	for i, u := range units {
		count[u.sig]++
		lastAt[u.sig] = i
	}
	best, n := "", 0
	for s, c := range count {
		if c > n || c == n && lastAt[s] > lastAt[best] {
			best, n = s, c
		}
	}
	return best, n
}

// hasSteady reports whether n units of one shape out of total make a steady state: at least
// two, and at least a quarter of all.
func hasSteady(n, total int) bool { return n >= 2 && 4*n >= total }

// describeSig writes a command sequence compactly: "SET_TENSOR×6 GRAPH_RECOMPUTE GET_TENSOR".
func describeSig(sig string) string {
	parts := strings.Split(strings.TrimSuffix(sig, "\x00"), "\x00")
	var out []string
	for i := 0; i < len(parts); {
		j := i
		for j < len(parts) && parts[j] == parts[i] {
			j++
		}
		name := parts[i]
		if name == "" {
			name = "(unknown)"
		}
		if j-i > 1 {
			name = fmt.Sprintf("%s×%d", name, j-i)
		}
		out = append(out, name)
		i = j
	}
	if len(out) == 0 || len(out) == 1 && sig == "" {
		return "(no requests)"
	}
	return strings.Join(out, " ")
}

// unitFigures averages acc over n units that lasted dur ns in all and waited wait ns on round
// trips; server says that the units are a traced server's (their receive calls are its idle
// time, the rest its service).
func unitFigures(name string, n int, acc unitAcc, dur, wait int64, server bool) UnitStats {
	f := float64(n)
	u := UnitStats{Name: name, Count: uint64(n), MessagesPerUnit: round3(float64(acc.msgs) / f),
		RequestsPerUnit: round3(float64(acc.reqs) / f), RepliesPerUnit: round3(float64(acc.reps) / f),
		RoundTripsPerUnit: round3(float64(acc.rts) / f), BytesSentPerUnit: math.Round(float64(acc.sent) / f),
		BytesRecvPerUnit: math.Round(float64(acc.recv) / f), UnitTimeUS: round3(float64(dur) / f / 1e3),
		NetWaitUS: round3(float64(wait) / f / 1e3)}
	if server {
		u.Side = "server"
		u.ServerTimeUS = round3(max(float64(dur-acc.busyRecv), 0) / f / 1e3)
		u.NotServerUS = round3(u.UnitTimeUS - u.ServerTimeUS)
	} else {
		u.Side = "client"
	}
	if u.UnitTimeUS > 0 {
		u.UnitsPerS = round3(1e6 / u.UnitTimeUS)
		if !server && u.NetWaitUS < u.UnitTimeUS && u.NetWaitUS > 0 {
			u.MaxSpeedup = round3(u.UnitTimeUS / (u.UnitTimeUS - u.NetWaitUS))
			u.SpeedupAssumes = "every µs waiting on replies is removable (the server's time is not known from this trace; trace the server to split it)"
		}
	}
	return u
}

// cmdName is the name of command number n (analyzer.cmdIndex).
func (a *analyzer) cmdName(n uint32) string {
	if n == 0 || int(n) > len(a.cmdNames) {
		return ""
	}
	return a.cmdNames[n-1]
}

// unitPhases detects the phases of a trace from its command units: load before the first
// unit, warmup from it to the first unit of the steady shape, steady through the last one,
// and end after it. Boundaries fall on unit starts.
func (a *analyzer) unitPhases(units []cmdUnit, sig string, n int) []span {
	first, last := -1, -1
	for k, u := range units {
		if u.sig == sig {
			if first < 0 {
				first = k
			}
			last = k
		}
	}
	var out []span
	add := func(name string, from, to int64, load bool) {
		if to > from {
			out = append(out, span{name: name, from: from, to: to, load: load})
		}
	}
	add("load", a.first, units[0].from+1, true)
	if !hasSteady(n, len(units)) { // no steady state: the units are one phase
		add("units", units[0].from+1, units[len(units)-1].to+1, false)
		add("end", units[len(units)-1].to+1, a.last+1, true)
		return out
	}
	add("warmup", units[0].from+1, units[first].from+1, true)
	add("steady", units[first].from+1, units[last].to+1, false)
	add("end", units[last].to+1, a.last+1, true)
	return out
}

// cmdUnitStats reports the command units of trace i: the steady state (the units whose
// command sequence is the most common) as its unit, and every shape apart.
func (a *analyzer) cmdUnitStats(i int, units []cmdUnit, sig string, n int, server bool) {
	name := a.unitSpec
	if name == "" {
		name = "unit"
	}
	shapes := map[string]*unitTotals{}
	var order []string
	for k, u := range units {
		sh := shapes[u.sig]
		if sh == nil {
			sh = &unitTotals{firstAt: k}
			shapes[u.sig] = sh
			order = append(order, u.sig)
		}
		a.addUnit(sh, u)
	}
	trace := a.s.Traces[i]
	steadyAt := shapes[sig].firstAt
	for _, sg := range order {
		sh := shapes[sg]
		u := sh.figures(name, server)
		u.Trace, u.Sequence = trace, describeSig(sg)
		switch {
		case sg == sig && hasSteady(n, len(units)):
			u.Shape = "steady"
		case sh.firstAt < steadyAt:
			u.Shape = "before steady"
		default:
			u.Shape = "other"
		}
		a.s.UnitShapes = append(a.s.UnitShapes, u)
	}
	if !hasSteady(n, len(units)) {
		var all unitTotals
		for _, u := range units {
			a.addUnit(&all, u)
		}
		u := all.figures(name, server)
		u.Trace, u.Shape = trace, "all"
		a.s.Units = append(a.s.Units, u)
		a.warnf("%s: no command sequence is shared by at least two %ss and a quarter of them (the most common: %d of %d), so there is no steady state; per-%s figures average all %d",
			trace, name, n, len(units), name, len(units))
		return
	}
	u := shapes[sig].figures(name, server)
	u.Trace, u.Shape, u.Sequence = trace, "steady", describeSig(sig)
	a.s.Units = append(a.s.Units, u)
	if apart := len(units) - n; apart > 0 {
		a.warnf("%s: per-%s figures are of the steady state: %d of %d %ss share the command sequence %s; the other %d (warmup, other shapes) are in unit_shapes",
			trace, name, n, len(units), name, u.Sequence, apart)
	}
}

// unitTotals sums units of work: their count and messages, their time, the time blocked on
// replies in them and the server's time in them (ns); firstAt is the first one's index.
type unitTotals struct {
	n              int
	acc            unitAcc
	dur, wait, svc int64
	firstAt        int
}

// addUnit adds the unit u to t.
func (a *analyzer) addUnit(t *unitTotals, u cmdUnit) {
	t.n++
	t.acc.msgs += u.acc.msgs
	t.acc.reqs += u.acc.reqs
	t.acc.reps += u.acc.reps
	t.acc.rts += u.acc.rts
	t.acc.sent += u.acc.sent
	t.acc.recv += u.acc.recv
	t.acc.busyRecv += u.acc.busyRecv
	t.dur += u.to - u.from
	t.wait += u.wait
	t.svc += u.svc
}

// figures returns the per-unit figures of t's units, named name.
func (t *unitTotals) figures(name string, server bool) UnitStats {
	u := unitFigures(name, t.n, t.acc, t.dur, t.wait, server)
	splitWait(&u, t.svc, t.n)
	return u
}

// serverTimeIn is, when a server is traced in the same trace as its client, the part of the
// client's waits on replies within [from, to) during which the server was not in a receive
// call waiting for (or reading) a request: the server at work while the client waited. 0 when
// no server is traced.
func (a *analyzer) serverTimeIn(from, to int64) int64 {
	return a.serverTimes([]interval{{from, to}})[0]
}

// serverTimes returns serverTimeIn of each span. Within the record budget each is two binary
// searches in the busy set made once per trace (serverBusy); past it, the intervals in the
// temporary files are sorted outside memory and read once for all the spans
// (serverTimesSpilled), or, should a temporary file fail, read once per span.
func (a *analyzer) serverTimes(spans []interval) []int64 {
	out := make([]int64, len(spans))
	if a.srvRecv.len() == 0 {
		return out
	}
	if !a.busyMade {
		a.busy, a.busyMade = a.serverBusy(), true
	}
	if a.busy != nil {
		for k, s := range spans {
			out[k] = a.busy.in(s.from, s.to)
		}
		return out
	}
	err := a.serverTimesSpilled(spans, out)
	if err == nil || a.budget.readErr != nil { // a read error is reported at the trace's end
		return out
	}
	clear(out)
	for k, s := range spans {
		if s.to > s.from {
			out[k] = a.serverTimeScan(s.from, s.to)
		}
	}
	return out
}

// busySet is a set of times as sorted, disjoint intervals, with their lengths summed.
type busySet struct {
	iv  []interval
	cum []int64 // cum[k]: ns in iv[:k]
}

// in returns the ns of the set within [from, to).
func (s *busySet) in(from, to int64) int64 {
	if to <= from {
		return 0
	}
	return s.before(to) - s.before(from)
}

// before returns the ns of the set before x.
func (s *busySet) before(x int64) int64 {
	k := sort.Search(len(s.iv), func(k int) bool { return s.iv[k].to > x })
	v := s.cum[k]
	if k < len(s.iv) && s.iv[k].from < x {
		v += x - s.iv[k].from
	}
	return v
}

// serverBusy returns, once per trace, the times a client was blocked on replies while the
// server traced in the same trace was not in a receive call (the union of the blocked
// intervals less the union of the receive intervals), so that serverTimeIn of a span is two
// binary searches rather than a pass over every interval. nil when the intervals have gone
// to a temporary file: sorting them in memory would take memory in proportion to the trace.
func (a *analyzer) serverBusy() *busySet {
	if a.blocks.nFile > 0 || a.srvRecv.nFile > 0 {
		return nil
	}
	union := func(c *spillList[interval]) []interval {
		out := make([]interval, 0, c.len())
		for iv := range c.all() {
			if iv.to > iv.from {
				out = append(out, *iv)
			}
		}
		return unionIntervals(out)
	}
	waits, idle := union(&a.blocks), union(&a.srvRecv)
	s := &busySet{cum: []int64{0}}
	j := 0
	for _, w := range waits {
		// w less the receive intervals within it, which are sorted and disjoint
		for j < len(idle) && idle[j].to <= w.from {
			j++
		}
		at := w.from
		for k := j; k < len(idle) && idle[k].from < w.to; k++ {
			if idle[k].from > at {
				s.add(interval{at, idle[k].from})
			}
			at = max(at, idle[k].to)
		}
		if w.to > at {
			s.add(interval{at, w.to})
		}
	}
	return s
}

// unionIntervals sorts ivs by start and merges those that overlap or touch, in place; it
// returns the disjoint union, sorted.
func unionIntervals(ivs []interval) []interval {
	sort.Slice(ivs, func(i, j int) bool { return ivs[i].from < ivs[j].from })
	merged := ivs[:0]
	for _, iv := range ivs {
		if n := len(merged); n > 0 && iv.from <= merged[n-1].to {
			merged[n-1].to = max(merged[n-1].to, iv.to)
		} else {
			merged = append(merged, iv)
		}
	}
	return merged
}

func (s *busySet) add(iv interval) {
	s.iv = append(s.iv, iv)
	s.cum = append(s.cum, s.cum[len(s.cum)-1]+iv.to-iv.from)
}

// serverTimeScan is serverTimeIn by a pass over every interval.
func (a *analyzer) serverTimeScan(from, to int64) int64 {
	clip := func(c *spillList[interval]) []interval {
		var out []interval
		for iv := range c.all() {
			if lo, hi := max(iv.from, from), min(iv.to, to); hi > lo {
				out = append(out, interval{lo, hi})
			}
		}
		return unionIntervals(out)
	}
	waits, idle := clip(&a.blocks), clip(&a.srvRecv)
	var busy int64
	j := 0
	for _, w := range waits {
		// the wait, less the server's time in receive calls within it
		d := w.to - w.from
		for j < len(idle) && idle[j].to <= w.from {
			j++
		}
		for k := j; k < len(idle) && idle[k].from < w.to; k++ {
			if lo, hi := max(idle[k].from, w.from), min(idle[k].to, w.to); hi > lo {
				d -= hi - lo
			}
		}
		busy += max(d, 0)
	}
	return busy
}

// splitWait splits a client's unit figures' network wait into the time a server traced in
// the same trace spent serving within the units (svc ns over n units) and the rest, and says
// what the speedup bound assumes.
func splitWait(u *UnitStats, svc int64, n int) {
	if svc <= 0 || n <= 0 || u.Side == "server" {
		return
	}
	u.ServerTimeUS = round3(float64(svc) / float64(n) / 1e3)
	u.NotServerUS = round3(max(u.NetWaitUS-u.ServerTimeUS, 0))
	if u.MaxSpeedup > 0 {
		u.SpeedupAssumes = fmt.Sprintf("every µs waiting on replies is removable, the server's %s µs per %s included; removing only the rest (network and client) bounds it at %s×",
			trimFloat(u.ServerTimeUS), u.Name, trimFloat(round3(u.UnitTimeUS/max(u.UnitTimeUS-u.NotServerUS, 1e-9))))
	}
}

func trimFloat(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
