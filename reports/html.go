package reports

import (
	"cmp"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/perflab/perflab/analyzers"
)

// HTML writes s as one self-contained HTML page: inline CSS, inline SVG charts (latency
// histogram on a log axis, CDF, RTT against requests in flight with the fitted batch model,
// messages per second over time, requests in flight over time, per-unit time breakdown), the
// summary tables, and every warning at the top. The page makes no external request. Every
// string from the traces is escaped.
func HTML(w io.Writer, s *analyzers.Summary) error {
	if s == nil {
		return fmt.Errorf("render html: no summary")
	}
	d := htmlPage{S: s, Charts: append(evidenceCharts(s), summaryCharts(s)...), InShort: answer(s), UnitRows: htmlUnits(s), Loops: loopSections(s.Loops)}
	d.Conns, d.ConnsMore = s.Connections, 0
	if n := len(s.Connections); n > htmlMaxConns {
		d.Conns, d.ConnsMore = s.Connections[:htmlMaxConns], n-htmlMaxConns
	}
	d.Windows, d.WindowsMore = s.Windows, 0
	if n := len(s.Windows); n > htmlMaxWindows {
		d.Windows, d.WindowsMore = s.Windows[:htmlMaxWindows], n-htmlMaxWindows
	}
	if s.Lost > 0 {
		d.Notices = append(d.Notices, fmt.Sprintf("%d events were lost by the recorder: counts and rates are lower bounds.", s.Lost))
	}
	if s.Recovery != nil && s.Recovery.Damaged() {
		d.Notices = append(d.Notices, "the trace was damaged or cut: "+s.Recovery.String())
	}
	if err := htmlTmpl.Execute(w, d); err != nil {
		return fmt.Errorf("render html: %w", err)
	}
	return nil
}

type htmlPage struct {
	S        *analyzers.Summary
	InShort  []string // the table's "In short" lines
	UnitRows []htmlUnit
	Charts   []chart
	Notices  []string
	// Long tables are cut to their first rows; the JSON output has them all.
	Conns       []analyzers.ConnStats
	ConnsMore   int
	Windows     []analyzers.Window
	WindowsMore int
	Loops       []Section // the event loops' sections (loops.go), as in the table report
}

// Row limits of the long tables: enough to read, short enough to keep the page light.
const (
	htmlMaxConns   = 200
	htmlMaxWindows = 100
)

// chart is one figure of the page.
type chart struct {
	Name    string
	Caption string
	SVG     template.HTML
}

// latencyOf names what the histogram holds, for titles and captions.
func latencyOf(s *analyzers.Summary) (title, what string) {
	switch s.HistogramOf {
	case "service":
		return "Server service time", "server service times (request's last byte in → reply's first byte out)"
	case "syscall":
		return "System-call duration (not request latency)", "system-call durations: no request was paired with its reply, so these are not request latencies"
	}
	return "Round-trip latency", "round trips (request's first byte out → reply's last byte in)"
}

// summaryCharts draws the charts of an analysis, in page order.
func summaryCharts(s *analyzers.Summary) []chart {
	_, what := latencyOf(s)
	inflight := "Requests in flight over the recording (the most at any moment of each time step)."
	if s.InFlight != nil && s.InFlight.Of == "service" {
		inflight = "Requests in service at the server over the recording (arrived, not yet answered; the most in each time step)."
	}
	return append([]chart{
		{"histogram", "How long the " + what + " took, in log buckets; dashed lines: latency modes, each on its bucket.", histogramChart(s)},
		{"tail", "The tail on log-log axes: the share of " + what + " slower than a latency; a straight fall is a light tail, a long flat run a heavy one.", tailChart(s)},
		{"cdf", "Share of " + what + " at most as slow as a latency, read off the histogram.", cdfChart(s)},
		{"batch", "Round-trip time against requests in flight, with the fitted batch model T = T_fixed + T_per_req·N.", batchChart(s)},
		{"timeline", "Messages per second over the recording.", timelineChart(s)},
		{"inflight", inflight, inflightChart(s)},
		{"units", unitsCaption(s), unitsChart(s)},
		{"commands", "Messages per protocol command, by direction (the busiest commands).", commandsChart(s)},
	}, twoHostsCharts(s.TwoHosts)...)
}

