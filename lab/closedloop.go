package lab

import (
	"errors"
	"fmt"
	"math"

	"github.com/perflab/perflab/loops"
	"github.com/perflab/perflab/models"
)

// ZDominates is the share of a request's cycle time spent outside the server's loop (the
// client's own work, its wake-ups, the kernel) above which the sweep warns that the server's
// model decides little of the client's throughput: one half.
const ZDominates = 0.5

// ClosedLoopModel names the model of ClosedLoop in reports and JSON.
const ClosedLoopModel = "mva: X(c) = min(a·c / (Z + R_client(c) + R_server(c)), X_processors(c): D_cpu on the processors available)"

// ClosedLoopPointModel names the model of ClosedLoop with LoopDemands "point".
const ClosedLoopPointModel = "mva: X(c) = min(loops: the server's and the client's loops with each point's own demands and w·φ per wake-up, processors: D_cpu on the processors available)"

// ClosedLoop predicts a closed-loop client's throughput at every client count by mean value
// analysis (models.MVA) of the loop the requests go round: each request passes the server's
// event loop, the client's own event loop when it has one (a single-threaded benchmark such as
// redis-benchmark serves all its connections on one loop), and Z, the rest of the round
// (kernel, wake-ups, and a threaded client's own time), a pure delay.
//
// Each loop is a batch loop whose time per cycle is T_fixed + T_per_req·N. The server's is
// its processor time (ServerFitSource "cpu"): each point's CPU time per request (the kernel's
// schedstat of the server's threads) times its requests per cycle, fitted over the points. A
// loop's time by the clock holds its waits for a processor, and on a machine with more
// runnable threads than processors a cycle that gathered more requests is mostly one whose
// thread was made to wait (the requests came while it was off the processor), so the clock
// time of cycles against their N measures the scheduler; without schedstat the fit is of the
// clock time from the wait call's return to the end of the cycle's last reply over the cycles
// grouped by N (ServerFitSource "path"). The client loop's is its mean busy time per cycle at
// each point against its replies per cycle. A request pays one cycle's T_fixed (a delay: the cycle pays it once for the
// whole batch) and T_per_req for itself and for each request ahead of it in the loop (a
// queueing station of demand T_per_req; a server with k loop threads is k such stations, each
// taking 1/k of the requests). Z is the only figure taken from the client's throughput: the
// delay that makes the model's throughput the measured one at the smallest client count
// (CalibratedAt), held for all the others; every other point is a prediction. Z may come out
// negative: a loop's busy time includes work after its reply that overlaps the rest of the
// round (memcached's worker reads again and rearms its socket while the client works), so the
// delay on the request's path is less than the client loop's fixed time; the model's whole
// delay (Z and the loops' T_fixed) is never negative.
//
// The loop threads of the server run side by side only as far as the processors allow: k loop
// threads on P processors are min(k, P) stations. At a point where the machine's other work left
// less than one processor, the loops' network runs at that share of its speed (loopSpeed). The
// processors themselves are the other network (processorNet): the prediction is the lower.
type ClosedLoop struct {
	Model        string `json:"model"`
	CalibratedAt int    `json:"calibrated_clients"`
	// ZUS is the delay per request outside both loops, µs; ZShare the share of a request's
	// cycle time at the calibration point spent outside the server (1 − the measured server
	// residence over the cycle: Z and the client's loop).
	ZUS    float64 `json:"z_us"`
	ZShare float64 `json:"z_share"`
	// ServerFit is the server's loop time per cycle against N, from ServerFitSource: "cpu"
	// (processor time per cycle over the points) or "path" (the cycles' clock time from the
	// wait call's return to the last reply out, grouped by N over every point); ServerLoops the
	// loop threads it is spread over (the most that served at one point), on Processors
	// processors.
	ServerFit       *loops.Fit `json:"server_busy_fit"`
	ServerFitSource string     `json:"server_fit_source"`
	ServerLoops     int        `json:"server_loops"`
	Processors      int        `json:"processors"`
	// ClientFit is the client loop's time per cycle (ClientFitSource) against its replies per
	// cycle over the points, when the client has one event loop (nil: its time is part of Z).
	// The JSON name predates its processor-time source.
	ClientFit *loops.Fit `json:"client_busy_fit,omitempty"`
	// ClientFitSource is what ClientFit is of: "cpu" (the client's processor time per cycle,
	// from its processes' time over the load window) or "busy" (its loop's time outside its
	// wait calls, by the clock).
	ClientFitSource string `json:"client_fit_source,omitempty"`
	// ProcessorFit is the processor time of the points' own processes (server, client,
	// perflab; WindowCPU.OwnUS) per server cycle against N over the points; it is the processor
	// station's demand (ProcessorDemand "fit": D_cpu at a point is T_fixed/N + T_per_req) when
	// N spreads over half a request or more and R² ≥ ProcessorFitR2, else each point's own
	// D_cpu is (ProcessorDemand "point"); nil when the points lack their processor times (no
	// processor station) or give no fit.
	ProcessorFit    *loops.Fit `json:"processor_fit,omitempty"`
	ProcessorDemand string     `json:"processor_demand,omitempty"` // "fit" or "point"
	// ProcessorZUS is the processor network's delay (the round's time off the processors),
	// calibrated at CalibratedAt as Z is.
	// ProcessorNetwork is "mva" (ProcessorZUS and the station) or "bound" (P/D_cpu alone, when
	// the calibration point's processor time per request is longer than its round: part of it
	// runs beside the requests' path, the recorder's reading of its ring buffer for one).
	ProcessorZUS     float64 `json:"processor_z_us,omitempty"`
	ProcessorNetwork string  `json:"processor_network,omitempty"`
	// LoopDemands is what the loops' network is built of: "point", each point's own measured
	// demands (pointModel: the server's processor time per request, the client loop's busy
	// time per reply or a threaded client's processor time, N, and a halted processor's
	// wake-up per blocking wait), or "fit", the lines ServerFit and ClientFit through the
	// points with the delay Z (a point lacks one of those measurements).
	LoopDemands string `json:"loop_demands"`
	// WakeUS is, with LoopDemands "point", the wake-up cost of a halted processor per blocking
	// wait of a loop (or per request of a threaded client), µs: the one figure calibrated, at
	// CalibratedAt; 0 when the processors were too busy there to tell it (WakeIdleMin), and Z
	// is then the calibrated delay.
	WakeUS float64           `json:"wake_us"`
	Points []ClosedLoopPoint `json:"points"`
}

