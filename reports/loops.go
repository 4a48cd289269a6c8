package reports

import (
	"fmt"

	"github.com/perflab/perflab/loops"
)

// maxLoopRows bounds the event-loop threads given a section each; the rest are in the JSON.
const maxLoopRows = 8

// loopSections lays out the event loops of a trace recorded with its wait calls: per loop
// thread its cycle metrics, the phase table, cycles by N and the batch model.
func loopSections(r *loops.Report) []Section {
	if r == nil {
		return nil
	}
	var out []Section
	ov := Section{Title: "Event loops (cycles from one wait call to the next)",
		Header: []string{"pid", "tid", "wait call", "cycles", "requests", "req/cycle", "req/busy cycle", "busy", "cycle p50 µs", "cycle p99 µs", "busy p50 µs", "busy p99 µs"}}
	for i, t := range r.Threads {
		if i == maxLoopRows {
			ov.Notes = append(ov.Notes, fmt.Sprintf("%d more loop threads in --format json", len(r.Threads)-maxLoopRows))
			break
		}
		ov.Rows = append(ov.Rows, []string{ID(uint64(t.PID)), ID(uint64(t.TID)), t.WaitCall, Count(t.Cycles), Count(t.Requests), Num(t.RequestsPerCycle),
			Num(t.RequestsPerBusyCycle), Share(t.Utilization), Num(t.CycleUS.P50), Num(t.CycleUS.P99), Num(t.BusyUS.P50), Num(t.BusyUS.P99)})
	}
	ov.Notes = append(ov.Notes, "busy: share of the thread's time outside its wait calls (utilisation); N = requests received in a cycle")
	ov.Notes = append(ov.Notes, r.Notes...)
	out = append(out, ov)
	for i, t := range r.Threads {
		if i == maxLoopRows {
			break
		}
		name := fmt.Sprintf("pid %d tid %d", t.PID, t.TID)
		ph := Section{Title: "Loop phases per cycle (" + name + ")", Header: []string{"phase", "p50 µs", "p90 µs", "p99 µs", "mean µs", "share of time"}}
		for _, p := range t.Phases {
			ph.Rows = append(ph.Rows, []string{p.Phase, Num(p.P50), Num(p.P90), Num(p.P99), Num(p.Mean), Share(p.Share)})
		}
		ph.Notes = append(ph.Notes, "read: until the cycle's last receive ended; write: its first send after that to its last send's end; process: the rest of the busy time")
		out = append(out, ph)
		if t.Fit == nil {
			continue
		}
		bm := Section{Title: "Batch model T_busy = T_fixed + T_per_req·N (" + name + ")", Header: []string{"N", "cycles", "busy µs", "cycle µs", "predicted busy µs"}}
		for _, g := range t.ByN {
			pred := "-"
			if g.N > 0 {
				pred = Num(t.Fit.TFixedUS + t.Fit.TPerReqUS*float64(g.N))
			}
			bm.Rows = append(bm.Rows, []string{Count(g.N), Count(g.Cycles), Num(g.BusyUS), Num(g.CycleUS), pred})
			if len(bm.Rows) == 24 {
				bm.Notes = append(bm.Notes, "more N in --format json")
				break
			}
		}
		f := t.Fit
		bm.Notes = append(bm.Notes, fmt.Sprintf("T_fixed = %s µs (%s CI %s), T_per_req = %s µs (%s CI %s), R² = %s over %s N",
			Num(f.TFixedUS), Share(f.CILevel), Interval(f.TFixedCI[0], f.TFixedCI[1]), Num(f.TPerReqUS), Share(f.CILevel), Interval(f.TPerReqCI[0], f.TPerReqCI[1]), Num(f.R2), Count(f.Points)))
		if f.ThroughputMaxPerS > 0 {
			bm.Notes = append(bm.Notes, fmt.Sprintf("throughput limit of this loop 1/T_per_req = %s requests/s", Count(f.ThroughputMaxPerS)))
		}
		for _, r := range t.Ranges {
			bm.Notes = append(bm.Notes, fmt.Sprintf("N %s-%s: %s cycles, mean N %s, busy %s µs, effective T_per_req %s µs",
				Count(r.NFrom), Count(r.NTo), Count(r.Cycles), Num(r.MeanN), Num(r.MeanUS), Num(r.TPerReqUS)))
		}
		out = append(out, bm)
	}
	return out
}