// histBars returns the drawable buckets of the histogram: [lo, hi) and count.
func histBars(s *analyzers.Summary) (lo, hi, n []float64) {
	for _, b := range s.Histogram {
		if !(b.HighUS > 0) || !finite(b.HighUS) || b.Count == 0 {
			continue
		}
		low := b.LowUS
		if !(low > 0) || !finite(low) {
			low = b.HighUS / 2 // a first bucket from 0 has no place on a log axis
		}
		lo, hi, n = append(lo, low), append(hi, b.HighUS), append(n, float64(b.Count))
	}
	return lo, hi, n
}

func histogramChart(s *analyzers.Summary) template.HTML {
	const name = "histogram"
	what, _ := latencyOf(s)
	title := what + " histogram"
	lo, hi, n := histBars(s)
	if len(n) == 0 {
		return noData(name, title, noLatencies(s))
	}
	var maxN float64
	for _, v := range n {
		maxN = math.Max(maxN, v)
	}
	p := newPlot(name, title, logScale(lo[0], hi[len(hi)-1]), linScale(0, maxN), "latency (µs, log)", "count")
	p.bars("count", 0, lo, hi, n)
	for i, m := range s.Modes {
		if !(m.CenterUS > 0) {
			continue
		}
		// The marker sits on the middle of the population's tallest bar (its peak: the mode
		// proper), or else on the bar that holds its centre, so that it points at a bar and not
		// between two.
		x, best := m.CenterUS, -1.0
		for j := range lo {
			if m.HighUS > m.LowUS && lo[j] < m.HighUS && hi[j] > m.LowUS && n[j] > best {
				x, best = math.Sqrt(lo[j]*hi[j]), n[j]
			}
		}
		if best < 0 {
			for j := range lo {
				if m.CenterUS >= lo[j] && (m.CenterUS < hi[j] || j == len(lo)-1) {
					x = math.Sqrt(lo[j] * hi[j])
					break
				}
			}
		}
		p.vline(x, fmt.Sprintf("mode %s µs (%s; peak %s)", Num(m.CenterUS), Share(m.Share), Num(x)), 3+i)
	}
	return p.svg()
}

// noLatencies says why a latency chart is empty.
func noLatencies(s *analyzers.Summary) string {
	if s.Events == 0 {
		return "no data: the trace holds no events"
	}
	return "no data: no call moved data, so there is no latency to draw"
}

// tailChart draws the survival function P(latency > x) on log-log axes, from the histogram:
// the tail that a linear histogram flattens into its last few pixels.
func tailChart(s *analyzers.Summary) template.HTML {
	const name = "tail"
	what, _ := latencyOf(s)
	title := what + ": tail (log-log)"
	lo, hi, n := histBars(s)
	var total float64
	for _, v := range n {
		total += v
	}
	if total == 0 {
		return noData(name, title, noLatencies(s))
	}
	var xs, ys []float64
	left := total
	xs, ys = append(xs, lo[0]), append(ys, 1)
	for i := range n {
		left -= n[i]
		if left <= 0 {
			break // P(X > max) = 0 has no place on a log axis
		}
		xs, ys = append(xs, hi[i]), append(ys, left/total)
	}
	if len(xs) < 2 {
		return noData(name, title, "no data: every latency fell in one bucket, so there is no tail to draw")
	}
	p := newPlot(name, title, logScale(xs[0], hi[len(hi)-1]), logScale(math.Min(ys[len(ys)-1], 1/total), 1), "latency (µs, log)", "share slower (log)")
	p.step("P(latency > x)", 0, xs, ys)
	if rt := s.RoundTrips; s.HistogramOf == "rtt" && rt.Count > 0 {
		p.vline(rt.RTTUS.P99, "p99 "+Num(rt.RTTUS.P99), 3)
		if rt.RTTUS.P999 > 0 {
			p.vline(rt.RTTUS.P999, "p99.9 "+Num(rt.RTTUS.P999), 4)
		}
	}
	return p.svg()
}