// ClosedLoopPoint is the closed-loop model at one client count against the measurement.
type ClosedLoopPoint struct {
	Clients                 int     `json:"clients"`
	ThroughputPredictedPerS float64 `json:"throughput_predicted_per_s"`
	ThroughputMeasuredPerS  float64 `json:"throughput_measured_per_s"` // the client's own
	Error                   float64 `json:"error"`                     // predicted/measured − 1
	// ServerResidencePredictedUS is the model's time per request in the server's loop (its
	// T_fixed, its own T_per_req and the queue ahead of it), µs; ServerResidenceMeasuredUS the
	// trace's, from the server's first read of the request to its reply's last byte (the time
	// the request waited in the socket before that read is not in it).
	ServerResidencePredictedUS float64 `json:"server_residence_predicted_us"`
	ServerResidenceMeasuredUS  float64 `json:"server_residence_measured_us"`
	// OutsideMeasuredUS is the time per request outside the server at this point, as measured:
	// clients/throughput − the measured server residence, µs.
	OutsideMeasuredUS float64 `json:"outside_measured_us"`
	// LoopsPerS is the loops' network alone (Z, the server's and the client's loops);
	// ProcessorsPerS the processor network alone (its delay and a station of
	// AvailableProcessors servers with demand CPUUSPerReq, µs); the prediction is the lower,
	// and LimitedBy says which ("loops" or "processors").
	LoopsPerS           float64 `json:"loops_per_s"`
	ProcessorsPerS      float64 `json:"processors_per_s,omitempty"`
	CPUUSPerReq         float64 `json:"cpu_us_per_req,omitempty"`
	AvailableProcessors float64 `json:"available_processors,omitempty"`
	// ProcessorDelayUS is the processor network's delay at this point with LoopDemands
	// "point": the calibration point's, times φ here over φ there (µs).
	ProcessorDelayUS float64 `json:"processor_delay_us,omitempty"`
	LimitedBy        string  `json:"limited_by"`
	// With LoopDemands "point": ServerDemandUS is the server's demand per request at this point
	// (processor time and its share of a wake-up), ClientDemandUS the client loop's per reply
	// (busy time and its share of a wake-up) or a threaded client's delay per request, µs;
	// IdleShare the share of wake-ups that found a processor idle (φ, from the model's own
	// throughput); ServerWakeShare the share of requests that found the server's loop asleep
	// in its wait call, and so woke it, and ClientWakeShare the share of replies that woke the
	// client's loop (1 − its station's utilisation with one client fewer, solved with the
	// demands they set); ServerHoldUS the time a request's reply waits in its cycle for the requests
	// read after it, where the server holds a cycle's replies to its end (pointModel);
	// Binds what sets the prediction ("server loop", "client loop", "delay",
	// "processors") and Why, in words, with the figures.
	ServerDemandUS  float64 `json:"server_demand_us,omitempty"`
	ClientDemandUS  float64 `json:"client_demand_us,omitempty"`
	IdleShare       float64 `json:"idle_share,omitempty"`
	ServerWakeShare float64 `json:"server_wake_share,omitempty"`
	ClientWakeShare float64 `json:"client_wake_share,omitempty"`
	ServerHoldUS    float64 `json:"server_hold_us,omitempty"`
	// LockstepShare is the share of the requests that moved in lock-step at this point (every
	// client's request read in one of the server's cycles, which held the replies to its end,
	// and the client's loop taking them back together), and LockstepUS their time per request
	// in that state: the server's busy time per such cycle over the clients, the client's
	// processor time per request and two wake-ups over the clients, the loops never running
	// at once (pointModel). Neither is there when no request moved so.
	LockstepShare float64 `json:"lockstep_share,omitempty"`
	LockstepUS    float64 `json:"lockstep_us,omitempty"`
	Binds         string  `json:"binds,omitempty"`
	Why           string  `json:"why,omitempty"`
}

