package lab

import (
	"fmt"
	"math"

	"github.com/perflab/perflab/loops"
	"github.com/perflab/perflab/models"
)

// WakeIdleMin is the least share of wake-ups that find a processor idle (pointModel.idleShare)
// at the calibration point for the wake-up cost to be calibrated there: 0.5. Below it, the
// machine's other work kept the processors busy and the halted processor's wake-up cannot be
// told from the rest of the round; the model then takes the rest as a constant delay Z.
const WakeIdleMin = 0.5

// Saturated is the processors' busy share over a point's window from which a prediction the
// processors bind, with the point's own D_cpu, is the utilisation law restated: 98%.
const Saturated = 0.98

// LoopBinds is the utilisation of a loop's station above which the report names that loop as
// what sets a point's throughput: 80%.
const LoopBinds = 0.8

// pointModel is the loops' network built from each point's own measured demands, not from
// lines through the points (ClosedLoop.LoopDemands "point"). Per request at point p:
//
//   - the server's loop: its processor time (schedstat of its threads), with its threads'
//     run-queue wait where the loops are own (below), plus a wake-up, w·φ, for each request
//     that finds it asleep in its wait call, on min(k, P) stations;
//   - the client's own event loop, when it has one: its busy time per reply by the clock
//     (outside its wait calls: its processor time and its waits for the processor it shares
//     with the server's loop while it had work), plus w·φ for each reply that finds it asleep;
//     a threaded client without one: its processor time per request plus one wake-up, w·φ
//     (each of its threads sleeps until its reply), as a delay;
//   - a request finds a loop asleep, by the arrival theorem, with the probability that its
//     station is idle with one client fewer, 1 − U(c − 1), solved together with the demands it
//     sets (wakeShares): a loop kept busy rarely waits, and a wait that returns at once wakes
//     nothing;
//   - where the machine's other work took more than OwnShare of the processors, the waits are
//     mostly theirs: the demands are then processor time alone, run at the speed the others
//     left (loopSpeed), and the processor station holds the rest;
//   - where the server holds a cycle's replies until its last request is read (redis writes
//     them once it has read every ready connection), a request's reply waits for the requests
//     read after it: (N_r − 1)/2 of the server's demand, N_r the requests per cycle as a
//     request sees it (Σ N²/Σ N over the cycles, a request being more likely in a large
//     cycle), times the share of such cycles; a delay, since no other request waits for it;
//   - where the client's event loop also takes the held replies together and writes the next
//     requests together, the two loops can fall into lock-step: every client's request read
//     in one of the server's cycles, then every reply in one of the client's, the loops never
//     running at once. A request in that state takes the server's busy time per such cycle
//     over the clients, the client's processor time and two wake-ups of a halted processor
//     over the clients; the share of requests read in such cycles, measured at the point
//     (setServerLoops), moves at that pace, the others through the network (with the hold of
//     their own cycles), and the throughput is their mixture in time;
//   - φ, the share of wake-ups that find a processor idle, from the model's own throughput
//     (idleShare): a loop thread woken while another processor is idle pays that processor's
//     wake from its halt; one woken while all are busy waits in the run queue instead, which
//     the processor station holds.
//
// w, the wake-up cost of a halted processor per blocking wait, is the one figure taken from a
// client's throughput: at the calibration point. N, the demands and the others' processor
// time are measured at each point; the throughput never is an input but at the calibration
// point.
type pointModel struct {
	side int // server stations: min(loop threads, processors)
	// own is set when every loop thread (the server's and the client's) can have a processor of
	// its own: the server's demand then adds its threads' run-queue wait (schedstat: the
	// processor it shares with the client's loop), as the client loop's busy time by the clock
	// holds its own; else the loops share the processors, the min(k, P) stations hold that, and
	// the server's demand is its processor time.
	own bool
}

// pointReady reports whether every point has what pointModel needs: the server's processor
// time per request and its requests per cycle, the processors over its load window, and the
// client's time (its loop's busy time per reply, or a threaded client's processor time).
func pointReady(in []closedLoopInput) bool {
	if len(in) == 0 {
		return false
	}
	for _, p := range in {
		if p.CPUUS <= 0 || p.N <= 0 || p.CPU == nil || p.CPU.OwnUS <= 0 || p.CPU.AvailableProcessors <= 0 || p.CPU.Processors <= 0 {
			return false
		}
		if c := p.Client; c != nil {
			if c.BusyPerReplyUS <= 0 || c.RepliesPerCycle <= 0 {
				return false
			}
		} else if p.CPU.ClientUS <= 0 {
			return false
		}
	}
	return true
}