func cdfChart(s *analyzers.Summary) template.HTML {
	const name = "cdf"
	what, _ := latencyOf(s)
	title := what + " CDF"
	var total float64
	for _, b := range s.Histogram {
		if b.HighUS > 0 && finite(b.HighUS) {
			total += float64(b.Count)
		}
	}
	if total == 0 {
		return noData(name, title, noLatencies(s))
	}
	var xs, ys []float64
	var cum float64
	for _, b := range s.Histogram {
		if !(b.HighUS > 0) || !finite(b.HighUS) {
			continue
		}
		if len(xs) == 0 {
			low := b.LowUS
			if !(low > 0) || !finite(low) {
				low = b.HighUS / 2
			}
			xs, ys = append(xs, low), append(ys, 0)
		}
		cum += float64(b.Count)
		xs, ys = append(xs, b.HighUS), append(ys, cum/total)
	}
	p := newPlot(name, title, logScale(xs[0], xs[len(xs)-1]), linScale(0, 1), "latency (µs, log)", "fraction ≤ latency")
	p.line("CDF", 0, xs, ys, len(xs) <= 120)
	if rt := s.RoundTrips; s.HistogramOf == "rtt" && rt.Count > 0 {
		p.vline(rt.RTTUS.P50, "p50 "+Num(rt.RTTUS.P50), 2)
		p.vline(rt.RTTUS.P99, "p99 "+Num(rt.RTTUS.P99), 3)
	}
	return p.svg()
}

func batchChart(s *analyzers.Summary) template.HTML {
	const name, title = "batch", "RTT against requests in flight (N)"
	// Measured points: the runs of a Little's law table (one per client count), and the RTT at
	// each N that the batch refinement gives back (T = T_fixed + t_per_req(N)·N).
	var ns, ts []float64
	for _, r := range s.LittlesLaw {
		if r.InFlight > 0 && r.RTTMeasuredUS > 0 && finite(r.InFlight) && finite(r.RTTMeasuredUS) {
			ns, ts = append(ns, r.InFlight), append(ts, r.RTTMeasuredUS)
		}
	}
	f := s.BatchFit
	if f != nil && !(finite(f.TFixedUS) && finite(f.TPerReqUS)) {
		f = nil // nothing to draw of a fit that did not converge
	}
	if f != nil {
		for _, r := range s.BatchRefinement {
			if r.N > 0 && finite(r.N) && finite(r.TPerReqUS) {
				ns, ts = append(ns, r.N), append(ts, f.TFixedUS+r.TPerReqUS*r.N)
			}
		}
	}
	distinct := map[float64]bool{}
	for _, n := range ns {
		distinct[math.Round(n*10)] = true
	}
	if len(distinct) < 2 && f == nil {
		why := "no data: no round trips paired, so nothing is known of RTT against requests in flight"
		if s.RoundTrips.Count > 0 {
			why = "no data: the batch model needs round trips at two or more numbers in flight"
			if s.InFlight != nil {
				why += fmt.Sprintf(" (this trace had at most %d at once in one process)", s.InFlight.Max)
			}
		}
		return noData(name, title, why)
	}
	nMax, tMax := 1.0, 0.0
	for i := range ns {
		nMax, tMax = math.Max(nMax, ns[i]), math.Max(tMax, ts[i])
	}
	if f != nil {
		// Draw the fit over the N the trace reached: its maximum in flight.
		nMax = math.Max(nMax, 4)
		if s.InFlight != nil && s.InFlight.Max > 0 && s.InFlight.Max <= 1<<20 {
			nMax = math.Max(nMax, float64(s.InFlight.Max))
		}
		tMax = math.Max(tMax, f.TFixedUS+f.TPerReqUS*nMax)
		if hi := f.TFixedCI[1] + f.TPerReqCI[1]*nMax; finite(hi) {
			tMax = math.Max(tMax, hi)
		}
	}
	p := newPlot(name, title, linScale(0, nMax), linScale(0, tMax), "requests in flight N", "RTT (µs)")
	if f != nil {
		const steps = 20
		var xs, ys, lo, hi []float64
		for i := 0; i <= steps; i++ {
			n := nMax * float64(i) / steps
			xs, ys = append(xs, n), append(ys, f.TFixedUS+f.TPerReqUS*n)
			lo, hi = append(lo, f.TFixedCI[0]+f.TPerReqCI[0]*n), append(hi, f.TFixedCI[1]+f.TPerReqCI[1]*n)
		}
		if f.TFixedCI != ([2]float64{}) || f.TPerReqCI != ([2]float64{}) {
			p.band(1, xs, lo, hi)
		}
		p.dashed("fit", 1, xs, ys)
		p.note(fmt.Sprintf("T = %s µs + %s µs·N   R² = %s", Num(f.TFixedUS), Num(f.TPerReqUS), Num(f.R2)))
	}
	p.points("measured", 0, ns, ts, true)
	return p.svg()
}

