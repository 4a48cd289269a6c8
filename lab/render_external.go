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

// externalLittle checks Little's law at every point, L from the trace, λ and W from the client.
func externalLittle(res *ExternalResult) reports.Section {
	ll := reports.Section{Title: "Little's law L = λ·W at every point (L from the trace, λ and W from the client)",
		Header: []string{"point", "L in flight", "λ /s", "L/λ µs", "W measured µs", "error"}}
	worst := 0.0
	for _, r := range res.LittlesLaw {
		ll.Rows = append(ll.Rows, []string{r.Label, reports.Num(r.InFlight), reports.Count(r.ThroughputPerS), reports.Num(r.RTTPredictedUS), reports.Num(r.RTTMeasuredUS), reports.Change(r.Error)})
		worst = math.Max(worst, math.Abs(r.Error))
	}
	if len(res.LittlesLaw) > 0 {
		verdict := "holds"
		if worst > ExternalLittleTolerance {
			verdict = "does NOT hold"
		}
		ll.Notes = append(ll.Notes, fmt.Sprintf("largest error %s: Little's law %s within %s at every point", reports.Share(worst), verdict, reports.Share(ExternalLittleTolerance)))
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
	h := reports.Section{Title: fmt.Sprintf("RTT histogram at %d clients (the client's round trips in the trace)", res.HistogramClients),
		Header: []string{"RTT µs", "count", ""}, Align: "rrl"}
	var peak uint64
	for _, b := range res.Histogram {
		peak = max(peak, b.Count)
	}
	for _, b := range res.Histogram {
		if b.Count == 0 {
			continue
		}
		bar := strings.Repeat("#", int(math.Ceil(30*float64(b.Count)/float64(peak))))
		h.Rows = append(h.Rows, []string{reports.Interval(b.LowUS, b.HighUS), reports.Count(b.Count), bar})
	}
	for i, m := range res.Modes {
		h.Notes = append(h.Notes, fmt.Sprintf("population %d: centre %s µs, %s of round trips, %s µs", i+1, reports.Num(m.CenterUS), reports.Share(m.Share), reports.Interval(m.LowUS, m.HighUS)))
	}
	return h
}
