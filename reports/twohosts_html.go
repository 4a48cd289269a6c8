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
	trips, label := slowestTrips(r)
	if len(trips) == 0 {
		return noData(name, title, "no round trip was seen at both hosts")
	}
	sl := newLanes(trips)
	for i, h := range sl.names {
		y := sl.y(i)
		fmt.Fprintf(&sl.body, `<rect x="%s" y="%s" width="%s" height="%s" fill="#f4f4f4"/>`+"\n", num(sl.x0), num(y), num(sl.x1-sl.x0), num(laneH))
		fmt.Fprintf(&sl.body, `<text x="%s" y="%s" text-anchor="end" font-size="11">%s</text>`+"\n", num(sl.x0-6), num(y+laneH/2+4), esc(h))
	}
	for _, t := range trips {
		c, s := sl.lane["client "+t.ClientHost], sl.lane["server "+t.ServerHost]
		start := max(t.Arrived, t.SrvRead)
		sl.rect(c, t.ReqStart, t.ReqSent, 0, t.Name+": client sends")
		sl.flight(c, s, t.ReqSent, t.Arrived, 1, t.Name+": network out")
		sl.rect(s, t.Arrived, start, 2, t.Name+": server queue")
		sl.rect(s, start, t.RepSent, 3, t.Name+": server service")
		sl.flight(s, c, t.RepSent, t.Back, 4, t.Name+": network back")
		sl.rect(c, t.Back, t.RepEnd, 0, t.Name+": client reads")
	}
	sl.timeAxis()
	height := sl.height()
	var legend strings.Builder
	for i, p := range partNames {
		fmt.Fprintf(&legend, `<rect x="%d" y="%s" width="10" height="10" fill="%s"/><text x="%d" y="%s" font-size="11">%s</text>`+"\n",
			plotLeft+i*110, num(height-12), color(i), plotLeft+i*110+14, num(height-3), esc(p))
	}
	return template.HTML(fmt.Sprintf(`<svg class="chart" data-chart="%s" data-n="%d" viewBox="0 0 %d %s" width="%d" height="%s" role="img" aria-label="%s" font-family="sans-serif">`+"\n"+
		`<title>%s</title><text x="%d" y="18" font-size="14" font-weight="bold">%s</text><text x="%d" y="%d" font-size="11" fill="#444">%s</text>`+"\n%s%s</svg>",
		name, sl.marks, plotW, num(height+8), plotW, num(height+8), esc(title), esc(title), plotLeft, esc(title), plotLeft, plotTop+4, esc(label), sl.body.String(), legend.String()))
}

// slowestTrips returns the round trips of the slowest unit of work (or the slowest round trip,
// when there are no units) and the chart's label for them.
func slowestTrips(r *breakdown.Report) ([]breakdown.Trip, string) {
	if len(r.SlowestUnits) > 0 {
		u := r.SlowestUnits[0]
		return u.Trips, fmt.Sprintf("slowest %s: %s µs, %d round trips shown", u.Name, Num(float64(u.EndNS-u.StartNS)/1e3), len(u.Trips))
	}
	if len(r.Slowest) > 0 {
		return r.Slowest[:1], "slowest round trip (no units of work)"
	}
	return nil, ""
}

// The swim lanes' geometry, px: the label margin, a lane's height and the gap between lanes.
const (
	laneLabelW = 150.0
	laneH      = 26.0
	laneGap    = 60.0
)

// lanes is a swim-lane chart being drawn: one lane per host (the clients first), a time axis
// from t0 to t1 (ns) mapped to x0..x1 (px), the marks drawn so far.
type lanes struct {
	names  []string
	lane   map[string]int
	t0, t1 int64
	x0, x1 float64
	body   strings.Builder
	marks  int
}

// newLanes lays out the lanes and the time span of trips.
func newLanes(trips []breakdown.Trip) *lanes {
	sl := &lanes{lane: map[string]int{}, t0: math.MaxInt64, t1: math.MinInt64}
	add := func(h string) {
		if _, ok := sl.lane[h]; !ok {
			sl.lane[h] = len(sl.names)
			sl.names = append(sl.names, h)
		}
	}
	for _, t := range trips {
		add("client " + t.ClientHost)
		sl.t0, sl.t1 = min(sl.t0, t.ReqStart), max(sl.t1, t.RepEnd)
	}
	for _, t := range trips {
		add("server " + t.ServerHost)
		sl.t0, sl.t1 = min(sl.t0, t.ReqStart, t.SrvRead, t.Arrived), max(sl.t1, t.RepSent)
	}
	if sl.t1 <= sl.t0 {
		sl.t1 = sl.t0 + 1
	}
	sl.x0, sl.x1 = float64(plotLeft)+laneLabelW-50, float64(plotW-plotRight)
	return sl
}

func (sl *lanes) px(ns int64) float64 {
	return sl.x0 + (sl.x1-sl.x0)*float64(ns-sl.t0)/float64(sl.t1-sl.t0)
}

func (sl *lanes) y(i int) float64 { return float64(plotTop) + 20 + float64(i)*(laneH+laneGap) }

// height is the chart's height without its bottom margin for the legend.
func (sl *lanes) height() float64 {
	return plotTop + 20 + float64(len(sl.names))*laneH + float64(len(sl.names)-1)*laneGap + plotBottom
}

// rect draws a part spent on one host, from to to (ns), in lane i.
func (sl *lanes) rect(i int, from, to int64, c int, what string) {
	if to < from {
		return
	}
	w := math.Max(sl.px(to)-sl.px(from), 0.8)
	fmt.Fprintf(&sl.body, `<rect class="datum" data-part="%s" x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s</title></rect>`+"\n",
		esc(what), num(sl.px(from)), num(sl.y(i)), num(w), num(laneH), color(c), esc(fmt.Sprintf("%s: %s µs", what, Num(float64(to-from)/1e3))))
	sl.marks++
}

// flight draws a message crossing the network, from lane from at sent to lane to at arrived.
func (sl *lanes) flight(from, to int, sent, arrived int64, c int, what string) {
	ya, yb := sl.y(from)+laneH, sl.y(to)
	if from > to {
		ya, yb = sl.y(from), sl.y(to)+laneH
	}
	fmt.Fprintf(&sl.body, `<line class="datum" data-part="%s" x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1.5"><title>%s</title></line>`+"\n",
		esc(what), num(sl.px(sent)), num(ya), num(sl.px(arrived)), num(yb), color(c), esc(fmt.Sprintf("%s: %s µs", what, Num(float64(arrived-sent)/1e3))))
	sl.marks++
}

// timeAxis writes a few ticks in ms from the unit's start under the last lane.
func (sl *lanes) timeAxis() {
	yAxis := sl.y(len(sl.names)-1) + laneH + 14
	span := float64(sl.t1-sl.t0) / 1e6
	step := niceStep(span / 5)
	for v := 0.0; v <= span+1e-9; v += step {
		x := sl.x0 + (sl.x1-sl.x0)*v/span
		fmt.Fprintf(&sl.body, `<text x="%s" y="%s" text-anchor="middle" font-size="10">%s</text>`+"\n", num(x), num(yAxis), esc(tickLabel(v)))
	}
	fmt.Fprintf(&sl.body, `<text x="%s" y="%s" text-anchor="middle" font-size="11">ms from the unit's first request</text>`+"\n", num((sl.x0+sl.x1)/2), num(yAxis+16))
}