// closedLoopInput is what the closed-loop model needs of one sweep point.
type closedLoopInput struct {
	Clients        int
	ThroughputPerS float64         // the client's
	ServerByN      []loops.NCycles // the server's loop cycles by N, all its loop threads
	LoopThreads    int
	ResidenceUS    float64 // the server's measured residence per request (0: unknown)
	CPUUS          float64 // the server's processor time per request (0: unknown)
	RunDelayUS     float64 // the server's threads' run delay per request (schedstat; 0: unknown)
	N              float64 // requests per cycle of each server loop thread
	// RepliesAtEnd is the share of the server loops' cycles of two requests or more that held
	// their replies until their last request was read (loops.Thread.RepliesAtCycleEnd, over
	// all its loop threads); holdShare the wait of a reply for the rest of its cycle, as a
	// share of the server's demand per request (hold). Both set by setServerLoops.
	RepliesAtEnd float64
	holdShare    float64
	// lockShare is the share of the requests that moved in lock-step: read in a cycle that
	// took every client's request at once, of a server that held that cycle's replies to its
	// end, with a client that has an event loop of its own (it reads the replies in one cycle
	// and writes the next requests together); lockBusyUS the server's busy time per such
	// cycle, µs; holdShare is then of the other cycles. Set by setServerLoops.
	lockShare  float64
	lockBusyUS float64
	Client     *ClientLoop // nil when the client has no event loop of its own
	CPU        *WindowCPU  // the processors over the load window (nil: unknown)
}

