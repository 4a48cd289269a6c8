package lab

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/perflab/perflab/reports"
)

// RenderExternal writes an external sweep's tables in format "table" or "markdown".
func RenderExternal(w io.Writer, res *ExternalResult, format string) error {
	return reports.Sections(w, ExternalSections(res), res.Warnings, format)
}

// ExternalSections lays an external sweep out as report sections: RTT scaling with the
// server's loop at each point, Little's law at each point, the batch model of the server's
// cycles and its predictions, and the RTT populations at the largest client count.
func ExternalSections(res *ExternalResult) []reports.Section {
	out := []reports.Section{externalScaling(res), externalLittle(res)}
	if res.BatchFit != nil {
		out = append(out, externalBatch(res))
	}
	if res.ClosedLoop != nil {
		out = append(out, externalClosedLoop(res))
	}
	if len(res.Histogram) > 0 {
		out = append(out, externalHistogram(res))
	}
	return out
}

// externalScaling is the RTT scaling table: per client count the client's throughput and RTTs,
// and the server's loop cycles.
func externalScaling(res *ExternalResult) reports.Section {
	sc := reports.Section{Title: fmt.Sprintf("RTT scaling (%s, driven by the client's own closed loop)", res.Server), Align: "r",
		Header: []string{"clients", "throughput /s", "RTT p50 µs", "RTT mean µs", "RTT p99 µs", "trace RTT mean µs", "requests", "loop threads", "req/cycle", "cycle µs", "busy µs", "busy"}}
	for _, p := range res.Points {
		sc.Rows = append(sc.Rows, []string{reports.Count(p.Clients), reports.Count(p.ThroughputPerS), dash(p.RTTUS.P50), reports.Num(p.RTTUS.Mean), dash(p.RTTUS.P99),
			dash(p.TraceRTTMeanUS), reports.Count(p.Requests), reports.Count(p.LoopThreads), dash(p.RequestsPerCycle), dash(p.CycleUS), dash(p.BusyUS),
			reports.Share(p.Utilization)})
	}
	sc.Notes = append(sc.Notes, "throughput and RTT: the client's own summary; trace RTT: its round trips in the trace; requests: received by the server's loop threads in complete cycles",
		"req/cycle, cycle: the server's loop cycles while it served (N per loop thread, whole cycle from one wait call to the next); busy µs: the part after the wait of the cycles that received requests; busy: share of the loop threads' time outside their wait calls")
	if res.Saturation > 0 {
		sc.Notes = append(sc.Notes, fmt.Sprintf("saturated from %s: within %s of the highest throughput; more clients add RTT, not throughput", plural(res.Saturation, "client"), reports.Share(saturationGain)))
	}
	if len(res.Points) > 0 {
		last := res.Points[len(res.Points)-1]
		if len(last.Commands) > 0 {
			var parts []string
			for _, n := range slices.Sorted(maps.Keys(last.Commands)) {
				parts = append(parts, n+" "+reports.Count(last.Commands[n]))
			}
			sc.Notes = append(sc.Notes, fmt.Sprintf("requests the server received at %s clients, by command: %s", reports.Count(last.Clients), strings.Join(parts, ", ")))
		}
	}
	return sc
}

// externalLittle checks Little's law at every point: L and W from the trace over the load
// window, λ the client's; and, apart, the steady window and the client's own latency.
func externalLittle(res *ExternalResult) reports.Section {
	ll := reports.Section{Title: "Little's law L = λ·W at every point (L and W: the trace over the load window; λ: the client's own throughput)", Align: "l" + strings.Repeat("r", 12),
		Header: []string{"point", "window s", "setup round trips", "L in flight", "λ /s", "L/λ µs", "W µs", "error", "steady window s", "steady L", "steady λ /s", "steady W µs", "client W µs"}}
	worst := 0.0
	for i, r := range res.LittlesLaw {
		row := []string{r.Label, "–", "–", reports.Num(r.InFlight), reports.Count(r.ThroughputPerS), reports.Num(r.RTTPredictedUS), reports.Num(r.RTTMeasuredUS), reports.Change(r.Error), "–", "–", "–", "–", "–"}
		if i < len(res.Points) {
			p := res.Points[i]
			row[1], row[2], row[12] = reports.Num(p.LoadWindow.Seconds), reports.Count(p.SetupRoundTrips), reports.Num(p.RTTUS.Mean)
			if sw := p.SteadyWindow; sw != nil {
				row[8], row[9], row[10], row[11] = reports.Num(sw.Seconds), reports.Num(sw.InflightMean), reports.Count(sw.ThroughputPerS), reports.Num(sw.RTTMeanUS)
			}
		}
		ll.Rows = append(ll.Rows, row)
		worst = math.Max(worst, math.Abs(r.Error))
	}
	if len(res.LittlesLaw) > 0 {
		verdict := "holds"
		if worst > ExternalLittleTolerance {
			verdict = "does NOT hold"
		}
		ll.Notes = append(ll.Notes, fmt.Sprintf("largest error %s: Little's law %s within %s at every point", reports.Share(worst), verdict, reports.Share(ExternalLittleTolerance)),
			"load window: from the first request of the closed loop's connections (the clients connections with the most round trips) to their last reply, the window a benchmark times itself over; setup round trips: the client's others (redis-benchmark's CONFIG GETs), left out",
			"with L and W from one window L/W is the trace's throughput there: the error says whether the trace's round trips over that window are the client's own throughput",
			"steady window: where every connection of the load was in flight (L: their time inside it over its length; λ, W: the round trips that ended in it)",
			"client W: the client's own mean latency, which also holds its time between its clock reads and its system calls")
	}
	return ll
}

