package lab

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/reports"
)

// Render writes the sweep's tables in format "table" or "markdown" through reports.Sections,
// or "html" (a page titled "perflab bench") through reports.SectionsHTML: per series the RTT
// scaling table and the batch model with its predictions and the RTT histogram with its
// populations, then the transports side by side and the Little's-law check of every point.
func Render(w io.Writer, res *Result, format string) error {
	if format == "html" {
		return RenderHTML(w, res, "perflab bench")
	}
	return reports.Sections(w, Sections(res), res.Warnings, format)
}

// RenderHTML writes the sweep as one self-contained HTML page with the given title.
func RenderHTML(w io.Writer, res *Result, title string) error {
	return reports.SectionsHTML(w, title, Sections(res), res.Warnings)
}

// Sections lays the sweep out as report sections.
func Sections(res *Result) []reports.Section {
	var out []reports.Section
	for _, s := range res.Series {
		name := fmt.Sprintf("%s, %s, depth %d, %s loop", s.Transport, s.Mode, s.Depth, res.Loop)
		out = append(out, scalingSection(res, &s, name))
		if s.BatchFit != nil {
			out = append(out, batchModelSection(res, &s, name))
		}
		if len(s.LoopPhases) > 0 {
			out = append(out, loopPhasesSection(&s, name))
		}
		if len(s.Histogram) > 0 {
			out = append(out, histogramSection(&s, name))
		}
	}
	out = append(out, transportsSection(res)...)
	return append(out, littleSection(res))
}

// scalingSection is the series' RTT scaling table: throughput, RTT and loop figures per client
// count, with its run-queue and saturation notes.
func scalingSection(res *Result, s *Series, name string) reports.Section {
	sc := reports.Section{Title: "RTT scaling (" + name + ")", Align: "r",
		Header: []string{"clients", "throughput /s", "RTT p50 µs", "RTT mean µs", "RTT p99 µs", "in flight", "req/cycle", "cycle µs"}}
	rq, split, cpu, ev := false, false, false, false
	for _, k := range s.points {
		rq = rq || res.Points[k].RunQueue != nil
		ev = ev || (res.Points[k].RunQueue != nil && res.Points[k].RunQueue.Evidence != nil)
		split = split || (res.Points[k].RunQueue != nil && res.Points[k].RunQueue.Separate)
		cpu = cpu || res.Points[k].CPUCores > 0
	}
	if rq {
		sc.Header = append(sc.Header, "run queue µs/RT")
		if split {
			sc.Header = append(sc.Header, "clients µs/RT", "server µs/RT")
		}
		sc.Header = append(sc.Header, "of RTT rise")
	}
	if ev {
		sc.Header = append(sc.Header, "eBPF wake-up µs/RT", "eBPF of RTT rise")
	}
	if cpu {
		sc.Header = append(sc.Header, "CPU cores", "CPU µs/RT")
	}
	for _, k := range s.points {
		p := &res.Points[k]
		row := []string{reports.Count(p.Clients), reports.Count(p.ThroughputPerS), reports.Num(p.RTTUS.P50),
			reports.Num(p.RTTUS.Mean), reports.Num(p.RTTUS.P99), reports.Num(p.InflightMean), dash(p.RequestsPerCycle), dash(p.CycleUS)}
		if rq {
			row = append(row, runQueueCells(p, split)...)
		}
		if ev {
			row = append(row, evidenceCells(p)...)
		}
		if cpu {
			row = append(row, dash(p.CPUCores), dash(p.CPUUSPerRT))
		}
		sc.Rows = append(sc.Rows, row)
	}
	if cpu {
		sc.Notes = append(sc.Notes, "CPU: user and system time of the clients and the server together (perflab's process, and the server's when it runs apart) over the point's wall time, and per round trip")
	}
	for _, k := range s.points {
		if p := &res.Points[k]; p.ShmSpin != nil {
			sc.Notes = append(sc.Notes, shmSpinLine(p))
		}
	}
	sc.Notes = append(sc.Notes, runQueueNote(res, s.points)...)
	sc.Notes = append(sc.Notes, evidenceLines(res, s.points)...)
	if res.EvidenceNote != "" && s.Transport != "shm" {
		sc.Notes = append(sc.Notes, res.EvidenceNote)
	}
	if s.Saturation > 0 {
		sc.Notes = append(sc.Notes, fmt.Sprintf("saturated from %s: within %s of the highest throughput; more clients add RTT, not throughput", plural(s.Saturation, "client"), reports.Share(saturationGain)))
	}
	return sc
}