// setServerLoops sets q's figures of the server's loop threads: their cycles by N, and the
// share of their cycles of two requests or more that held their replies to the cycle's end,
// with the hold it makes a request's reply wait.
func (q *closedLoopInput) setServerLoops(threads []loops.Thread) {
	var multi, atEnd float64
	for _, t := range threads {
		q.ServerByN = append(q.ServerByN, t.ByN...)
		multi += float64(t.MultiRequestCycles)
		atEnd += t.RepliesAtCycleEnd * float64(t.MultiRequestCycles)
	}
	if multi > 0 {
		q.RepliesAtEnd = atEnd / multi
	}
	spread := q.ServerByN
	if q.Clients > 1 && q.Client != nil && q.RepliesAtEnd >= HeldReplies {
		spread = q.lockStep()
	}
	q.holdShare = q.RepliesAtEnd * math.Max(requestN(spread)-1, 0) / 2
}

// HeldReplies is the least share of a server's cycles of two requests or more that held their
// replies to the cycle's end for its requests to be counted in lock-step where a cycle took
// every client's request: 0.5 (redis holds in all of them, memcached in none).
const HeldReplies = 0.5

// lockStep sets q's lock-step share and the server's busy time per lock-step cycle from its
// cycles by N, and returns the other cycles.
func (q *closedLoopInput) lockStep() []loops.NCycles {
	var spread []loops.NCycles
	var all, lock, lockCycles, lockBusy float64
	for _, g := range q.ServerByN {
		req := float64(g.N) * float64(g.Cycles)
		all += req
		if g.N >= q.Clients {
			lock += req
			lockCycles += float64(g.Cycles)
			lockBusy += g.BusyUS * float64(g.Cycles)
			continue
		}
		spread = append(spread, g)
	}
	if lock == 0 || lock == all {
		return q.ServerByN
	}
	q.lockShare, q.lockBusyUS = lock/all, lockBusy/lockCycles
	return spread
}

// errNoClosedLoop is returned when the points do not give the model what it needs.
var errNoClosedLoop = errors.New("closed-loop model needs a point with a throughput and the server's loop cycles with two distinct N")

// fitClosedLoop fits the closed-loop model to the points (ordered by clients) and predicts each
// point's throughput, with the warnings it deserves.
func fitClosedLoop(in []closedLoopInput, processors int, conf float64) (*ClosedLoop, []string, error) {
	k := 0
	var cal *closedLoopInput
	for i := range in {
		p := &in[i]
		k = max(k, p.LoopThreads)
		if p.ThroughputPerS > 0 && p.Clients > 0 && (cal == nil || p.Clients < cal.Clients) {
			cal = p
		}
	}
	if cal == nil || k == 0 {
		return nil, nil, errNoClosedLoop
	}
	sf, source, err := fitServerLoop(in, conf)
	if err != nil {
		return nil, nil, err
	}
	var warns []string
	for _, w := range sf.Check() {
		warns = append(warns, "server's loop "+source+" time: "+w)
	}
	cl := &ClosedLoop{Model: ClosedLoopModel, CalibratedAt: cal.Clients, ServerFit: sf, ServerFitSource: source, ServerLoops: k, Processors: processors}
	side := k
	if processors > 0 {
		side = min(k, processors)
	}
	stations := loopStations{serverFixed: math.Max(sf.TFixedUS, 0), serverPerReq: math.Max(sf.TPerReqUS, 0), serverLoops: side}
	cli, source := clientLoopPoints(in)
	if cf, _, err := loops.FitPoints(cli, conf); err == nil && cf.TPerReqUS > 0 {
		cl.ClientFit, cl.ClientFitSource = cf, source
		stations.client = true
		stations.clientFixed, stations.clientPerReq = math.Max(cf.TFixedUS, 0), cf.TPerReqUS
	} else if len(cli) > 0 {
		warns = append(warns, "the client's event loop gives no usable fit of its busy time against its replies per cycle: its time is counted in Z")
	}
	procs := cl.processors(in, cal, conf)
	if pointReady(in) {
		own := processors > 0 && k+1 <= processors
		warns = append(warns, cl.predictPoints(pointModel{side: side, own: own}, procs, in, cal)...)
		return cl, warns, nil
	}
	cl.LoopDemands = "fit"
	warns = append(warns, "the loops' network is built of lines through the points (a point lacks the server's processor time, its processors' time or the client's): the loops' delay Z, calibrated at the smallest client count, holds the wake-ups of halted processors there, which fewer points pay")
	warns = append(warns, cl.calibrate(stations, cal)...)
	warns = append(warns, cl.predict(stations, procs, in)...)
	return cl, warns, nil
}