func timelineChart(s *analyzers.Summary) template.HTML {
	return seriesChart("timeline", "Messages per second", "messages/s", s.Timeline, s.Phases, "no data: no message moved data in this trace")
}

func inflightChart(s *analyzers.Summary) template.HTML {
	var pts []analyzers.TimePoint
	title, label := "Requests in flight", "in flight"
	if s.InFlight != nil {
		pts = s.InFlight.Series
		if s.InFlight.Of == "service" {
			title, label = "Requests in service (server)", "in service"
		}
	}
	why := "no data: no request was paired with its reply, so nothing is known to be in flight"
	if s.Protocol == "raw" || s.Protocol == "" {
		why = "no data: no protocol decoded and no exchange inferred, so requests and replies are unknown"
	}
	return seriesChart("inflight", title, label, pts, s.Phases, why)
}

// seriesChart draws a value over time, with the phases marked; empty says why there is none.
func seriesChart(name, title, yLabel string, pts []analyzers.TimePoint, phases []analyzers.PhaseStats, empty string) template.HTML {
	if len(pts) == 0 {
		return noData(name, title, empty)
	}
	var xs, ys []float64
	t0, t1, yMax := math.Inf(1), math.Inf(-1), 0.0
	for _, pt := range pts {
		if !finite(pt.TS) || !finite(pt.Value) {
			continue
		}
		xs, ys = append(xs, pt.TS), append(ys, pt.Value)
		t0, t1, yMax = math.Min(t0, pt.TS), math.Max(t1, pt.TS), math.Max(yMax, pt.Value)
	}
	if len(xs) == 0 {
		return noData(name, title, empty)
	}
	p := newPlot(name, title, linScale(t0, t1), linScale(0, yMax), "time (s)", yLabel)
	for i, ph := range phases {
		if finite(ph.StartS) && ph.StartS >= t0 && ph.StartS <= t1 {
			p.vline(ph.StartS, ph.Name, 4+i)
		}
	}
	p.line(yLabel, 0, xs, ys, len(xs) <= 200)
	return p.svg()
}

func unitsCaption(s *analyzers.Summary) string {
	for _, u := range s.Units {
		if u.Side == "server" {
			return "Mean time of one unit of work at the server, split into the time it worked and the time it waited for the client and the network."
		}
	}
	return "Mean time of one unit of work, split into time blocked on round trips (the server's time included) and the rest."
}

func unitsChart(s *analyzers.Summary) template.HTML {
	var cats, notes []string
	wait, rest := []float64{}, []float64{}
	series := []string{"blocked on round trips", "other"}
	for _, u := range s.Units {
		if !(u.UnitTimeUS > 0) || !finite(u.UnitTimeUS) {
			continue
		}
		cats = append(cats, u.Name)
		if u.Side == "server" {
			// A server's unit: the time it worked, and the time it waited for the client and
			// the network (it does not wait on round trips of its own).
			series = []string{"server working", "waiting (client, network)"}
			notes = append(notes, fmt.Sprintf("%s µs: %s requests, %s replies per %s", Num(u.UnitTimeUS), Num(u.RequestsPerUnit), Num(u.RepliesPerUnit), u.Name))
			w := math.Min(math.Max(u.ServerTimeUS, 0), u.UnitTimeUS)
			wait, rest = append(wait, w), append(rest, u.UnitTimeUS-w)
			continue
		}
		notes = append(notes, fmt.Sprintf("%s µs: %s requests, %s round trips; ≤ %s× faster without round trips (server time included)",
			Num(u.UnitTimeUS), Num(u.RequestsPerUnit), Num(u.RoundTripsPerUnit), Num(u.MaxSpeedup)))
		w := math.Min(math.Max(u.NetWaitUS, 0), u.UnitTimeUS)
		wait, rest = append(wait, w), append(rest, u.UnitTimeUS-w)
	}
	if len(cats) == 0 {
		return noData("units", "Per-unit breakdown", "no data: no units of work (no token markers; name a command with --unit-command)")
	}
	return stackedBars("units", "Per-unit breakdown", "mean time per unit (µs)", cats, series, [][]float64{wait, rest}, notes)
}