// batchModelSection is the series' batch model table: predicted against measured cycle and
// throughput per client count, with the fit's parameters.
func batchModelSection(res *Result, s *Series, name string) reports.Section {
	f := s.BatchFit
	bm := reports.Section{Title: "Batch model RTT = T_fixed + T_per_req·N (" + name + ")", Align: "r",
		Header: []string{"clients", "N in flight", "T_cycle predicted µs", "RTT measured µs", "throughput predicted /s", "throughput measured /s"}}
	for i, pr := range s.Predictions {
		bm.Rows = append(bm.Rows, []string{reports.Count(pr.Clients), reports.Num(pr.InFlight), reports.Num(pr.CyclePredictedUS),
			reports.Num(res.Points[s.points[i]].RTTUS.Mean), reports.Count(pr.ThroughputPredictedPerS), reports.Count(pr.ThroughputMeasuredPerS)})
	}
	bm.Notes = append(bm.Notes,
		fmt.Sprintf("T_fixed = %s µs (95%% CI %s), T_per_req = %s µs (95%% CI %s), R² = %s, %s points",
			reports.Num(f.TFixedUS), reports.Interval(f.TFixedCI[0], f.TFixedCI[1]), reports.Num(f.TPerReqUS), reports.Interval(f.TPerReqCI[0], f.TPerReqCI[1]),
			reports.Num(f.R2), reports.Count(f.Points)))
	if f.ThroughputMax > 0 {
		bm.Notes = append(bm.Notes, fmt.Sprintf("throughput limit 1/T_per_req = %s /s", reports.Count(f.ThroughputMax)))
	}
	return bm
}

// loopPhasesSection is the series' table of loop phase times of the busy cycles.
func loopPhasesSection(s *Series, name string) reports.Section {
	lp := reports.Section{Title: fmt.Sprintf("Loop phases of the busy cycles at %d clients (%s)", s.HistogramClients, name),
		Header: []string{"phase", "p50 µs", "p90 µs", "p99 µs"}}
	for _, ph := range s.LoopPhases {
		lp.Rows = append(lp.Rows, []string{ph.Phase, reports.Num(ph.P50US), reports.Num(ph.P90US), reports.Num(ph.P99US)})
	}
	lp.Notes = append(lp.Notes, "poll: take the arrived requests; execute: run them; flush: one write per connection")
	return lp
}

// histogramSection is the series' RTT histogram at its highest client count, with its populations.
func histogramSection(s *Series, name string) reports.Section {
	return rttHistogram(fmt.Sprintf("RTT histogram at %d clients (%s)", s.HistogramClients, name), s.Histogram, s.Modes)
}

// rttHistogram is a section of RTT buckets drawn as bars, with the populations found in them.
func rttHistogram(title string, hist []analyzers.HistBucket, modes []analyzers.Mode) reports.Section {
	h := reports.Section{Title: title, Header: []string{"RTT µs", "count", ""}, Align: "rrl"}
	var peak uint64
	for _, b := range hist {
		peak = max(peak, b.Count)
	}
	for _, b := range hist {
		if b.Count == 0 {
			continue
		}
		bar := strings.Repeat("#", int(math.Ceil(30*float64(b.Count)/float64(peak))))
		h.Rows = append(h.Rows, []string{reports.Interval(b.LowUS, b.HighUS), reports.Count(b.Count), bar})
	}
	for i, m := range modes {
		h.Notes = append(h.Notes, fmt.Sprintf("population %d: centre %s µs, %s of round trips, %s µs", i+1, reports.Num(m.CenterUS), reports.Share(m.Share), reports.Interval(m.LowUS, m.HighUS)))
	}
	return h
}

// littleSection checks Little's law at every point of the sweep.
func littleSection(res *Result) reports.Section {
	ll := reports.Section{Title: "Little's law L = λ·W at every point",
		Header: []string{"point", "L in flight", "λ /s", "L/λ µs", "W measured µs", "error"}}
	worst := 0.0
	for _, r := range res.LittlesLaw {
		ll.Rows = append(ll.Rows, []string{r.Label, reports.Num(r.InFlight), reports.Count(r.ThroughputPerS), reports.Num(r.RTTPredictedUS), reports.Num(r.RTTMeasuredUS), reports.Change(r.Error)})
		worst = math.Max(worst, math.Abs(r.Error))
	}
	if len(res.LittlesLaw) > 0 {
		verdict := "holds"
		if worst > LittleTolerance {
			verdict = "does NOT hold"
		}
		ll.Notes = append(ll.Notes, fmt.Sprintf("largest error %s: Little's law %s within %s at every point", reports.Share(worst), verdict, reports.Share(LittleTolerance)))
	}
	return ll
}