// loopSpeed is the speed the processors left the loops at p: min(1, the processors
// available), 1 where unknown. A thread that finds a processor free only a share a < 1 of the
// time (the machine's other work took the rest) runs its work in 1/a of its time, and so does
// every part of the round that runs on a processor; scaling every time of a closed network by
// 1/a scales its throughput by a, so the loops' network at p is its full-speed throughput × a.
func loopSpeed(p *closedLoopInput) float64 {
	if p.CPU == nil || p.CPU.AvailableProcessors <= 0 {
		return 1
	}
	return math.Min(1, p.CPU.AvailableProcessors)
}

// ProcessorFitR2 is the least R² of the processor time per server cycle against N for the
// fit to be the processor station's demand; below it, or with N spread over less than half a
// request, each point's own D_cpu is: 0.8, the points' D_cpu then vary around the line by less
// than the 20% the predictions are judged by.
const ProcessorFitR2 = 0.8

// clientLoopPoints returns the client loop's time per cycle against its replies per cycle at
// every point with a client loop: its processor time ("cpu": the client's processes' time per
// request over the load window × replies per cycle) when every such point has it, else its
// busy time by the clock ("busy": the time outside its wait calls, which holds its waits for
// a processor, long on a machine whose other work takes the processors).
func clientLoopPoints(in []closedLoopInput) ([]loops.Point, string) {
	var busy, cpu []loops.Point
	allCPU := true
	for _, p := range in {
		if p.Client == nil || p.Client.Cycles <= 0 {
			continue
		}
		busy = append(busy, loops.Point{N: p.Client.RepliesPerCycle, TUS: p.Client.BusyUS, Weight: 1})
		if p.CPU != nil && p.CPU.ClientUS > 0 {
			cpu = append(cpu, loops.Point{N: p.Client.RepliesPerCycle, TUS: p.CPU.ClientUS * p.Client.RepliesPerCycle, Weight: 1})
		} else {
			allCPU = false
		}
	}
	if allCPU && len(cpu) > 0 {
		return cpu, "cpu"
	}
	return busy, "busy"
}

// processorNet is the machine's processors as the closed loop's other network: a request's
// processor time D_cpu (all of the point's own processes') served by the processors its
// processes had (WindowCPU.AvailableProcessors), with the rest of its round a delay.
type processorNet struct {
	fit   *loops.Fit // D_cpu·N against N (nil: each point's own D_cpu)
	zUS   float64    // the delay off the processors, µs
	bound bool       // no delay known: the bound P/D_cpu alone
	on    bool       // the points have their processor times
}