func commandsChart(s *analyzers.Summary) template.HTML {
	type row struct {
		name       string
		send, recv float64
	}
	idx := map[string]int{}
	var rows []row
	for _, c := range s.Commands {
		name := c.Name
		if name == "" {
			name = c.Protocol + " " + strconv.FormatUint(c.ID, 10)
		}
		i, ok := idx[name]
		if !ok {
			i = len(rows)
			idx[name] = i
			rows = append(rows, row{name: name})
		}
		switch c.Direction {
		case "send":
			rows[i].send += float64(c.Count)
		case "recv":
			rows[i].recv += float64(c.Count)
		}
	}
	// Busiest first; ties by name, so the page is the same on every run.
	slices.SortStableFunc(rows, func(a, b row) int {
		if d := cmp.Compare(b.send+b.recv, a.send+a.recv); d != 0 {
			return d
		}
		return cmp.Compare(a.name, b.name)
	})
	cats := make([]string, len(rows))
	send, recv := make([]float64, len(rows)), make([]float64, len(rows))
	for i, r := range rows {
		cats[i], send[i], recv[i] = r.name, r.send, r.recv
	}
	if len(rows) == 0 {
		why := "no data: no protocol commands decoded"
		if s.Protocol == "raw" || s.Protocol == "" {
			why = "no data: protocol unknown, so no commands (try --protocol or --protocol-spec)"
		}
		return noData("commands", "Messages by command", why)
	}
	return stackedBars("commands", "Messages by command", "messages", cats, []string{"sent", "received"},
		[][]float64{send, recv}, nil)
}

var htmlFuncs = template.FuncMap{
	"int":    Count[uint64],
	"num":    Num,
	"pct":    Share,
	"change": Change,
	"join": func(xs []string) string {
		return strings.Join(xs, " ")
	},
	"pids": func(xs []uint32) string {
		var b []string
		for _, x := range xs {
			b = append(b, strconv.FormatUint(uint64(x), 10))
		}
		return strings.Join(b, ", ")
	},
	"ci": func(r [2]float64) string {
		if r == ([2]float64{}) {
			return "–"
		}
		return Interval(r[0], r[1])
	},
}

var htmlTmpl = template.Must(template.Must(template.New("page").Funcs(htmlFuncs).Parse(htmlPageText)).Parse(htmlUnitRow))

// htmlUnitRow is one row of the units table: the steady-state units and, apart, the others
// (warmup, other shapes), requests and replies counted apart.
const htmlUnitRow = `{{define "unitrow"}}<tr><td class="l">{{.Label}}</td>{{with .U}}<td class="l">{{if .Shape}}{{.Shape}}{{else}}–{{end}}</td><td>{{int .Count}}</td>` +
	`<td>{{num .RequestsPerUnit}}</td><td>{{num .RepliesPerUnit}}</td><td>{{num .RoundTripsPerUnit}}</td><td>{{num .BytesSentPerUnit}}</td><td>{{num .BytesRecvPerUnit}}</td>` +
	`<td>{{num .UnitTimeUS}}</td><td>{{num .NetWaitUS}}</td><td>{{if .ServerTimeUS}}{{num .ServerTimeUS}}{{else}}–{{end}}</td><td>{{num .UnitsPerS}}</td><td>{{if .MaxSpeedup}}{{num .MaxSpeedup}}×{{else}}–{{end}}</td>{{end}}</tr>
{{end}}`

// htmlUnit is a row of the units table: the unit, labelled with its trace when several were
// analysed.
type htmlUnit struct {
	Label string
	U     analyzers.UnitStats
}

// htmlUnits lists the per-unit figures (the steady state, or all units) and then the units
// reported apart (warmup, other shapes).
func htmlUnits(s *analyzers.Summary) []htmlUnit {
	var out []htmlUnit
	add := func(u analyzers.UnitStats) {
		label := u.Name
		if len(s.Traces) > 1 && u.Trace != "" {
			label = u.Trace + ": " + u.Name
		}
		out = append(out, htmlUnit{label, u})
	}
	for _, u := range s.Units {
		add(u)
	}
	for _, u := range s.UnitShapes {
		if u.Shape != "steady" && u.Shape != "all" {
			add(u)
		}
	}
	return out
}