// speed is the speed the machine's other work left the loops at p: 1 when the demands are
// each thread's time on or waiting for a processor (own: the waits hold the others' share),
// else loopSpeed (the demands are processor time, which a share a < 1 of a processor
// stretches by 1/a).
func (m pointModel) speed(p *closedLoopInput) float64 {
	if m.ownAt(p) {
		return 1
	}
	return loopSpeed(p)
}

// OwnShare is how much of the processors the machine's other work may take at a point for the
// loops' run-queue waits there to be taken as their own (the server's and the client's loops
// waiting for each other's processor): half a processor. Past it, the waits are mostly the
// others', which the processors available hold (the processor station, and the loops' speed).
const OwnShare = 0.5

// ownAt reports whether the loops' demands at p are their threads' time on or waiting for a
// processor (m.own, and the others left p's processes all but OwnShare of the processors),
// else their processor time, slowed by the share of a processor the others left (speed).
func (m pointModel) ownAt(p *closedLoopInput) bool {
	return m.own && p.CPU.AvailableProcessors >= float64(p.CPU.Processors)-OwnShare
}

// pointSolution is the loops' network at one point.
type pointSolution struct {
	throughput float64 // requests/s
	serverUS   float64 // time per request in the server's loop, µs
	serverD    float64 // the server's demand per request (all its stations), µs
	clientD    float64 // the client loop's demand per reply, or a threaded client's delay, µs
	idle       float64 // φ
	serverU    float64 // utilisation of the busiest server station
	clientU    float64 // of the client loop's station (0: none)
	hold       float64 // a reply's wait for the rest of its cycle, µs
	lockUS     float64 // a request's time in lock-step (0: none moved so), µs
	wake       wakeShares
}

// wakeShares are the shares of requests that find the server's loop asleep in its wait call
// and of replies that find the client's loop asleep: each such arrival wakes its loop.
type wakeShares struct{ server, client float64 }

// requestN is the requests per cycle of the server's loops as a request sees them: Σ N²/Σ N
// over the cycles that received requests (0: none).
func requestN(byN []loops.NCycles) float64 {
	var sq, n float64
	for _, g := range byN {
		sq += float64(g.N) * float64(g.N) * float64(g.Cycles)
		n += float64(g.N) * float64(g.Cycles)
	}
	if n == 0 {
		return 0
	}
	return sq / n
}

// hold is the time a request's reply waits in its cycle for the requests read after it at p,
// for a server demand d per request on side stations, µs: (N_r − 1)/2 of d per station, times
// the share of cycles that held their replies (holdShare, from setServerLoops).
func hold(p *closedLoopInput, d float64, side int) float64 {
	return p.holdShare * d / float64(side)
}

// idleShare is φ at p with the point's processes running x requests/s: the share of the
// processors other than the waker's that are idle. The busy processors are the point's own
// processor time (x·D_cpu) and the others' (P − available); the waker holds one.
func idleShare(p *closedLoopInput, x float64) float64 {
	spare := float64(p.CPU.Processors - 1)
	if spare <= 0 {
		return 0
	}
	busy := x*p.CPU.OwnUS*1e-6 + float64(p.CPU.Processors) - p.CPU.AvailableProcessors - 1
	return 1 - math.Min(math.Max(busy/spare, 0), 1)
}

// at solves the loops at p for the wake-up cost w and the delay z (µs) with a given φ: the
// network, mixed in time with the lock-step of p's share of requests that moved so.
func (m pointModel) at(p *closedLoopInput, w, z, idle float64) (pointSolution, error) {
	s, err := m.network(p, w, z, idle)
	if err != nil || p.lockShare <= 0 {
		return s, err
	}
	c := float64(p.Clients)
	client := p.CPU.ClientUS
	if client <= 0 {
		client = p.Client.BusyPerReplyUS
	}
	// In lock-step each loop sleeps while the other works, so each hand-over wakes a halted
	// processor, and the client runs on a processor of its own (no run-queue wait).
	s.lockUS = p.lockBusyUS/c + math.Max(client+math.Min(z, 0), 0) + math.Max(z, 0) + 2*w/c
	f := p.lockShare
	s.throughput = 1 / (f*s.lockUS*1e-6 + (1-f)/s.throughput)
	s.serverUS = f*(p.lockBusyUS+w) + (1-f)*s.serverUS
	return s, nil
}