// processors fits the processor station's demand over the points and calibrates its delay at
// cal, into cl.
func (cl *ClosedLoop) processors(in []closedLoopInput, cal *closedLoopInput, conf float64) processorNet {
	var pts []loops.Point
	for _, p := range in {
		if p.CPU != nil && p.CPU.OwnUS > 0 && p.N > 0 {
			pts = append(pts, loops.Point{N: p.N, TUS: p.CPU.OwnUS * p.N, Weight: 1})
		}
	}
	if len(pts) == 0 {
		return processorNet{}
	}
	n := processorNet{on: true}
	cl.ProcessorDemand = "point"
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, q := range pts {
		lo, hi = math.Min(lo, q.N), math.Max(hi, q.N)
	}
	if f, _, err := loops.FitPoints(pts, conf); err == nil {
		cl.ProcessorFit = f
		// The fit is the demand only where the points agree on it: N spread enough to tell
		// T_fixed from T_per_req, a line through them, and every point's own D_cpu within
		// ExternalPredictionTolerance of the line's (points of one N, memcached's workers at 1-4
		// clients, can differ by 40% with the line through their mean).
		if hi-lo >= 0.5 && f.R2 >= ProcessorFitR2 && onLine(in, f) {
			n.fit, cl.ProcessorDemand = f, "fit"
		}
	}
	d, m := n.demand(cal), 0.0
	if cal.CPU != nil {
		m = cal.CPU.AvailableProcessors
	}
	cycle := float64(cal.Clients) / cal.ThroughputPerS * 1e6
	n.bound = true
	cl.ProcessorNetwork = "bound"
	if d > 0 && m > 0 {
		// The cycle at the calibration point with no delay: its clients' demands on m servers.
		r, err := models.MVA(models.ClosedLoop{Clients: cal.Clients, DemandsUS: []float64{d}, Servers: []float64{m}})
		if err == nil && r.ThroughputPerS > 0 {
			if z := cycle - float64(cal.Clients)/r.ThroughputPerS*1e6; z >= 0 {
				n.zUS, n.bound = z, false
				cl.ProcessorZUS, cl.ProcessorNetwork = round3(z), "mva"
			}
		}
	}
	return n
}

// onLine reports whether every point's own processor time per request is within
// ExternalPredictionTolerance of the fit's, T_fixed/N + T_per_req.
func onLine(in []closedLoopInput, f *loops.Fit) bool {
	for _, p := range in {
		if p.CPU == nil || p.CPU.OwnUS <= 0 || p.N <= 0 {
			continue
		}
		if d := f.TFixedUS/p.N + f.TPerReqUS; d <= 0 || math.Abs(p.CPU.OwnUS/d-1) > ExternalPredictionTolerance {
			return false
		}
	}
	return true
}

// demand is the processor time per request at p, µs (0: unknown).
func (n processorNet) demand(p *closedLoopInput) float64 {
	if n.fit != nil && p.N > 0 {
		if d := n.fit.TFixedUS/p.N + n.fit.TPerReqUS; d > 0 {
			return d
		}
	}
	if p.CPU != nil {
		return p.CPU.OwnUS
	}
	return 0
}

// solve is the processor network's throughput at p (requests/s), the demand and the servers
// it used; ok is false where p's processors are unknown.
func (n processorNet) solve(p *closedLoopInput) (x, d, m float64, ok bool) {
	if !n.on || p.CPU == nil {
		return 0, 0, 0, false
	}
	d, m = n.demand(p), p.CPU.AvailableProcessors
	if d <= 0 || m <= 0 {
		return 0, 0, 0, false
	}
	if n.bound {
		return m / d * 1e6, d, m, true
	}
	r, err := models.MVA(models.ClosedLoop{Clients: p.Clients, DelayUS: n.zUS, DemandsUS: []float64{d}, Servers: []float64{m}})
	if err != nil {
		return 0, 0, 0, false
	}
	return r.ThroughputPerS, d, m, true
}

// fitServerLoop fits the server's loop time per cycle against N: its processor time when every
// point with a loop has it ("cpu"), else the clock time of its cycles up to their last reply
// ("path").
func fitServerLoop(in []closedLoopInput, conf float64) (*loops.Fit, string, error) {
	var path, cpu []loops.Point
	allCPU := true
	for _, p := range in {
		for _, g := range p.ServerByN {
			if g.N > 0 && g.Cycles > 0 {
				t := g.PathUS
				if t <= 0 {
					t = g.BusyUS
				}
				path = append(path, loops.Point{N: float64(g.N), TUS: t, Weight: float64(g.Cycles)})
			}
		}
		if p.LoopThreads > 0 {
			if p.CPUUS > 0 && p.N > 0 {
				cpu = append(cpu, loops.Point{N: p.N, TUS: p.CPUUS * p.N, Weight: 1})
			} else {
				allCPU = false
			}
		}
	}
	if allCPU {
		if f, _, err := loops.FitPoints(cpu, conf); err == nil {
			return f, "cpu", nil
		}
	}
	f, _, err := loops.FitPoints(path, conf)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", errNoClosedLoop, err)
	}
	return f, "path", nil
}

