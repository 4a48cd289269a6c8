package analyzers

import (
	"fmt"
	"math"
	"sort"

	"github.com/perflab/perflab/trace"
)

// minCISamples is the fewest samples for which a percentile's confidence interval is given.
const minCISamples = 6

// finish makes the Summary's tables and caveats once every trace has been read.
func (a *analyzer) finish() {
	a.s.Duration = secs(a.durNS)
	a.processes()
	a.finishConnections()
	a.finishCommands()
	a.finishErrors()
	area := a.finishRoundTrips()
	a.finishWindows()
	a.finishInFlight(area)
	a.finishInFlightCap()
	a.finishBatchFit()
	a.finishDistribution()
	a.finishCaveats()
	a.finishBatches()
	a.text.finish(a)
	a.s.Warnings = append(a.s.Warnings, a.warnings...)
	a.finishEvidence()
}

// finishConnections makes a row per connection that carried calls or frames.
func (a *analyzer) finishConnections() {
	s := a.s
	// Sized once: a trace of many connections would otherwise copy the list at every growth.
	// Each connection's aggregate is let go once its row is made, so that the two need not be
	// held whole at once.
	s.Connections = make([]ConnStats, 0, a.connList.len())
	a.curConns, a.lastConn = connIndex[*connAgg]{}, nil
	a.connList.each(true, func(c *connAgg) {
		cs := ConnStats{Trace: a.traceLabel(int(c.trace)), ID: c.id, Family: c.family.String(), Local: c.local, Remote: c.remote, PID: c.pid}
		for _, d := range []trace.Dir{trace.DirSend, trace.DirRecv} {
			ag := c.dir(d)
			ds := DirStats{Calls: ag.calls, Bytes: ag.bytes, Frames: ag.frames, LatencyUS: ag.latency(a.conf)}
			if d == trace.DirSend {
				cs.Send = ds
			} else {
				cs.Recv = ds
			}
		}
		if cs.Send.Calls+cs.Recv.Calls+cs.Send.Frames+cs.Recv.Frames == 0 {
			return
		}
		s.Connections = append(s.Connections, cs)
	})
}

// finishCommands makes a row per command, direction and kind, most frequent first.
func (a *analyzer) finishCommands() {
	s := a.s
	for k, c := range a.cmds {
		kind := "request"
		switch {
		case k.push:
			kind = "push"
		case k.reply:
			kind = "reply"
		}
		cs := CmdStats{Protocol: k.proto, Name: k.name, ID: k.id, Direction: k.dir.String(), Kind: kind, Count: c.count, Bytes: c.bytes}
		if c.spanNS != a.durNS {
			cs.SpanS = secs(c.spanNS)
		}
		if c.rtt.N() > 0 {
			l := c.rtt.latency(a.conf)
			cs.RTTUS = &l
		}
		s.Commands = append(s.Commands, cs)
	}
	sort.Slice(s.Commands, func(i, j int) bool {
		x, y := s.Commands[i], s.Commands[j]
		if x.Count != y.Count {
			return x.Count > y.Count
		}
		if x.Name != y.Name {
			return x.Name < y.Name
		}
		if x.Kind != y.Kind {
			return x.Kind > y.Kind
		}
		if x.Direction != y.Direction {
			return x.Direction > y.Direction
		}
		// Two protocols (venus and venus-mesa) or two ids can share a name: order them too,
		// so that the rows do not follow the map's order from run to run.
		if x.Protocol != y.Protocol {
			return x.Protocol < y.Protocol
		}
		return x.ID < y.ID
	})
}

// finishErrors makes a row per errno and direction of the failed calls.
func (a *analyzer) finishErrors() {
	s := a.s
	for k, n := range a.errs {
		s.Errors = append(s.Errors, ErrnoCount{Errno: k.errno, Name: errnoName(k.errno), Dir: k.dir.String(), Count: n})
	}
	sort.Slice(s.Errors, func(i, j int) bool {
		if s.Errors[i].Errno != s.Errors[j].Errno {
			return s.Errors[i].Errno < s.Errors[j].Errno
		}
		return s.Errors[i].Dir > s.Errors[j].Dir
	})
}

// finishRoundTrips fills the round-trip figures and returns the area under the processes'
// requests in flight (ns × requests), for Little's law.
func (a *analyzer) finishRoundTrips() float64 {
	s := a.s
	rt := &s.RoundTrips
	rt.Client, rt.Served, rt.Unpaired = a.rtt.N(), a.nServed, a.unpaired
	rt.Count = rt.Client + rt.Served
	rt.RTTUS = a.rtt.latency(a.conf)
	var blocked int64
	var area float64
	for _, p := range a.procs {
		blocked += p.blocked
		area += p.area
	}
	rt.BlockedS = secs(blocked)
	rt.Unanswered = a.unanswered + a.dropped + a.tracerUnanswered
	if a.service.N() > 0 {
		l := a.service.latency(a.conf)
		rt.ServiceUS = &l
		l2 := a.serviceLast.latency(a.conf)
		rt.ServiceToLastUS = &l2
	}
	if a.firstByte.N() > 0 {
		l := a.firstByte.latency(a.conf)
		rt.FirstByteUS = &l
	}
	// each distribution on its own samples: a client's round trips, a server's service times
	for _, d := range [...]struct {
		what string
		n    uint64
	}{{"round trips", rt.Client}, {"served round trips", rt.Served}} {
		if d.n > 0 && d.n < minCISamples {
			a.warnf("%s: %d samples, too few for a confidence interval of the median (need %d)", d.what, d.n, minCISamples)
		}
		if d.n > 0 && d.n < 1000 {
			a.warnf("%s: %d samples; p99.9 needs at least 1000 to mean anything", d.what, d.n)
		}
	}
	return area
}

