package lab

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/perflab/perflab/reports"
)

// Render writes the sweep's tables in format "table" or "markdown" through reports.Sections:
// per series the RTT scaling table and the batch model with its predictions and the RTT
// histogram with its populations, then the Little's-law check of every point.
func Render(w io.Writer, res *Result, format string) error {
	return reports.Sections(w, Sections(res), res.Warnings, format)
}

// Sections lays the sweep out as report sections.
func Sections(res *Result) []reports.Section {
	var out []reports.Section
	for _, s := range res.Series {
		name := fmt.Sprintf("%s, %s, depth %d, %s loop", s.Transport, s.Mode, s.Depth, res.Loop)
		sc := reports.Section{Title: "RTT scaling (" + name + ")", Align: "r",
			Header: []string{"clients", "throughput /s", "RTT p50 µs", "RTT mean µs", "RTT p99 µs", "in flight", "req/cycle", "cycle µs"}}
		for _, k := range s.points {
			p := &res.Points[k]
			sc.Rows = append(sc.Rows, []string{strconv.Itoa(p.Clients), count(p.ThroughputPerS), num(p.RTTUS.P50),
				num(p.RTTUS.Mean), num(p.RTTUS.P99), num(p.InflightMean), dash(p.RequestsPerCycle), dash(p.CycleUS)})
		}
		if s.Saturation > 0 {
			sc.Notes = append(sc.Notes, fmt.Sprintf("saturated from %s: within %.0f%% of the highest throughput; more clients add RTT, not throughput", plural(s.Saturation, "client"), 100*saturationGain))
		}
		out = append(out, sc)
		if f := s.BatchFit; f != nil {
			bm := reports.Section{Title: "Batch model RTT = T_fixed + T_per_req·N (" + name + ")", Align: "r",
				Header: []string{"clients", "N in flight", "T_cycle predicted µs", "RTT measured µs", "throughput predicted /s", "throughput measured /s"}}
			for i, pr := range s.Predictions {
				bm.Rows = append(bm.Rows, []string{strconv.Itoa(pr.Clients), num(pr.InFlight), num(pr.CyclePredictedUS),
					num(res.Points[s.points[i]].RTTUS.Mean), count(pr.ThroughputPredictedPerS), count(pr.ThroughputMeasuredPerS)})
			}
			bm.Notes = append(bm.Notes,
				fmt.Sprintf("T_fixed = %s µs [%s, %s], T_per_req = %s µs [%s, %s] (95%% CI), R² = %.3f, %d points",
					num(f.TFixedUS), num(f.TFixedCI[0]), num(f.TFixedCI[1]), num(f.TPerReqUS), num(f.TPerReqCI[0]), num(f.TPerReqCI[1]), f.R2, f.Points))
			if f.ThroughputMax > 0 {
				bm.Notes = append(bm.Notes, fmt.Sprintf("throughput limit 1/T_per_req = %s /s", count(f.ThroughputMax)))
			}
			out = append(out, bm)
		}
		if len(s.LoopPhases) > 0 {
			lp := reports.Section{Title: fmt.Sprintf("Loop phases of the busy cycles at %d clients (%s)", s.HistogramClients, name),
				Header: []string{"phase", "p50 µs", "p90 µs", "p99 µs"}}
			for _, ph := range s.LoopPhases {
				lp.Rows = append(lp.Rows, []string{ph.Phase, num(ph.P50US), num(ph.P90US), num(ph.P99US)})
			}
			lp.Notes = append(lp.Notes, "poll: take the arrived requests; execute: run them; flush: one write per connection")
			out = append(out, lp)
		}
		if len(s.Histogram) > 0 {
			h := reports.Section{Title: fmt.Sprintf("RTT histogram at %d clients (%s)", s.HistogramClients, name),
				Header: []string{"RTT µs", "count", ""}, Align: "rrl"}
			var peak uint64
			for _, b := range s.Histogram {
				peak = max(peak, b.Count)
			}
			for _, b := range s.Histogram {
				if b.Count == 0 {
					continue
				}
				bar := strings.Repeat("#", int(math.Ceil(30*float64(b.Count)/float64(peak))))
				h.Rows = append(h.Rows, []string{num(b.LowUS) + "–" + num(b.HighUS), strconv.FormatUint(b.Count, 10), bar})
			}
			for i, m := range s.Modes {
				h.Notes = append(h.Notes, fmt.Sprintf("population %d: centre %s µs, %.0f%% of round trips, %s–%s µs", i+1, num(m.CenterUS), 100*m.Share, num(m.LowUS), num(m.HighUS)))
			}
			out = append(out, h)
		}
	}
	ll := reports.Section{Title: "Little's law L = λ·W at every point",
		Header: []string{"point", "L in flight", "λ /s", "L/λ µs", "W measured µs", "error"}}
	worst := 0.0
	for _, r := range res.LittlesLaw {
		ll.Rows = append(ll.Rows, []string{r.Label, num(r.InFlight), count(r.ThroughputPerS), num(r.RTTPredictedUS), num(r.RTTMeasuredUS), pct(r.Error)})
		worst = math.Max(worst, math.Abs(r.Error))
	}
	if len(res.LittlesLaw) > 0 {
		verdict := "holds"
		if worst > LittleTolerance {
			verdict = "does NOT hold"
		}
		ll.Notes = append(ll.Notes, fmt.Sprintf("largest error %.1f%%: Little's law %s within %.0f%% at every point", 100*worst, verdict, 100*LittleTolerance))
	}
	out = append(out, ll)
	return out
}

// num formats a measurement with three significant decimals at most.
func num(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

// count formats a rate or count with thousands separators.
func count(v float64) string {
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// pct formats a relative error as a signed percentage, without a negative zero.
func pct(e float64) string {
	if math.Abs(e) < 0.0005 {
		return "0.0%"
	}
	return fmt.Sprintf("%+.1f%%", 100*e)
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
	return num(v)
}