// externalBatch is the batch model of the server's loop cycles: the fit, and its throughput
// predictions against the measured ones.
func externalBatch(res *ExternalResult) reports.Section {
	f := res.BatchFit
	bm := reports.Section{Title: "Batch model of the server's loop T_cycle = T_fixed + T_per_req·N", Align: "r",
		Header: []string{"clients", "N (all loops)", "T_cycle measured µs", "T_cycle predicted µs", "throughput predicted /s", "throughput measured /s", "error"}}
	for _, pr := range res.Predictions {
		var meas float64
		for _, p := range res.Points {
			if p.Clients == pr.Clients {
				meas = p.CycleUS
			}
		}
		e := 0.0
		if pr.ThroughputMeasuredPerS > 0 {
			e = pr.ThroughputPredictedPerS/pr.ThroughputMeasuredPerS - 1
		}
		bm.Rows = append(bm.Rows, []string{reports.Count(pr.Clients), reports.Num(pr.InFlight), reports.Num(meas), reports.Num(pr.CyclePredictedUS),
			reports.Count(pr.ThroughputPredictedPerS), reports.Count(pr.ThroughputMeasuredPerS), reports.Change(e)})
	}
	bm.Notes = append(bm.Notes,
		fmt.Sprintf("T_fixed = %s µs (%s CI %s), T_per_req = %s µs (%s CI %s), R² = %s, %s points",
			reports.Num(f.TFixedUS), reports.Share(f.CILevel), reports.Interval(f.TFixedCI[0], f.TFixedCI[1]),
			reports.Num(f.TPerReqUS), reports.Share(f.CILevel), reports.Interval(f.TPerReqCI[0], f.TPerReqCI[1]), reports.Num(f.R2), reports.Count(f.Points)),
		"N: requests per cycle of all the server's loop threads together (loop threads × their mean N); predicted throughput N / T_cycle(N)")
	if f.ThroughputMaxPerS > 0 {
		bm.Notes = append(bm.Notes, fmt.Sprintf("throughput limit 1/T_per_req = %s /s", reports.Count(f.ThroughputMaxPerS)))
	}
	for _, r := range res.Ranges {
		bm.Notes = append(bm.Notes, fmt.Sprintf("N %s-%s: %s points, effective T_per_req %s µs", reports.Count(r.NFrom), reports.Count(r.NTo), reports.Count(r.Cycles), reports.Num(r.TPerReqUS)))
	}
	return bm
}

// externalHistogram is the RTT histogram at the largest client count, with its populations.
func externalHistogram(res *ExternalResult) reports.Section {
	return rttHistogram(fmt.Sprintf("RTT histogram at %d clients (the client's round trips in the trace)", res.HistogramClients), res.Histogram, res.Modes)
}