// calibrate sets cl's Z from the calibration point cal and its share of the request's time
// outside the server, and returns the warnings they deserve.
func (cl *ClosedLoop) calibrate(stations loopStations, cal *closedLoopInput) []string {
	var warns []string
	cycle := float64(cal.Clients) / cal.ThroughputPerS * 1e6 // µs per request per client
	// The loops' network runs at the speed the processors left it (loopSpeed): its delay is
	// calibrated at full speed.
	z, ok := stations.calibrate(cal.Clients, cycle*loopSpeed(cal))
	if !ok {
		warns = append(warns, fmt.Sprintf("c%d: the loops' per-request times alone take longer than the measured %.1f µs per request: the model's delay set to 0", cal.Clients, cycle))
	}
	cl.ZUS = round3(z)
	// The share outside the server: the measured residence when the trace has it (the loop's
	// busy time also counts its work after the reply), else the model's.
	if res := cal.ResidenceUS; res > 0 {
		cl.ZShare = math.Round(math.Max(1-res/cycle, 0)*1e4) / 1e4
	} else if r, err := stations.solve(cal.Clients, z); err == nil {
		cl.ZShare = math.Round(math.Max(1-r.serverUS/cycle, 0)*1e4) / 1e4
	}
	if cl.ZShare > ZDominates {
		warns = append(warns, fmt.Sprintf("c%d: %.0f%% of each request's %.1f µs passes outside the server's loop (the client's own work and wake-ups, the kernel): the server's model decides little of the client's throughput",
			cal.Clients, 100*cl.ZShare, cycle))
	}
	return warns
}

// ThroughputFall is how far a point's throughput may fall below that of fewer clients before
// the sweep warns that something besides the clients changed between them: 10%. A closed loop
// whose stations keep their times never loses throughput as clients are added (mean value
// analysis: X(n) does not decrease with n), so a fall is the machine's other work, or a server
// that slows with more connections, and no model of the loops predicts it.
const ThroughputFall = 0.10

// throughputPeak is the highest throughput of a sweep's points so far, and at how many clients.
type throughputPeak struct {
	perS    float64
	clients int
}

// see takes point p, the next of a sweep in the order of clients, and returns warns with a
// warning added when p's throughput fell by more than ThroughputFall from the peak of the points
// of fewer clients before it.
func (k *throughputPeak) see(p *closedLoopInput, warns []string) []string {
	if k.perS > 0 && p.Clients > k.clients && p.ThroughputPerS < (1-ThroughputFall)*k.perS {
		warns = append(warns, fmt.Sprintf("c%d: the throughput fell to %.0f/s from %.0f/s at c%d (%+.0f%%): a closed loop's throughput does not fall as clients are added unless something else changed (the machine's other work: the run queue column), which the model cannot predict",
			p.Clients, p.ThroughputPerS, k.perS, k.clients, 100*(p.ThroughputPerS/k.perS-1)))
	}
	if p.ThroughputPerS > k.perS {
		k.perS, k.clients = p.ThroughputPerS, p.Clients
	}
	return warns
}

// predict adds the model's prediction at every point to cl, with a warning at each point but
// the calibration one that it misses by more than ExternalPredictionTolerance, and at each point
// whose throughput fell by more than ThroughputFall from a point of fewer clients.
func (cl *ClosedLoop) predict(stations loopStations, procs processorNet, in []closedLoopInput) []string {
	var warns []string
	var peak throughputPeak
	for i := range in {
		p := &in[i]
		warns = peak.see(p, warns)
		r, err := stations.solve(p.Clients, cl.ZUS)
		if err != nil {
			continue
		}
		speed := loopSpeed(p)
		r.throughput *= speed
		r.serverUS /= speed
		x := r.throughput
		pt := ClosedLoopPoint{Clients: p.Clients, ThroughputMeasuredPerS: p.ThroughputPerS, LoopsPerS: math.Round(r.throughput), LimitedBy: "loops",
			ServerResidencePredictedUS: round3(r.serverUS), ServerResidenceMeasuredUS: round3(p.ResidenceUS)}
		if xp, d, m, ok := procs.solve(p); ok {
			pt.ProcessorsPerS, pt.CPUUSPerReq, pt.AvailableProcessors = math.Round(xp), round3(d), round3(m)
			if xp < x {
				x, pt.LimitedBy = xp, "processors"
			}
		}
		// Every point is judged, the calibration one too: the loops give it its measured
		// throughput, the processors may not.
		warns = pt.judge(p, x, warns)
		cl.Points = append(cl.Points, pt)
	}
	return warns
}