// network solves the loops' queueing network at p for the wake-up cost w and the delay z
// (µs) with a given φ, and the shares of arrivals that wake a loop with it: 1 − U(c − 1) of
// each loop's station, from every loop woken (the most) until they settle. Half a step at a
// time: more wake-ups lengthen the demands, which keeps the loops busier and wakes them less.
func (m pointModel) network(p *closedLoopInput, w, z, idle float64) (pointSolution, error) {
	wake := wakeShares{1, 1}
	fewer := *p
	fewer.Clients--
	var s pointSolution
	for range 100 {
		var err error
		if s, err = m.stations(p, w, z, idle, wake); err != nil || p.Clients == 1 {
			return s, err
		}
		f, err := m.stations(&fewer, w, z, idle, wake)
		if err != nil {
			return s, err
		}
		next := wakeShares{1 - f.serverU, 1 - f.clientU}
		if math.Abs(next.server-wake.server) < 1e-6 && math.Abs(next.client-wake.client) < 1e-6 {
			break
		}
		wake = wakeShares{(wake.server + next.server) / 2, (wake.client + next.client) / 2}
	}
	return s, nil
}

// stations solves the loops' queueing network at p for the wake-up cost w, the delay z (µs),
// φ and the shares of arrivals that wake each loop.
func (m pointModel) stations(p *closedLoopInput, w, z, idle float64, wake wakeShares) (pointSolution, error) {
	own := m.ownAt(p)
	s := pointSolution{idle: idle, serverD: p.CPUUS + w*idle*wake.server, wake: wake}
	if own {
		s.serverD += p.RunDelayUS
	}
	c := models.ClosedLoop{Clients: p.Clients}
	for range m.side {
		c.DemandsUS = append(c.DemandsUS, s.serverD/float64(m.side))
	}
	// z < 0 is the part of the client's time that runs beside the server's (calibrate), taken
	// off the client's demand.
	if cl := p.Client; cl != nil {
		d := cl.BusyPerReplyUS
		if !own && p.CPU.ClientUS > 0 {
			d = p.CPU.ClientUS
		}
		s.clientD = d + w*idle*wake.client
		s.clientD = math.Max(s.clientD+math.Min(z, 0), 0)
		c.DemandsUS = append(c.DemandsUS, s.clientD)
		c.DelayUS = math.Max(z, 0)
	} else {
		s.clientD = math.Max(p.CPU.ClientUS+w*idle+z, 0)
		c.DelayUS = s.clientD
	}
	s.hold = hold(p, s.serverD, m.side)
	c.DelayUS += s.hold
	r, err := models.MVA(c)
	if err != nil || r.ThroughputPerS <= 0 {
		return s, fmt.Errorf("closed-loop model at %d clients: no throughput (%v)", p.Clients, err)
	}
	s.throughput = r.ThroughputPerS
	for i := range m.side {
		s.serverUS += r.QueueLen[i] / r.ThroughputPerS * 1e6
		s.serverU = math.Max(s.serverU, r.Utilization[i])
	}
	s.serverUS += s.hold
	if p.Client != nil {
		s.clientU = r.Utilization[m.side]
	}
	return s, nil
}

// solve is the network at p with φ from its own throughput: the greatest x with
// x = X(w·φ(x)), reached from the throughput with φ = 0, the most the network gives (φ falls
// as x rises and the throughput rises as φ falls, so the iterates fall to it). Where the
// wake-ups cost much, a second, lower one can exist (lowest): processors that halt between
// requests make every request pay a wake-up, which keeps them idle enough to halt. solve
// takes the busy one: once the processors are busy a wake-up finds none halted, which keeps
// them busy; predictPoints warns where the two differ.
func (m pointModel) solve(p *closedLoopInput, w, z float64) (pointSolution, error) {
	s0, err := m.at(p, w, z, 0)
	if err != nil {
		return s0, err
	}
	return m.fixedPoint(p, w, z, s0.throughput)
}

// lowest is the least x with x = X(w·φ(x)), reached from x = 0 (the iterates rise to it).
func (m pointModel) lowest(p *closedLoopInput, w, z float64) (pointSolution, error) {
	return m.fixedPoint(p, w, z, 0)
}

// fixedPoint iterates x = X(w·φ(x)) from x.
func (m pointModel) fixedPoint(p *closedLoopInput, w, z, x float64) (pointSolution, error) {
	var s pointSolution
	for range 200 {
		var err error
		s, err = m.at(p, w, z, idleShare(p, x))
		if err != nil {
			return s, err
		}
		if math.Abs(s.throughput-x) <= 1e-9*s.throughput {
			break
		}
		x = s.throughput
	}
	return s, nil
}