// externalClosedLoop is the closed-loop model's prediction of the client's throughput at every
// point, with the measured time per request in and outside the server.
func externalClosedLoop(res *ExternalResult) reports.Section {
	cl := res.ClosedLoop
	title := "Closed-loop prediction X(c) = min(loops: c / (Z + R_client(c) + R_server(c)), processors: D_cpu on P) (mean value analysis)"
	if cl.LoopDemands == "point" {
		title = "Closed-loop prediction X(c) = min(loops: each point's own demands and w·φ per wake-up, processors: D_cpu on P) (mean value analysis)"
	}
	sec := reports.Section{Title: title, Align: "r",
		Header: []string{"clients", "throughput predicted /s", "throughput measured /s", "error", "loops /s", "processors /s", "limited by", "binds", "D_cpu µs/req", "processors available",
			"server residence predicted µs", "server residence measured µs", "outside the server measured µs", "server CPU µs/req", "server run queue µs/req", "client run queue µs/req"}}
	for _, p := range cl.Points {
		e := reports.Change(p.Error)
		if p.Clients == cl.CalibratedAt {
			e = "calibration"
			if math.Abs(p.Error) > 1e-3 { // Z could not reach the measurement, or the processors limit it (a warning says)
				e = "calibration " + reports.Change(p.Error)
			}
		}
		if math.Abs(p.Error) > ExternalPredictionTolerance {
			e += " (!)"
		}
		var cpu, rq, crq float64
		for _, q := range res.Points {
			if q.Clients == p.Clients {
				cpu, rq = q.ServerCPUUS, q.ServerRunDelayUS
				if q.CPU != nil {
					crq = q.CPU.ClientRunDelayUS
				}
			}
		}
		sec.Rows = append(sec.Rows, []string{reports.Count(p.Clients), reports.Count(p.ThroughputPredictedPerS), reports.Count(p.ThroughputMeasuredPerS), e,
			reports.Count(p.LoopsPerS), dashCount(p.ProcessorsPerS), p.LimitedBy, dashText(p.Binds), dash(p.CPUUSPerReq), dash(p.AvailableProcessors),
			reports.Num(p.ServerResidencePredictedUS), dash(p.ServerResidenceMeasuredUS), dash(p.OutsideMeasuredUS), dash(cpu), dash(rq), dash(crq)})
	}
	if cl.LoopDemands == "point" {
		sec.Notes = append(sec.Notes, pointNotes(cl)...)
		sec.Notes = append(sec.Notes, processorNote(cl))
		return sec
	}
	sf := cl.ServerFit
	sec.Notes = append(sec.Notes,
		fmt.Sprintf("server's loop per cycle (%s): T_fixed %s µs + T_per_req %s µs·N (R² %s), %s on %s: each request pays T_fixed once and queues for T_per_req behind the requests ahead of it",
			serverFitSource[cl.ServerFitSource], reports.Num(sf.TFixedUS), reports.Num(sf.TPerReqUS), reports.Num(sf.R2), plural(cl.ServerLoops, "loop thread"), plural(cl.Processors, "processor")))
	if cf := cl.ClientFit; cf != nil {
		of := "busy time (outside its wait calls, by the clock)"
		if cl.ClientFitSource == "cpu" {
			of = "processor time (its processes' over the load window)"
		}
		sec.Notes = append(sec.Notes, fmt.Sprintf("client's own loop %s per cycle: T_fixed %s µs + T_per_req %s µs per reply (R² %s), a station of its own",
			of, reports.Num(cf.TFixedUS), reports.Num(cf.TPerReqUS), reports.Num(cf.R2)))
	} else {
		sec.Notes = append(sec.Notes, "the client has no event loop of its own in the trace: its time is part of Z")
	}
	sec.Notes = append(sec.Notes,
		fmt.Sprintf("Z = %s µs per request outside both loops (the kernel, wake-ups), the one figure taken from the client's throughput: at %s, the calibration point; every other row is a prediction",
			reports.Num(cl.ZUS), plural(cl.CalibratedAt, "client")),
		fmt.Sprintf("%s of a request's time at the calibration point passes outside the server (1 − measured server residence / cycle)", reports.Share(cl.ZShare)),
		"server residence measured: the server's first read of the request to its reply's last byte; outside the server: clients / throughput − that",
		processorNote(cl),
		"server CPU, run queue: per request of the load, the time the server's threads ran on a processor and waited runnable for one while the point ran (the kernel's schedstat); client run queue: the client's threads' wait over the load window; a run queue wait the model does not see")
	return sec
}

