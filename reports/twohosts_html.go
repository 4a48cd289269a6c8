package reports

import (
	"fmt"
	"html/template"
	"math"
	"strings"

	"github.com/perflab/perflab/breakdown"
)

// partNames are the parts of a round trip across hosts, in the order they happen.
var partNames = []string{"client", "network out", "server queue", "server service", "network back"}

// twoHostsCharts draws the split of a merged trace: the mean parts per command, and the swim
// lanes of the slowest unit of work across the hosts. None when the trace was not merged.
func twoHostsCharts(r *breakdown.Report) []chart {
	if r == nil {
		return nil
	}
	var cats []string
	vals := make([][]float64, len(partNames))
	for _, c := range r.Commands {
		cats = append(cats, fmt.Sprintf("%s ×%d", orDash(c.Name), c.Count))
		m := c.Mean
		for i, v := range []float64{m.Client, m.NetOut, m.Queue, m.Service, m.NetBack} {
			vals[i] = append(vals[i], v)
		}
	}
	split := stackedBars("hostsplit", "Round trip across hosts, per command (mean µs)", "µs", cats, partNames, vals, nil)
	return []chart{
		{"hostsplit", fmt.Sprintf("Each command's mean round trip split at both hosts: client, network out, server queue, server service, network back (they sum to the RTT; each part but the client's within ±%s µs, the clock interval).", Num(r.ClockUS)), split},
		{"swimlanes", "The slowest unit of work across the hosts, one lane per host: the client's calls, each request's flight to the server (a slanted band), the server's queue and service, the reply's flight back.", swimLanes(r)},
	}
}

// swimLanes draws the slowest unit of work (or, without units, the slowest round trips) as one
// lane per host on a shared time axis.
func swimLanes(r *breakdown.Report) template.HTML {
	const name, title = "swimlanes", "Slowest unit across hosts"
	var trips []breakdown.Trip
	label := ""
	if len(r.SlowestUnits) > 0 {
		u := r.SlowestUnits[0]
		trips = u.Trips
		label = fmt.Sprintf("slowest %s: %s µs, %d round trips shown", u.Name, Num(float64(u.EndNS-u.StartNS)/1e3), len(u.Trips))
	} else if len(r.Slowest) > 0 {
		trips = r.Slowest[:1]
		label = "slowest round trip (no units of work)"
	}
	if len(trips) == 0 {
		return noData(name, title, "no round trip was seen at both hosts")
	}
	var lanes []string
	lane := map[string]int{}
	addLane := func(h string) {
		if _, ok := lane[h]; !ok {
			lane[h] = len(lanes)
			lanes = append(lanes, h)
		}
	}
	t0, t1 := int64(math.MaxInt64), int64(math.MinInt64)
	for _, t := range trips {
		addLane("client " + t.ClientHost)
		t0, t1 = min(t0, t.ReqStart), max(t1, t.RepEnd)
	}
	for _, t := range trips {
		addLane("server " + t.ServerHost)
		t0, t1 = min(t0, t.ReqStart, t.SrvRead, t.Arrived), max(t1, t.RepSent)
	}
	if t1 <= t0 {
		t1 = t0 + 1
	}
	const labelW, laneH, laneGap = 150.0, 26.0, 60.0
	x0, x1 := float64(plotLeft)+labelW-50, float64(plotW-plotRight)
	height := plotTop + 20 + float64(len(lanes))*laneH + float64(len(lanes)-1)*laneGap + plotBottom
	px := func(ns int64) float64 { return x0 + (x1-x0)*float64(ns-t0)/float64(t1-t0) }
	laneY := func(i int) float64 { return float64(plotTop) + 20 + float64(i)*(laneH+laneGap) }
	var body strings.Builder
	marks := 0
	rect := func(i int, from, to int64, c int, what string) {
		if to < from {
			return
		}
		w := math.Max(px(to)-px(from), 0.8)
		fmt.Fprintf(&body, `<rect class="datum" data-part="%s" x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s</title></rect>`+"\n",
			esc(what), num(px(from)), num(laneY(i)), num(w), num(laneH), color(c), esc(fmt.Sprintf("%s: %s µs", what, Num(float64(to-from)/1e3))))
		marks++
	}
	flight := func(from, to int, sent, arrived int64, c int, what string) {
		ya, yb := laneY(from)+laneH, laneY(to)
		if from > to {
			ya, yb = laneY(from), laneY(to)+laneH
		}
		fmt.Fprintf(&body, `<line class="datum" data-part="%s" x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1.5"><title>%s</title></line>`+"\n",
			esc(what), num(px(sent)), num(ya), num(px(arrived)), num(yb), color(c), esc(fmt.Sprintf("%s: %s µs", what, Num(float64(arrived-sent)/1e3))))
		marks++
	}
	for i, h := range lanes {
		y := laneY(i)
		fmt.Fprintf(&body, `<rect x="%s" y="%s" width="%s" height="%s" fill="#f4f4f4"/>`+"\n", num(x0), num(y), num(x1-x0), num(laneH))
		fmt.Fprintf(&body, `<text x="%s" y="%s" text-anchor="end" font-size="11">%s</text>`+"\n", num(x0-6), num(y+laneH/2+4), esc(h))
	}
	for _, t := range trips {
		c, s := lane["client "+t.ClientHost], lane["server "+t.ServerHost]
		start := max(t.Arrived, t.SrvRead)
		rect(c, t.ReqStart, t.ReqSent, 0, t.Name+": client sends")
		flight(c, s, t.ReqSent, t.Arrived, 1, t.Name+": network out")
		rect(s, t.Arrived, start, 2, t.Name+": server queue")
		rect(s, start, t.RepSent, 3, t.Name+": server service")
		flight(s, c, t.RepSent, t.Back, 4, t.Name+": network back")
		rect(c, t.Back, t.RepEnd, 0, t.Name+": client reads")
	}
	// The time axis: a few ticks in ms from the unit's start.
	yAxis := laneY(len(lanes)-1) + laneH + 14
	span := float64(t1-t0) / 1e6
	step := niceStep(span / 5)
	for v := 0.0; v <= span+1e-9; v += step {
		x := x0 + (x1-x0)*v/span
		fmt.Fprintf(&body, `<text x="%s" y="%s" text-anchor="middle" font-size="10">%s</text>`+"\n", num(x), num(yAxis), esc(tickLabel(v)))
	}
	fmt.Fprintf(&body, `<text x="%s" y="%s" text-anchor="middle" font-size="11">ms from the unit's first request</text>`+"\n", num((x0+x1)/2), num(yAxis+16))
	var legend strings.Builder
	for i, p := range partNames {
		fmt.Fprintf(&legend, `<rect x="%d" y="%s" width="10" height="10" fill="%s"/><text x="%d" y="%s" font-size="11">%s</text>`+"\n",
			plotLeft+i*110, num(height-12), color(i), plotLeft+i*110+14, num(height-3), esc(p))
	}
	return template.HTML(fmt.Sprintf(`<svg class="chart" data-chart="%s" data-n="%d" viewBox="0 0 %d %s" width="%d" height="%s" role="img" aria-label="%s" font-family="sans-serif">`+"\n"+
		`<title>%s</title><text x="%d" y="18" font-size="14" font-weight="bold">%s</text><text x="%d" y="%d" font-size="11" fill="#444">%s</text>`+"\n%s%s</svg>",
		name, marks, plotW, num(height+8), plotW, num(height+8), esc(title), esc(title), plotLeft, esc(title), plotLeft, plotTop+4, esc(label), body.String(), legend.String()))
}