// calibrate finds, at cal, the wake-up cost w (when the processors were idle enough there to
// tell it, WakeIdleMin) or else the delay z that gives the measured throughput at the loops'
// speed there; ok is false when the demands alone are slower than the measurement (w and z
// then 0, or z the least the delay allows).
func (m pointModel) calibrate(cal *closedLoopInput) (w, z float64, wake, ok bool) {
	cycle := float64(cal.Clients) / cal.ThroughputPerS * 1e6 * m.speed(cal)
	want := float64(cal.Clients) / cycle * 1e6
	r, err := m.solve(cal, 0, 0)
	if err != nil {
		return 0, 0, false, false
	}
	if r.throughput < want {
		// The demands alone are longer than the round: part of the client's time runs beside
		// the server's (its busy time after its write, while the server reads). That overlap,
		// −z, is what gives the measured round.
		lo := -r.clientD
		if s, err := m.solve(cal, 0, lo); err != nil || s.throughput < want {
			return 0, lo, false, false
		}
		hi := 0.0
		for range 100 {
			mid := (lo + hi) / 2
			if s, err := m.solve(cal, 0, mid); err == nil && s.throughput > want {
				lo = mid
			} else {
				hi = mid
			}
		}
		return 0, (lo + hi) / 2, false, true
	}
	wake = idleShare(cal, cal.ThroughputPerS) >= WakeIdleMin
	f := func(v float64) float64 {
		var s pointSolution
		if wake {
			s, err = m.solve(cal, v, 0)
		} else {
			s, err = m.solve(cal, 0, v)
		}
		if err != nil {
			return 0
		}
		return s.throughput
	}
	lo, hi := 0.0, cycle
	for k := 0; f(hi) > want && k < 30; k++ {
		lo, hi = hi, 2*hi
	}
	for range 100 {
		mid := (lo + hi) / 2
		if f(mid) > want {
			lo = mid
		} else {
			hi = mid
		}
	}
	if wake {
		return (lo + hi) / 2, 0, true, true
	}
	return 0, (lo + hi) / 2, false, true
}

// binds names the loop station that sets the loops' throughput at s, and why.
func (s pointSolution) binds(threaded bool) (string, string) {
	switch {
	case s.clientU >= LoopBinds && s.clientU >= s.serverU:
		return "client loop", fmt.Sprintf("the client's one loop thread busy %.0f%% of the time at %.1f µs per reply (its busy time by the clock and its wake-ups): at most %.0f/s",
			100*s.clientU, s.clientD, 1e6/s.clientD)
	case s.serverU >= LoopBinds:
		return "server loop", fmt.Sprintf("the server's loop busy %.0f%% of the time at %.1f µs per request (its processor time and its wake-ups)", 100*s.serverU, s.serverD)
	}
	what := "the round's delay"
	if threaded {
		what = fmt.Sprintf("the round's delay (the client's %.1f µs per request with its wake-up)", s.clientD)
	}
	if s.hold >= 0.05 { // what prints as 0.0 µs is not named
		what += fmt.Sprintf(", the replies the server holds to its cycle's end (%.1f µs a request)", s.hold)
	}
	return "delay", fmt.Sprintf("no loop is busy %.0f%% of the time (server %.0f%%, client %.0f%%): %s and the wake-ups of halted processors (%.0f%% of them found one idle) set it",
		100*LoopBinds, 100*s.serverU, 100*s.clientU, what, 100*s.idle)
}

// LockstepNamed is the least share of a point's requests in lock-step that its why names: 5%.
const LockstepNamed = 0.05

// lockstep is what a point's why adds for its requests in lock-step ("" below LockstepNamed).
func lockstep(p *closedLoopInput, s pointSolution) string {
	if p.lockShare < LockstepNamed {
		return ""
	}
	return fmt.Sprintf("; %.0f%% of the requests moved in lock-step (all %d in one of the server's cycles, then in one of the client's, the loops never working at once) at %.1f µs a request, the others at the loops' pace above",
		100*p.lockShare, p.Clients, s.lockUS)
}