// finishWindows lists the per-window summaries: per direction, then per command's round trips
// (most round trips first).
func (a *analyzer) finishWindows() {
	s := a.s
	for d := range a.win {
		s.Windows = append(s.Windows, a.win[d].windows...)
	}
	for _, c := range s.Commands {
		k := cmdKey{proto: c.Protocol, name: c.Name, id: c.ID, dir: trace.DirRecv, reply: c.Kind == "reply"}
		if c.Direction != "recv" || c.Kind != "reply" || !isVenusFamily(c.Protocol) {
			continue
		}
		if ca := a.cmds[k]; ca != nil {
			for _, w := range ca.win.windows {
				w.Command = c.Name
				s.Windows = append(s.Windows, w)
			}
		}
	}
}

// finishInFlight fills in-flight and Little's law: L/λ against the MEAN response time (the
// law's W); the median is shown apart. A client's round trips when there are, else a server's
// service. area is finishRoundTrips's.
func (a *analyzer) finishInFlight(area float64) {
	s, rt := a.s, &a.s.RoundTrips
	if dur := float64(a.clientDurNS) / 1e9; rt.Client > 0 && dur > 0 {
		L := area / 1e9 / dur // time-average of requests in flight: ∫ N(t) dt / T
		s.InFlight = &InFlight{Of: "round trips", Mean: round3(L), Max: a.inflMax, MaxAtLeast: a.inflCapped, Series: a.infl.points(a.infl.origin)}
		lambda := float64(rt.Client) / dur
		label := "round trips"
		if len(s.Traces) > 1 {
			label = "round trips, all traces"
		}
		rows := LittleFromTable([]LittlePoint{{Label: label, InFlight: L, ThroughputPerS: lambda,
			RTTMeasuredUS: a.rtt.Mean() / 1e3, RTTMedianUS: rt.RTTUS.P50}})
		for i := range rows {
			rows[i] = roundLittle(rows[i])
		}
		s.LittlesLaw = append(s.LittlesLaw, rows...)
	} else if dur := float64(a.servedDurNS) / 1e9; rt.Served > 0 && dur > 0 {
		var sarea float64
		for _, p := range a.procs {
			sarea += p.serviceArea
		}
		L := sarea / 1e9 / dur // requests in service, time-averaged
		s.InFlight = &InFlight{Of: "service", Mean: round3(L), Max: a.svcMax, MaxAtLeast: a.inflCapped, Series: a.svcInfl.points(a.svcInfl.origin)}
		rows := LittleFromTable([]LittlePoint{{Label: "server service", InFlight: L, ThroughputPerS: float64(rt.Served) / dur,
			RTTMeasuredUS: a.serviceLast.Mean() / 1e3, RTTMedianUS: rt.ServiceToLastUS.P50}})
		for i := range rows {
			rows[i] = roundLittle(rows[i])
		}
		s.LittlesLaw = append(s.LittlesLaw, rows...)
	}
}

// finishInFlightCap warns when a round trip counted the most requests in flight perflab
// counts: the peak, and the batch model's largest N, are then lower bounds.
func (a *analyzer) finishInFlightCap() {
	if a.inflCapped {
		a.warnf("%d or more requests were in flight at once in one process, the most perflab counts per round trip (it keeps each process's last %d): the peak in flight and the batch model's largest N are lower bounds", maxInFlightN, nRecent)
	}
}

// finishBatchFit fits the batch model to the RTT by requests in flight.
func (a *analyzer) finishBatchFit() {
	s := a.s
	if a.nByN >= 2 {
		var pts []BatchPoint
		for n, h := range a.byN {
			if h != nil && h.N() >= 3 {
				pts = append(pts, BatchPoint{N: float64(n), TUS: h.Mean() / 1e3, Weight: float64(h.N())})
			}
		}
		sort.Slice(pts, func(i, j int) bool { return pts[i].N < pts[j].N })
		if fit, warns, err := FitBatchModel(pts, a.conf); err == nil {
			s.BatchFit = roundFit(fit)
			a.warnings = append(a.warnings, warns...)
			if fit.TPerReqUS <= 0 || fit.R2 < 0.5 {
				a.warnf("batch fit: T_per_req %.3f µs, R² %.2f: the batch model does not describe this trace's RTT by requests in flight", fit.TPerReqUS, fit.R2)
			}
			if curved(fit.Residuals) {
				s.BatchRefinement = RefineBatch(pts)
			}
		}
	}
}