// processorNote says in words what the processor network of cl is.
func processorNote(cl *ClosedLoop) string {
	var demand string
	switch {
	case cl.ProcessorNetwork == "":
		return "no processor station: the points have no processor times over their load windows (/proc unreadable)"
	case cl.ProcessorDemand == "fit":
		demand = fmt.Sprintf("D_cpu = %s µs/N + %s µs per request (R² %s), the own processes' processor time (server, client, perflab) per server cycle against N over the points",
			reports.Num(cl.ProcessorFit.TFixedUS), reports.Num(cl.ProcessorFit.TPerReqUS), reports.Num(cl.ProcessorFit.R2))
	default:
		demand = "D_cpu each point's own processor time per request (server, client, perflab): the points do not agree on a line against N"
		if f := cl.ProcessorFit; f != nil {
			demand += fmt.Sprintf(" (R² %s)", reports.Num(f.R2))
		}
	}
	net := fmt.Sprintf("with %s µs per request off the processors (calibrated at the calibration point)", reports.Num(cl.ProcessorZUS))
	if cl.LoopDemands == "point" {
		net = fmt.Sprintf("with %s µs per request off the processors at the calibration point, mostly the wake-ups of halted processors, paid at each point in the share of its wake-ups that find one idle (φ there over φ at the calibration point)", reports.Num(cl.ProcessorZUS))
	}
	if cl.ProcessorNetwork == "bound" {
		net = "as the bound P/D_cpu alone (at the calibration point D_cpu is longer than the round: part of it runs beside the requests' path)"
	}
	return fmt.Sprintf("processors: a station of the processors the point's processes had (/proc/stat over its load window, the others' time taken off), %s, %s; the prediction is the lower of the two networks, and a point off by more than %s is marked (!) and warned",
		demand, net, reports.Share(ExternalPredictionTolerance))
}

// pointNotes says what the loops' network of each point's own demands is, and what binds each
// point and why.
func pointNotes(cl *ClosedLoop) []string {
	var notes []string
	cal := fmt.Sprintf("w = %s µs, the wake-up of a halted processor per blocking wait of a loop (per request of a threaded client), the one figure taken from the client's throughput: at %s, the calibration point; every other row is a prediction",
		reports.Num(cl.WakeUS), plural(cl.CalibratedAt, "client"))
	switch {
	case cl.ZUS < 0:
		cal = fmt.Sprintf("%s µs of the client's time per request runs beside the server's (the demands alone were longer than the round at %s, the calibration point): taken off the client's demand at every point; no wake-up cost could be told", reports.Num(-cl.ZUS), plural(cl.CalibratedAt, "client"))
	case cl.ZUS > 0:
		cal = fmt.Sprintf("Z = %s µs per request, a constant delay calibrated at %s: the processors were too busy with other work there to tell a halted processor's wake-up", reports.Num(cl.ZUS), plural(cl.CalibratedAt, "client"))
	}
	notes = append(notes,
		"loops: each point's own measured demands, per request: the server's loop its processor time (schedstat; with its run-queue wait when every loop thread can have a processor of its own and the others left the processors) and a wake-up w·φ for each request that finds it asleep in its wait call; the client's own loop its busy time per reply by the clock (outside its wait calls: its processor time and its waits for the processor it shares with the server's loop) and w·φ for each reply that finds it asleep; a threaded client its processor time and w·φ as a delay; a loop found asleep by 1 − U(c − 1) of the arrivals (its station's utilisation with one client fewer, solved with the demands); where the server holds a cycle's replies to its end (loops' replies_at_cycle_end), a reply's wait for the requests read after it, (N_r − 1)/2 of the server's demand (N_r = ΣN²/ΣN), as a delay; where its client's loop takes the held replies together as well, the share of requests read in cycles that took every client's at once moves in lock-step (the loops never working at once: the server's busy time per such cycle over the clients, the client's processor time, two wake-ups over the clients), mixed in time with the network of the other cycles; where the others took more than half a processor, processor times alone, at the speed the others left; φ the share of wake-ups that find a processor idle, from the model's own throughput, the others' processor time and the point's D_cpu, solved with it (where two solutions exist, the one with the processors busy)",
		cal,
		fmt.Sprintf("%s of a request's time at the calibration point passes outside the server (1 − measured server residence / cycle)", reports.Share(cl.ZShare)),
		"server residence measured: the server's first read of the request to its reply's last byte; outside the server: clients / throughput − that")
	notes = append(notes, "server CPU, run queue: per request of the load, the time the server's threads ran on a processor and waited runnable for one while the point ran (the kernel's schedstat); client run queue: the client's threads' wait over the load window (schedstat)")
	for _, p := range cl.Points {
		if p.Why != "" {
			notes = append(notes, fmt.Sprintf("c%d, %s: %s", p.Clients, p.Binds, p.Why))
		}
	}
	return notes
}

// dashText is s, or "-" when empty.
func dashText(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// dashCount is reports.Count, or "-" for 0.
func dashCount(v float64) string {
	if v == 0 {
		return "-"
	}
	return reports.Count(v)
}

// serverFitSource says in words what the closed-loop model's server fit is of.
var serverFitSource = map[string]string{
	"cpu":  "its processor time: CPU per request × requests per cycle at each point, the kernel's schedstat",
	"path": "its clock time from the wait call's return to its last reply out, cycles grouped by N",
}