// predictPoints calibrates pm at cal and adds its prediction at every point to cl (the lower
// of the loops' network and the processors'), with the warnings they deserve: a point missed by
// more than ExternalPredictionTolerance, a throughput that fell as clients were added, a
// calibration that could not reach the measurement or could not tell the wake-up cost.
func (cl *ClosedLoop) predictPoints(pm pointModel, procs processorNet, in []closedLoopInput, cal *closedLoopInput) []string {
	var warns []string
	cl.LoopDemands, cl.Model = "point", ClosedLoopPointModel
	w, z, wake, ok := pm.calibrate(cal)
	cl.WakeUS, cl.ZUS = round3(w), round3(z)
	cycle := float64(cal.Clients) / cal.ThroughputPerS * 1e6
	switch {
	case !ok:
		warns = append(warns, fmt.Sprintf("c%d: the loops' measured demands alone take longer than the measured %.1f µs per request, even with none of the client's time on the path: no wake-up cost or delay calibrated", cal.Clients, cycle))
	case z < 0:
		warns = append(warns, fmt.Sprintf("c%d: the loops' measured demands alone take longer than the measured %.1f µs per request: %.1f µs of the client's time per request runs beside the server's (calibrated there, taken off the client's demand at every point), and a halted processor's wake-up cannot be told",
			cal.Clients, cycle, -z))
	case !wake:
		warns = append(warns, fmt.Sprintf("c%d: the machine's other work kept the processors busy at the calibration point (%.0f%% of wake-ups could find one idle): a halted processor's wake-up cannot be told there, and the rest of the round is a constant delay Z = %.1f µs, which the points with more clients may not pay",
			cal.Clients, 100*idleShare(cal, cal.ThroughputPerS), z))
	}
	if res := cal.ResidenceUS; res > 0 {
		cl.ZShare = math.Round(math.Max(1-res/cycle, 0)*1e4) / 1e4
	}
	var peak throughputPeak
	for i := range in {
		p := &in[i]
		warns = peak.see(p, warns)
		s, err := pm.solve(p, w, z)
		if err != nil {
			continue
		}
		if lo, err := pm.lowest(p, w, z); err == nil && lo.throughput < (1-ExternalPredictionTolerance)*s.throughput {
			warns = append(warns, fmt.Sprintf("c%d: the loops have two steady states: %.0f/s with the processors kept busy (φ %.2f), the one predicted, and %.0f/s with them halting between requests (φ %.2f: every request pays the %.1f µs wake-up, which keeps them idle enough to halt); the machine can settle in either",
				p.Clients, s.throughput, s.idle, lo.throughput, lo.idle, w))
		}
		speed := pm.speed(p)
		x := s.throughput * speed
		pt := ClosedLoopPoint{Clients: p.Clients, ThroughputMeasuredPerS: p.ThroughputPerS, LoopsPerS: math.Round(x), LimitedBy: "loops",
			ServerResidencePredictedUS: round3(s.serverUS / speed), ServerResidenceMeasuredUS: round3(p.ResidenceUS),
			ServerDemandUS: round3(s.serverD), ClientDemandUS: round3(s.clientD), IdleShare: round3(s.idle), ServerHoldUS: round3(s.hold),
			ServerWakeShare: round3(s.wake.server)}
		if p.Client != nil {
			pt.ClientWakeShare = round3(s.wake.client)
		}
		if s.lockUS > 0 {
			pt.LockstepShare, pt.LockstepUS = round3(p.lockShare), round3(s.lockUS)
		}
		pt.Binds, pt.Why = s.binds(p.Client == nil)
		pt.Why += lockstep(p, s)
		if speed < 1 {
			pt.Why += fmt.Sprintf("; the others left the point's processes %.2f of a processor, so the loops ran at that speed", speed)
		}
		// The processors' delay, calibrated where the processors were idle, is mostly the
		// wake-up of halted ones: at p it is paid in the share of wake-ups that find one
		// idle, φ(p)/φ(cal) of it.
		pp := procs
		if f := idleShare(cal, cal.ThroughputPerS); f > 0 && p != cal {
			pp.zUS *= math.Min(s.idle/f, 1)
		}
		if xp, d, m, ok := pp.solve(p); ok {
			pt.ProcessorsPerS, pt.CPUUSPerReq, pt.AvailableProcessors = math.Round(xp), round3(d), round3(m)
			if !pp.bound {
				pt.ProcessorDelayUS = round3(pp.zUS)
			}
			if xp < x {
				x, pt.LimitedBy, pt.Binds = xp, "processors", "processors"
				pt.Why = fmt.Sprintf("the processors: %.1f µs of the point's processes' processor time per request (server, client, recorder) on the %.2f processors the others left, busy %.0f%% of the window: at most %.0f/s",
					d, m, 100*p.CPU.BusyShare, m/d*1e6)
				if cl.ProcessorDemand != "fit" && p.CPU.BusyShare >= Saturated {
					warns = append(warns, fmt.Sprintf("c%d: the processors were busy %.0f%% of the window and D_cpu is the point's own: the prediction restates the utilisation law (processors available / D_cpu, both measured there), not a forecast",
						p.Clients, 100*p.CPU.BusyShare))
				}
			}
		}
		warns = pt.judge(p, x, warns)
		cl.Points = append(cl.Points, pt)
	}
	return warns
}