// runQueueNote says what the run-queue figures of the series' points cover, then for each point
// after the first how much of the mean RTT's rise since the first they account for.
func runQueueNote(res *Result, points []int) []string {
	if len(points) == 0 || res.Points[points[0]].RunQueue == nil {
		return nil
	}
	first := &res.Points[points[0]]
	var s string
	if first.RunQueue.Separate {
		s = "run queue: the time each side's threads spent runnable waiting for a CPU, once woken or preempted, a halted CPU's wake-up included (the kernel's schedstat), over the load window (every client measuring), per round trip: the clients' (perflab's process) and the server's (a process of its own)"
	} else {
		s = "run queue: the time perflab's threads spent runnable waiting for a CPU, once woken or preempted, a halted CPU's wake-up included (the kernel's schedstat), over the load window (every client measuring), per round trip; the clients and the server shared the process, so it is not split by side"
	}
	s += ". It counts every wait, each after one of the side's switch-ins (a thread put on a CPU after a wake-up or a preemption), as if it held a round trip: a thread woken to look for work holds none (the figure overstates), and one wait of the batch loop's thread holds every request of its cycle (the server's understates); points where either shows are warned. "
	if first.RunQueue.Evidence != nil {
		s += "The kernel evidence below (the eBPF columns) gives each round trip's own wake-up and run-queue delay"
	} else {
		s += "perflab record --evidence sched and analyze attribute each round trip's own wake-up delay"
	}
	out := []string{s}
	var per []string
	for _, k := range points {
		p := &res.Points[k]
		if rq := p.RunQueue; rq != nil && (rq.ClientSwitchInsPerRT > 0 || rq.ServerSwitchInsPerRT > 0) {
			line := fmt.Sprintf("%s: clients %s switch-ins per round trip, %s µs each", plural(p.Clients, "client"),
				reports.Num(rq.ClientSwitchInsPerRT), reports.Num(rq.ClientUSPerSwitchIn))
			if rq.Separate {
				line += fmt.Sprintf("; server %s, %s µs each", reports.Num(rq.ServerSwitchInsPerRT), reports.Num(rq.ServerUSPerSwitchIn))
			}
			per = append(per, line)
		}
	}
	if len(per) > 0 {
		out = append(out, "wake-up and run-queue delay per switch-in (a thread put on a CPU after a wake-up or a preemption; a round trip whose two sides block needs about one per side): "+strings.Join(per, "; "))
	}
	for _, k := range points[1:] {
		if line := runQueueRiseLine(first, &res.Points[k]); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// shmSpinLine sums up one shm point's ring waits: how they ended, the cores the polls kept
// busy, and whether polling paid.
func shmSpinLine(p *Point) string {
	s := p.ShmSpin
	line := fmt.Sprintf("shm ring waits at %s: %s caught by polling (%s only after 100 µs), %s slept on the futex",
		plural(p.Clients, "client"), reports.Share(s.PolledShare), reports.Share(s.LateShare), reports.Share(s.SleptShare))
	if s.Note != "" {
		line += "; " + s.Note
	}
	return line
}

// runQueueCells are point p's run-queue columns: the whole per round trip, each side's when
// split, and the share of the mean RTT's rise since the series' first point (marked "!" when
// warned).
func runQueueCells(p *Point, split bool) []string {
	rq := p.RunQueue
	if rq == nil {
		if split {
			return []string{"-", "-", "-", "-"}
		}
		return []string{"-", "-"}
	}
	out := []string{reports.Num(rq.USPerRT)}
	if split {
		out = append(out, reports.Num(rq.ClientUSPerRT), reports.Num(rq.ServerUSPerRT))
	}
	share := "-"
	if rq.Rise != nil && rq.Rise.RTTRiseUS >= minRTTRise {
		share = reports.Share(rq.Rise.Share)
	}
	if rq.Warning != "" {
		share += " !"
	}
	return append(out, share)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

func dash(v float64) string {
	if v == 0 {
		return "-"
	}
	return reports.Num(v)
}