// judge sets pt's prediction to x requests/s and, where p has a measured throughput, its
// error and the time outside the server; it returns warns with a warning added when the error
// is beyond ExternalPredictionTolerance.
func (pt *ClosedLoopPoint) judge(p *closedLoopInput, x float64, warns []string) []string {
	pt.ThroughputPredictedPerS = math.Round(x)
	if p.ThroughputPerS <= 0 {
		return warns
	}
	pt.Error = math.Round((x/p.ThroughputPerS-1)*1e4) / 1e4
	if p.ResidenceUS > 0 {
		pt.OutsideMeasuredUS = round3(float64(p.Clients)/p.ThroughputPerS*1e6 - p.ResidenceUS)
	}
	if math.Abs(pt.Error) > ExternalPredictionTolerance {
		warns = append(warns, fmt.Sprintf("c%d: the closed-loop model predicts %.0f/s (limited by the %s), the client measured %.0f/s (%+.0f%%)",
			p.Clients, x, pt.LimitedBy, p.ThroughputPerS, 100*pt.Error))
	}
	return warns
}

// loopStations are the closed loop's loops as MVA stations, µs.
type loopStations struct {
	serverFixed, serverPerReq float64
	serverLoops               int
	client                    bool
	clientFixed, clientPerReq float64
}

// mvaResult is the model at one client count: its throughput (requests/s) and the time per
// request in the server's loop (µs).
type mvaResult struct {
	throughput, serverUS float64
}

// solve runs the MVA with clients clients and Z (µs) outside the loops: the loops' T_fixed and
// Z make the delay of the round (never below 0).
func (s loopStations) solve(clients int, z float64) (mvaResult, error) {
	delay := s.serverFixed + z
	if s.client {
		delay += s.clientFixed
	}
	c := models.ClosedLoop{Clients: clients, DelayUS: math.Max(delay, 0)}
	for range s.serverLoops {
		c.DemandsUS = append(c.DemandsUS, s.serverPerReq/float64(s.serverLoops))
	}
	if s.client {
		c.DemandsUS = append(c.DemandsUS, s.clientPerReq)
	}
	r, err := models.MVA(c)
	if err != nil || r.ThroughputPerS <= 0 {
		return mvaResult{}, fmt.Errorf("closed-loop model at %d clients: %w", clients, errors.Join(err, errors.New("no throughput")))
	}
	srv := s.serverFixed
	for i := range s.serverLoops {
		srv += r.QueueLen[i] / r.ThroughputPerS * 1e6 // Little's law at the station: R_i = Q_i/X
	}
	return mvaResult{throughput: r.ThroughputPerS, serverUS: srv}, nil
}

// calibrate returns the Z (µs) that gives clients clients a cycle of cycleUS per request each
// (the measured throughput): the model's throughput falls as Z grows, so a bisection finds it,
// from the Z that leaves no delay at all up to cycleUS. ok is false when even no delay is too
// slow (Z is then that least one).
func (s loopStations) calibrate(clients int, cycleUS float64) (z float64, ok bool) {
	want := float64(clients) / cycleUS * 1e6
	lo := -s.serverFixed
	if s.client {
		lo -= s.clientFixed
	}
	r, err := s.solve(clients, lo)
	if err != nil || r.throughput < want {
		return lo, false
	}
	hi := cycleUS
	for range 100 {
		mid := (lo + hi) / 2
		r, err := s.solve(clients, mid)
		if err != nil {
			return lo, false
		}
		if r.throughput > want {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2, true
}