// htmlPageText is the page. It loads nothing: the CSS is inline and there is no script.
const htmlPageText = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>perflab analyze{{range .S.Traces}} {{.}}{{end}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1340px;padding:0 1em;color:#222;line-height:1.35}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em}
th,td{border:1px solid #ddd;padding:.2em .55em;text-align:right;vertical-align:top}
th{background:#f3f3f3}td.l,th.l{text-align:left}
.warnings{border:3px solid #d55e00;background:#fff3e8;padding:.6em 1em;margin:1em 0}
.warnings h2{margin:0;border:0;color:#a03c00}
.warnings li{font-weight:600}
.charts{display:flex;flex-wrap:wrap;gap:1em}
figure{margin:0;flex:1 1 640px;max-width:660px}
figure svg{width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.85em;color:#555}
.muted{color:#777}
.inshort{background:#eef5fb;border:1px solid #9cc3e5;padding:.4em 1em;margin:1em 0}
.inshort h2{margin:.2em 0;border:0}.inshort li{margin:.2em 0}
</style>
</head>
<body>
<h1>perflab analyze</h1>
<p>{{range $i, $t := .S.Traces}}{{if $i}}, {{end}}<code>{{$t}}</code>{{end}}
— protocol <b>{{.S.Protocol}}</b>, {{int .S.Events}} events, {{num .S.Duration}} s{{if .S.Lost}}, <b>{{int .S.Lost}} lost</b>{{end}}</p>
<section class="inshort" id="in-short">
<h2>In short</h2>
{{if .InShort}}<ul>
{{range .InShort}}<li>{{.}}</li>
{{end}}</ul>{{else}}<p class="muted">Nothing to say in short: no units of work, round trips or services were found (see the warnings and tables below).</p>{{end}}
</section>
{{if or .S.Warnings .Notices}}
<section class="warnings" id="warnings" role="alert">
<h2>Warnings ({{len .S.Warnings}}{{if .Notices}} + {{len .Notices}}{{end}})</h2>
<ul>
{{range .Notices}}<li>{{.}}</li>
{{end}}{{range .S.Warnings}}<li>{{.}}</li>
{{end}}</ul>
</section>
{{else}}
<p class="muted" id="warnings">No warnings.</p>
{{end}}
<h2>Charts</h2>
<div class="charts">
{{range .Charts}}<figure id="chart-{{.Name}}">
{{.SVG}}
<figcaption>{{.Caption}}</figcaption>
</figure>
{{end}}</div>

<h2>Totals</h2>
<table id="totals">
<tr><th class="l">direction</th><th>calls</th><th>bytes</th><th>frames</th></tr>
<tr><td class="l">send</td><td>{{int .S.Totals.Send.Calls}}</td><td>{{int .S.Totals.Send.Bytes}}</td><td>{{int .S.Totals.Send.Frames}}</td></tr>
<tr><td class="l">recv</td><td>{{int .S.Totals.Recv.Calls}}</td><td>{{int .S.Totals.Recv.Bytes}}</td><td>{{int .S.Totals.Recv.Frames}}</td></tr>
</table>
{{if .S.Errors}}<table id="errors">
<tr><th class="l">errno</th><th class="l">direction</th><th>failed calls</th></tr>
{{range .S.Errors}}<tr><td class="l">{{.Name}} ({{.Errno}})</td><td class="l">{{.Dir}}</td><td>{{int .Count}}</td></tr>
{{end}}</table>{{end}}
{{range .Loops}}
<h2>{{.Title}}</h2>
<table class="loops">
<tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>
{{range .Notes}}<p class="muted">{{.}}</p>
{{end}}{{end}}
<h2>Connections</h2>
{{if .S.Connections}}<table id="connections">
<tr><th>id</th><th class="l">family</th><th class="l">local</th><th class="l">remote</th><th>pid</th>
<th>send calls</th><th>send bytes</th><th>send p50 µs</th><th>send p99 µs</th><th>send max µs</th>
<th>recv calls</th><th>recv bytes</th><th>recv p50 µs</th><th>recv p99 µs</th><th>recv max µs</th></tr>
{{range .Conns}}<tr><td>{{.ID}}</td><td class="l">{{.Family}}</td><td class="l">{{.Local}}</td><td class="l">{{.Remote}}</td><td>{{.PID}}</td>
<td>{{int .Send.Calls}}</td><td>{{int .Send.Bytes}}</td><td>{{num .Send.LatencyUS.P50}}</td><td>{{num .Send.LatencyUS.P99}}</td><td>{{num .Send.LatencyUS.Max}}</td>
<td>{{int .Recv.Calls}}</td><td>{{int .Recv.Bytes}}</td><td>{{num .Recv.LatencyUS.P50}}</td><td>{{num .Recv.LatencyUS.P99}}</td><td>{{num .Recv.LatencyUS.Max}}</td></tr>
{{end}}</table>{{if .ConnsMore}}<p class="muted">{{.ConnsMore}} more connections: see <code>--format json</code>.</p>{{end}}{{else}}<p class="muted">No connections.</p>{{end}}

<h2>Commands</h2>
{{if .S.Commands}}<table id="commands">
<tr><th class="l">protocol</th><th class="l">command</th><th class="l">direction</th><th>count</th><th>bytes</th><th>RTT p50 µs</th><th>RTT p99 µs</th><th>RTT max µs</th></tr>
{{range .S.Commands}}<tr><td class="l">{{.Protocol}}</td><td class="l">{{.Name}}</td><td class="l">{{.Direction}}</td><td>{{int .Count}}</td><td>{{int .Bytes}}</td>
{{with .RTTUS}}<td>{{num .P50}}</td><td>{{num .P99}}</td><td>{{num .Max}}</td>{{else}}<td>–</td><td>–</td><td>–</td>{{end}}</tr>
{{end}}</table>{{else}}<p class="muted">No protocol commands decoded.</p>{{end}}{{if .S.Statuses}}
<h2>Reply statuses</h2>
<table id="statuses"><tr><th class="l">protocol</th><th>status</th><th>count</th></tr>
{{range .S.Statuses}}<tr><td class="l">{{.Protocol}}</td><td>{{.Code}}</td><td>{{int .Count}}</td></tr>
{{end}}</table>{{end}}

<h2>Round trips</h2>
{{with .S.RoundTrips}}<table id="round-trips">
<tr><th>count</th><th>unanswered</th><th>blocked s</th><th>p50 µs</th><th>p50 CI µs</th><th>p90 µs</th><th>p99 µs</th><th>p99.9 µs</th><th>max µs</th><th>mean µs</th></tr>
<tr><td>{{int .Count}}</td><td>{{int .Unanswered}}</td><td>{{num .BlockedS}}</td><td>{{num .RTTUS.P50}}</td><td>{{if .RTTUS.P50High}}{{num .RTTUS.P50Low}} – {{num .RTTUS.P50High}}{{else}}–{{end}}</td>
<td>{{num .RTTUS.P90}}</td><td>{{num .RTTUS.P99}}</td><td>{{num .RTTUS.P999}}</td><td>{{num .RTTUS.Max}}</td><td>{{num .RTTUS.Mean}}</td></tr>
</table>
{{with .ServiceUS}}<p>Server service time: p50 {{num .P50}} µs, p99 {{num .P99}} µs, max {{num .Max}} µs.</p>{{end}}{{end}}

<h2>Units of work</h2>
{{if .S.Units}}<table id="units">
<tr><th class="l">unit</th><th class="l">shape</th><th>count</th><th>requests/unit</th><th>replies/unit</th><th>round trips/unit</th><th>bytes sent/unit</th><th>bytes recv/unit</th><th>unit time µs</th><th>network wait µs</th><th>server time µs</th><th>units/s</th><th>max speedup</th></tr>
{{range .UnitRows}}{{template "unitrow" .}}{{end}}</table>
{{range .S.Units}}{{if .SpeedupAssumes}}<p class="muted">{{.Name}}: max speedup assumes {{.SpeedupAssumes}}</p>{{end}}{{end}}{{else}}<p class="muted">No units of work (no token markers).</p>{{end}}
{{if .S.Phases}}<table id="phases">
<tr><th class="l">phase</th><th>start s</th><th>duration s</th><th>messages</th><th>bytes</th></tr>
{{range .S.Phases}}<tr><td class="l">{{.Name}}</td><td>{{num .StartS}}</td><td>{{num .DurationS}}</td><td>{{int .Messages}}</td><td>{{int .Bytes}}</td></tr>
{{end}}</table>{{end}}

<h2>Little's law</h2>
{{with .S.InFlight}}<p>Requests in flight: mean {{num .Mean}}, max {{.Max}}.</p>{{end}}
{{if .S.LittlesLaw}}<table id="littles-law">
<tr><th class="l">group</th><th>in flight L</th><th>throughput λ /s</th><th>RTT predicted L/λ µs</th><th>RTT measured µs</th><th>error</th></tr>
{{range .S.LittlesLaw}}<tr><td class="l">{{.Label}}</td><td>{{num .InFlight}}</td><td>{{num .ThroughputPerS}}</td><td>{{num .RTTPredictedUS}}</td><td>{{num .RTTMeasuredUS}}</td><td>{{change .Error}}</td></tr>
{{end}}</table>{{else}}<p class="muted">No Little's law check (no round trips).</p>{{end}}

<h2>Batch model</h2>
{{with .S.BatchFit}}<table id="batch-fit">
<tr><th></th><th>estimate</th><th>confidence interval</th></tr>
<tr><td class="l">T_fixed µs</td><td>{{num .TFixedUS}}</td><td>{{ci .TFixedCI}}</td></tr>
<tr><td class="l">T_per_req µs</td><td>{{num .TPerReqUS}}</td><td>{{ci .TPerReqCI}}</td></tr>
<tr><td class="l">R²</td><td>{{num .R2}}</td><td></td></tr>
<tr><td class="l">points</td><td>{{.Points}}</td><td></td></tr>
<tr><td class="l">max throughput /s</td><td>{{num .ThroughputMax}}</td><td></td></tr>
</table>{{else}}<p class="muted">No batch model fit (needs runs at several N).</p>{{end}}
{{if .S.BatchRefinement}}<p>The fit is curved: the per-request cost at each N, holding T_fixed.</p>
<table id="batch-refinement">
<tr><th>N</th><th>T_per_req µs</th></tr>
{{range .S.BatchRefinement}}<tr><td>{{num .N}}</td><td>{{num .TPerReqUS}}</td></tr>
{{end}}</table>{{end}}

<h2>Latency modes</h2>
{{if .S.Modes}}<table id="modes">
<tr><th>centre µs</th><th>share</th><th>from µs</th><th>to µs</th></tr>
{{range .S.Modes}}<tr><td>{{num .CenterUS}}</td><td>{{pct .Share}}</td><td>{{num .LowUS}}</td><td>{{num .HighUS}}</td></tr>
{{end}}</table>{{else}}<p class="muted">No latency modes found.</p>{{end}}

{{if .S.Windows}}<h2>Per-100-call windows</h2>
<table id="windows">
<tr><th class="l">direction</th><th>calls</th><th>avg µs</th><th>avg bytes</th><th>max µs</th></tr>
{{range .Windows}}<tr><td class="l">{{.Dir}}</td><td>{{int .Calls}}</td><td>{{num .AvgUS}}</td><td>{{num .AvgBytes}}</td><td>{{num .MaxUS}}</td></tr>
{{end}}</table>{{if .WindowsMore}}<p class="muted">{{.WindowsMore}} more windows: see <code>--format json</code>.</p>{{end}}{{end}}

<h2>Recordings</h2>
{{if .S.Meta}}<table id="meta">
<tr><th class="l">host</th><th class="l">kernel</th><th class="l">start</th><th class="l">source</th><th class="l">command</th><th class="l">pids</th><th class="l">labels</th><th class="l">version</th></tr>
{{range .S.Meta}}<tr><td class="l">{{.Host}}</td><td class="l">{{.Kernel}}</td><td class="l">{{if not .Start.IsZero}}{{.Start.UTC.Format "2006-01-02 15:04:05.000 UTC"}}{{end}}</td><td class="l">{{.Source}}</td><td class="l">{{join .Command}}</td><td class="l">{{pids .PIDs}}</td>
<td class="l">{{range $k, $v := .Labels}}{{$k}}={{$v}} {{end}}</td><td class="l">{{.Version}}</td></tr>
{{end}}</table>{{end}}
{{with .S.Recovery}}<p>Trace recovery: {{.String}}</p>{{end}}
<p class="muted">Generated by perflab from the traces above; this page is self-contained.</p>
</body>
</html>
`
