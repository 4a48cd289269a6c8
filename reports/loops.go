package reports

import (
	"fmt"
	"strconv"

	"github.com/perflab/perflab/loops"
)

// maxLoopRows bounds the event-loop threads given a section each; the rest are in the JSON.
const maxLoopRows = 8

// loopSections lays out the event loops of a trace recorded with its wait calls: per loop
// thread its cycle metrics, the phase table, cycles by N and the batch model.
func loopSections(r *loops.Report) []section {
	if r == nil {
		return nil
	}
	var out []section
	ov := section{title: "Event loops (cycles from one wait call to the next)",
		header: []string{"pid", "tid", "wait call", "cycles", "requests", "req/cycle", "req/busy cycle", "busy", "cycle p50 µs", "cycle p99 µs", "busy p50 µs", "busy p99 µs"}}
	for i, t := range r.Threads {
		if i == maxLoopRows {
			ov.notes = append(ov.notes, fmt.Sprintf("%d more loop threads in --format json", len(r.Threads)-maxLoopRows))
			break
		}
		ov.rows = append(ov.rows, []string{u32(t.PID), u32(t.TID), t.WaitCall, u64(t.Cycles), u64(t.Requests), tnum(t.RequestsPerCycle),
			tnum(t.RequestsPerBusyCycle), pct(t.Utilization), tnum(t.CycleUS.P50), tnum(t.CycleUS.P99), tnum(t.BusyUS.P50), tnum(t.BusyUS.P99)})
	}
	ov.notes = append(ov.notes, "busy: share of the thread's time outside its wait calls (utilisation); N = requests received in a cycle")
	ov.notes = append(ov.notes, r.Notes...)
	out = append(out, ov)
	for i, t := range r.Threads {
		if i == maxLoopRows {
			break
		}
		name := fmt.Sprintf("pid %d tid %d", t.PID, t.TID)
		ph := section{title: "Loop phases per cycle (" + name + ")", header: []string{"phase", "p50 µs", "p90 µs", "p99 µs", "mean µs", "share of time"}}
		for _, p := range t.Phases {
			ph.rows = append(ph.rows, []string{p.Phase, tnum(p.P50), tnum(p.P90), tnum(p.P99), tnum(p.Mean), pct(p.Share)})
		}
		ph.notes = append(ph.notes, "read: until the cycle's last receive ended; write: its first send after that to its last send's end; process: the rest of the busy time")
		out = append(out, ph)
		if t.Fit == nil {
			continue
		}
		bm := section{title: "Batch model T_busy = T_fixed + T_per_req·N (" + name + ")", header: []string{"N", "cycles", "busy µs", "cycle µs", "predicted busy µs"}}
		for _, g := range t.ByN {
			pred := "-"
			if g.N > 0 {
				pred = tnum(t.Fit.TFixedUS + t.Fit.TPerReqUS*float64(g.N))
			}
			bm.rows = append(bm.rows, []string{strconv.Itoa(g.N), u64(g.Cycles), tnum(g.BusyUS), tnum(g.CycleUS), pred})
			if len(bm.rows) == 24 {
				bm.notes = append(bm.notes, "more N in --format json")
				break
			}
		}
		f := t.Fit
		bm.notes = append(bm.notes, fmt.Sprintf("T_fixed = %s µs [%s], T_per_req = %s µs [%s] (%.0f%% CI), R² = %.3f over %d N",
			tnum(f.TFixedUS), interval(f.TFixedCI), tnum(f.TPerReqUS), interval(f.TPerReqCI), 100*f.CILevel, f.R2, f.Points))
		if f.ThroughputMaxPerS > 0 {
			bm.notes = append(bm.notes, fmt.Sprintf("throughput limit of this loop 1/T_per_req = %s requests/s", u64(uint64(f.ThroughputMaxPerS))))
		}
		for _, r := range t.Ranges {
			bm.notes = append(bm.notes, fmt.Sprintf("N %d-%d: %s cycles, mean N %s, busy %s µs, effective T_per_req %s µs",
				r.NFrom, r.NTo, u64(r.Cycles), tnum(r.MeanN), tnum(r.MeanUS), tnum(r.TPerReqUS)))
		}
		out = append(out, bm)
	}
	return out
}

func u32(v uint32) string { return strconv.FormatUint(uint64(v), 10) }