// finishDistribution makes the populations and the histogram: of round trips (a client's RTT,
// else a server's service time); without either, the histogram is of system-call durations and
// says so, and no populations are given.
func (a *analyzer) finishDistribution() {
	s := a.s
	h, of := &a.rtt, "rtt"
	if h.N() == 0 {
		h, of = &a.service, "service"
	}
	if h.N() == 0 {
		h, of = &a.calls, "syscall"
	}
	if h.N() > 0 {
		s.Histogram = h.buckets(40)
		s.HistogramOf = of
	}
	if h.N() > 0 && of != "syscall" {
		s.ModesOf = of
		vs, cs := h.values()
		for _, m := range FindModes(vs, cs) {
			s.Modes = append(s.Modes, Mode{CenterUS: round3(m.CenterUS / 1e3), Share: round3(m.Share),
				LowUS: round3(m.LowUS / 1e3), HighUS: round3(m.HighUS / 1e3)})
		}
	}
	s.Timeline = a.tl.points(a.tl.origin)
}

// finishCaveats warns of what makes the figures lower bounds or partial.
func (a *analyzer) finishCaveats() {
	s := a.s
	if s.Lost > 0 {
		a.warnf("the producers lost %d events; counts are lower bounds", s.Lost)
	}
	if a.lostSync > 0 {
		also := ""
		if n := a.unanswered + a.dropped; n > 0 {
			// replies in bytes past the heads are not seen: their requests look unanswered (the
			// round trips' unanswered count, those dropped from a full queue included)
			also = fmt.Sprintf("; the %d requests left unanswered may have had their replies there, so round trips and requests in flight are those of the replies seen (%s)", n, HeadAdvice(a.s.Meta, "see them"))
		}
		a.warnf("the decoder lost frame boundaries %d times (a header past the captured payload head, or bytes that are no header of the protocol); frames there are not counted%s", a.lostSync, also)
	}
	if a.truncated > 0 {
		a.warnf("%d frames were cut off by the end of the trace", a.truncated)
	}
	if a.dropped > 0 {
		a.warnf("%d requests were never answered in the trace and dropped from pairing", a.dropped)
	}
	if s.Events == 0 {
		a.warnf("the trace holds no events")
	}
}

// processes sums connections and round trips per process (pids of different traces apart).
func (a *analyzer) processes() {
	type key struct {
		trace int
		pid   uint32
	}
	idx := map[key]int{}
	var out []ProcStats
	get := func(k key) *ProcStats {
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, ProcStats{Trace: a.traceLabel(k.trace), PID: k.pid})
		}
		return &out[i]
	}
	a.connList.each(false, func(c *connAgg) {
		if c.dir(trace.DirSend).calls+c.dir(trace.DirRecv).calls+c.dir(trace.DirSend).frames+c.dir(trace.DirRecv).frames == 0 {
			return
		}
		p := get(key{int(c.trace), c.pid})
		p.Connections++
		for _, d := range []trace.Dir{trace.DirSend, trace.DirRecv} {
			t := &p.Send
			if d == trace.DirRecv {
				t = &p.Recv
			}
			t.Calls += c.dir(d).calls
			t.Bytes += c.dir(d).bytes
			t.Frames += c.dir(d).frames
		}
	})
	for k, pa := range a.procs {
		if pa.rts == 0 {
			continue
		}
		p := get(key{int(k >> 32), uint32(k)})
		p.RoundTrips = pa.rts
		p.BlockedS = secs(pa.blocked)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Trace != out[j].Trace {
			return out[i].Trace < out[j].Trace
		}
		return out[i].PID < out[j].PID
	})
	if len(out) > 1 || len(out) == 1 && out[0].PID != 0 {
		a.s.Processes = out
	}
}

// traceLabel names trace i in per-trace rows when several traces are analysed ("" for one).
func (a *analyzer) traceLabel(i int) string {
	if len(a.s.Traces) < 2 || i >= len(a.s.Traces) {
		return ""
	}
	return a.s.Traces[i]
}

func roundLittle(r LittleRow) LittleRow {
	r.InFlight = round3(r.InFlight)
	r.ThroughputPerS = round3(r.ThroughputPerS)
	r.RTTPredictedUS = round3(r.RTTPredictedUS)
	r.RTTMeasuredUS = round3(r.RTTMeasuredUS)
	r.Error = round3(r.Error)
	return r
}

func roundFit(f *BatchFit) *BatchFit {
	f.TFixedUS, f.TPerReqUS, f.R2 = round3(f.TFixedUS), round3(f.TPerReqUS), round3(f.R2)
	f.TFixedCI = [2]float64{round3(f.TFixedCI[0]), round3(f.TFixedCI[1])}
	f.TPerReqCI = [2]float64{round3(f.TPerReqCI[0]), round3(f.TPerReqCI[1])}
	if !math.IsInf(f.ThroughputMax, 0) {
		f.ThroughputMax = math.Round(f.ThroughputMax)
	}
	return f
}
