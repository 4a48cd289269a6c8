package reports

// This file holds the SVG plotting shared by the HTML reports (html.go, and the comparison page):
// scales (linear and log), axes with ticks, lines, steps, points, bars, a legend, and a "no data"
// figure. A plot is drawn into a strings.Builder and returned as template.HTML; every string that
// reaches the SVG goes through esc, and every number through num, so the output is safe to inline
// and identical from run to run.
//
// Every mark that carries data has class "datum" and data-* attributes with its values, and the
// <svg> element carries data-chart (the chart's name) and data-n (the number of data marks), so a
// browser test can check that each chart drew something.

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strconv"
	"strings"
)

// Plot geometry, in SVG user units (px). 640×300 fits two charts side by side on a laptop
// screen and one per line on a phone.
const (
	plotW      = 640
	plotH      = 300
	plotLeft   = 64 // room for y tick labels and the y axis title
	plotRight  = 16
	plotTop    = 30 // room for the title
	plotBottom = 46 // room for x tick labels and the x axis title
)

// palette holds the series colours, chosen to stay distinct for colour-blind readers
// (Okabe–Ito).
var palette = []string{"#0072b2", "#e69f00", "#009e73", "#d55e00", "#cc79a7", "#56b4e9", "#f0e442", "#000000"}

// color returns the colour of series i.
func color(i int) string { return palette[((i%len(palette))+len(palette))%len(palette)] }

// esc escapes s for SVG/HTML text and attribute values.
func esc(s string) string { return html.EscapeString(s) }

// num formats a coordinate or value with at most 3 decimals and no exponent, so output is
// stable and compact; NaN and ±Inf become 0.
func num(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "0"
	}
	s := strconv.FormatFloat(v, 'f', 3, 64)
	s = strings.TrimRight(s, "0")
	s = strings.TrimSuffix(s, ".")
	if s == "-0" {
		s = "0"
	}
	return s
}

// finite reports whether v is a number that can be drawn.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// tickLabel formats an axis value compactly: 0.5, 12, 1.5k, 20M; "–" for NaN and infinities.
func tickLabel(v float64) string {
	a := math.Abs(v)
	switch {
	case !finite(v):
		return "–"
	case a >= 1e9:
		return trimNum(v/1e9) + "G"
	case a >= 1e6:
		return trimNum(v/1e6) + "M"
	case a >= 1e4:
		return trimNum(v/1e3) + "k"
	}
	return trimNum(v)
}

func trimNum(v float64) string {
	s := strconv.FormatFloat(v, 'g', 3, 64)
	if strings.ContainsAny(s, "e") {
		s = strconv.FormatFloat(v, 'f', -1, 64)
	}
	return s
}

// scale maps data values in [lo, hi] to pixels in [p0, p1] (p1 < p0 for a y axis), linearly or
// on a log10 axis.
type scale struct {
	lo, hi float64
	log    bool
	p0, p1 float64
}

// linScale returns a linear scale over [lo, hi], widened to nice round ends.
func linScale(lo, hi float64) scale {
	if !finite(lo) {
		lo = 0
	}
	if !finite(hi) {
		hi = lo + 1
	}
	if !(hi > lo) || math.IsInf(hi-lo, 0) {
		hi = lo + 1
		if lo > 0 {
			lo, hi = 0, lo*2
		}
	}
	step := niceStep((hi - lo) / 5)
	return scale{lo: math.Floor(lo/step) * step, hi: math.Ceil(hi/step) * step}
}

// logScale returns a log10 scale over [lo, hi], widened to whole decades. lo must be > 0;
// values ≤ 0 are clamped to lo when drawn.
func logScale(lo, hi float64) scale {
	if !(lo > 0) || !finite(lo) {
		lo = 1
	}
	if !(hi > lo) || !finite(hi) {
		hi = lo * 10
	}
	return scale{lo: math.Pow(10, math.Floor(math.Log10(lo))), hi: math.Pow(10, math.Ceil(math.Log10(hi))), log: true}
}

// niceStep rounds raw up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if !(raw > 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// px maps v to a pixel position.
func (s scale) px(v float64) float64 {
	var f float64
	if s.log {
		if v < s.lo {
			v = s.lo
		}
		f = (math.Log10(v) - math.Log10(s.lo)) / (math.Log10(s.hi) - math.Log10(s.lo))
	} else {
		f = (v - s.lo) / (s.hi - s.lo)
	}
	if math.IsNaN(f) {
		f = 0
	}
	f = math.Max(-0.05, math.Min(1.05, f)) // keep wild values near the frame
	return s.p0 + f*(s.p1-s.p0)
}

// ticks returns the tick values: 1-2-5 steps on a linear scale, decades on a log scale (with
// 2 and 5 in between when the axis spans fewer than three decades).
func (s scale) ticks() []float64 {
	var out []float64
	if s.log {
		d0, d1 := int(math.Round(math.Log10(s.lo))), int(math.Round(math.Log10(s.hi)))
		for d := d0; d <= d1; d++ {
			b := math.Pow(10, float64(d))
			out = append(out, b)
			if d1-d0 < 3 && d < d1 {
				out = append(out, 2*b, 5*b)
			}
		}
		return out
	}
	step := niceStep((s.hi - s.lo) / 5)
	for i := 0; i <= 20; i++ {
		v := s.lo + float64(i)*step
		if v > s.hi+step/1e6 {
			break
		}
		out = append(out, v)
	}
	return out
}

// plot is one SVG chart being drawn. Create it with newPlot, draw series, then call svg.
type plot struct {
	name   string // data-chart: a stable identifier ("histogram", "cdf")
	title  string
	x, y   scale
	xLabel string
	yLabel string
	body   strings.Builder
	marks  int // data marks drawn
	vlines int // markers drawn, to stagger their labels
	legend []legendItem
	// legendBelow puts the legend in one row under the x axis, for charts whose plot area is
	// full (bar charts).
	legendBelow bool
	notes       []string
}

type legendItem struct {
	label string
	color string
	dash  bool
}

// newPlot starts a chart with the given axes. Build the scales with linScale or logScale; newPlot
// sets their pixel ranges.
func newPlot(name, title string, x, y scale, xLabel, yLabel string) *plot {
	x.p0, x.p1 = plotLeft, plotW-plotRight
	y.p0, y.p1 = plotH-plotBottom, plotTop
	return &plot{name: name, title: title, x: x, y: y, xLabel: xLabel, yLabel: yLabel}
}

// line draws a polyline through (xs[i], ys[i]) in series colour c, with a circle on each point
// when dots is set. It is one data mark (data-n = points) plus one per dot.
func (p *plot) line(label string, c int, xs, ys []float64, dots bool) {
	p.path(label, c, xs, ys, false, false)
	if dots {
		p.points(label, c, xs, ys, false)
	}
}

// dashed draws a dashed polyline, for a fitted or predicted curve.
func (p *plot) dashed(label string, c int, xs, ys []float64) {
	p.path(label, c, xs, ys, false, true)
}

// step draws a staircase through the points (a CDF): horizontal to each x, then vertical.
func (p *plot) step(label string, c int, xs, ys []float64) {
	p.path(label, c, xs, ys, true, false)
}

func (p *plot) path(label string, c int, xs, ys []float64, step, dash bool) {
	n := min(len(xs), len(ys))
	var d strings.Builder
	var prevY float64
	drawn := 0
	for i := 0; i < n; i++ {
		if !finite(xs[i]) || !finite(ys[i]) {
			continue // a gap in the data, not a point at 0
		}
		x, y := p.x.px(xs[i]), p.y.px(ys[i])
		drawn++
		switch {
		case drawn == 1:
			fmt.Fprintf(&d, "M%s %s", num(x), num(y))
		case step:
			fmt.Fprintf(&d, " L%s %s L%s %s", num(x), num(prevY), num(x), num(y))
		default:
			fmt.Fprintf(&d, " L%s %s", num(x), num(y))
		}
		prevY = y
	}
	if drawn == 0 {
		return
	}
	da := ""
	if dash {
		da = ` stroke-dasharray="6 4"`
	}
	fmt.Fprintf(&p.body, `<path class="datum" data-series="%s" data-n="%d" d="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n",
		esc(label), drawn, d.String(), color(c), da)
	p.marks++
	p.addLegend(label, color(c), dash)
}

// points draws a circle per point, each with data-x and data-y.
func (p *plot) points(label string, c int, xs, ys []float64, legend bool) {
	n, drawn := min(len(xs), len(ys)), 0
	for i := 0; i < n; i++ {
		if !finite(xs[i]) || !finite(ys[i]) {
			continue
		}
		drawn++
		fmt.Fprintf(&p.body, `<circle class="datum" data-series="%s" data-x="%s" data-y="%s" cx="%s" cy="%s" r="3" fill="%s"><title>%s: %s, %s</title></circle>`+"\n",
			esc(label), num(xs[i]), num(ys[i]), num(p.x.px(xs[i])), num(p.y.px(ys[i])), color(c),
			esc(label), esc(tickLabel(xs[i])), esc(tickLabel(ys[i])))
		p.marks++
	}
	if legend && drawn > 0 {
		p.addLegend(label, color(c), false)
	}
}

// bars draws a bar per bucket [lo[i], hi[i]) of height v[i], each with data-lo, data-hi and
// data-n (the value).
func (p *plot) bars(label string, c int, lo, hi, v []float64) {
	n, drawn := min(len(lo), len(hi), len(v)), 0
	base := p.y.px(p.y.lo)
	for i := 0; i < n; i++ {
		if !finite(lo[i]) || !finite(hi[i]) || !finite(v[i]) {
			continue
		}
		drawn++
		x0, x1 := p.x.px(lo[i]), p.x.px(hi[i])
		if x1-x0 > 2 {
			x0, x1 = x0+0.5, x1-0.5 // a hair of space between bars
		}
		y := p.y.px(v[i])
		h := math.Max(base-y, 0)
		if v[i] > 0 && h < 1 {
			h, y = 1, base-1 // keep small non-zero buckets visible
		}
		fmt.Fprintf(&p.body, `<rect class="datum" data-series="%s" data-lo="%s" data-hi="%s" data-n="%s" x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s–%s: %s</title></rect>`+"\n",
			esc(label), num(lo[i]), num(hi[i]), num(v[i]), num(x0), num(y), num(math.Max(x1-x0, 1)), num(h), color(c),
			esc(tickLabel(lo[i])), esc(tickLabel(hi[i])), esc(tickLabel(v[i])))
		p.marks++
	}
	if drawn > 0 {
		p.addLegend(label, color(c), false)
	}
}

// vline draws a vertical marker at x with a short label (a mode centre, a percentile). Labels
// of successive markers go on successive rows so that close markers stay readable. It is not a
// data mark.
func (p *plot) vline(x float64, label string, c int) {
	if !finite(x) {
		return
	}
	px := p.x.px(x)
	y := plotTop + 10 + 12*(p.vlines%4)
	p.vlines++
	fmt.Fprintf(&p.body, `<line x1="%s" x2="%s" y1="%d" y2="%d" stroke="%s" stroke-dasharray="3 3"/><text x="%s" y="%d" font-size="10" fill="%s">%s</text>`+"\n",
		num(px), num(px), plotTop, plotH-plotBottom, color(c), num(px+3), y, color(c), esc(label))
}

// band shades the region between ylo and yhi along xs (a confidence band). It is not a data
// mark.
func (p *plot) band(c int, xs, ylo, yhi []float64) {
	n := min(len(xs), len(ylo), len(yhi))
	if n == 0 {
		return
	}
	for i := 0; i < n; i++ {
		if !finite(xs[i]) || !finite(ylo[i]) || !finite(yhi[i]) {
			return // a band with a hole is no band
		}
	}
	var d strings.Builder
	for i := 0; i < n; i++ {
		cmd := "L"
		if i == 0 {
			cmd = "M"
		}
		fmt.Fprintf(&d, "%s%s %s ", cmd, num(p.x.px(xs[i])), num(p.y.px(yhi[i])))
	}
	for i := n - 1; i >= 0; i-- {
		fmt.Fprintf(&d, "L%s %s ", num(p.x.px(xs[i])), num(p.y.px(ylo[i])))
	}
	fmt.Fprintf(&p.body, `<path d="%sZ" fill="%s" fill-opacity="0.15" stroke="none"/>`+"\n", d.String(), color(c))
}

// note adds a line of text under the title (a caveat, a fitted equation).
func (p *plot) note(s string) { p.notes = append(p.notes, s) }

func (p *plot) addLegend(label, c string, dash bool) {
	if label == "" {
		return
	}
	for _, l := range p.legend {
		if l.label == label {
			return
		}
	}
	p.legend = append(p.legend, legendItem{label, c, dash})
}

// svg returns the finished chart, or the "no data" figure when nothing was drawn.
func (p *plot) svg() template.HTML {
	if p.marks == 0 {
		return noData(p.name, p.title, "no data")
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" data-chart="%s" data-n="%d" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s" font-family="sans-serif">`+"\n",
		esc(p.name), p.marks, plotW, plotH, plotW, plotH, esc(p.title))
	fmt.Fprintf(&b, `<title>%s</title>`+"\n", esc(p.title))
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="14" font-weight="bold">%s</text>`+"\n", plotLeft, esc(p.title))
	p.axes(&b)
	b.WriteString(p.body.String())
	for i, n := range p.notes {
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" fill="#444">%s</text>`+"\n", plotLeft+6, plotTop+14+14*i, esc(n))
	}
	p.drawLegend(&b)
	b.WriteString("</svg>")
	return template.HTML(b.String())
}

func (p *plot) axes(b *strings.Builder) {
	x0, x1 := plotLeft, plotW-plotRight
	y0, y1 := plotH-plotBottom, plotTop
	fmt.Fprintf(b, `<g class="axes" font-size="11" fill="#333">`+"\n")
	for _, t := range p.x.ticks() {
		px := p.x.px(t)
		fmt.Fprintf(b, `<line x1="%s" x2="%s" y1="%d" y2="%d" stroke="#e4e4e4"/><text x="%s" y="%d" text-anchor="middle">%s</text>`+"\n",
			num(px), num(px), y1, y0, num(px), y0+15, esc(tickLabel(t)))
	}
	for _, t := range p.y.ticks() {
		py := p.y.px(t)
		fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%s" y2="%s" stroke="#e4e4e4"/><text x="%d" y="%s" text-anchor="end">%s</text>`+"\n",
			x0, x1, num(py), num(py), x0-5, num(py+4), esc(tickLabel(t)))
	}
	fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#333"/><line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#333"/>`+"\n",
		x0, x1, y0, y0, x0, x0, y0, y1)
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", (x0+x1)/2, plotH-8, esc(p.xLabel))
	fmt.Fprintf(b, `<text transform="translate(14 %d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", (y0+y1)/2, esc(p.yLabel))
	b.WriteString("</g>\n")
}

func (p *plot) drawLegend(b *strings.Builder) {
	if len(p.legend) < 2 {
		return
	}
	if p.legendBelow {
		// Items side by side, right-aligned; ~6.5 px per character at font-size 11.
		width := func(l legendItem) int { return 24 + 13*len([]rune(shorten(l.label, 28)))/2 + 14 }
		x := plotW - plotRight
		for _, l := range p.legend {
			x -= width(l)
		}
		for _, l := range p.legend {
			fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="3"/><text x="%d" y="%d" font-size="11">%s</text>`+"\n",
				x, x+18, plotH-12, plotH-12, l.color, x+24, plotH-8, esc(shorten(l.label, 28)))
			x += width(l)
		}
		return
	}
	x, y := plotW-plotRight-180, plotTop+4
	for i, l := range p.legend {
		yy := y + 14*i
		da := ""
		if l.dash {
			da = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="3"%s/><text x="%d" y="%d" font-size="11">%s</text>`+"\n",
			x, x+18, yy, yy, l.color, da, x+24, yy+4, esc(l.label))
	}
}

// noData returns a chart-sized figure that says why there is nothing to plot, so a missing
// series reads as a statement rather than an empty box. Its data-n is 0.
func noData(name, title, why string) template.HTML {
	// The reason, wrapped to the box (about 7 px a character at 14 px), centred.
	cx := (plotLeft + plotW - plotRight) / 2
	lines := wrapWords(why, (plotW-plotLeft-plotRight-20)/7)
	var note strings.Builder
	y0 := (plotTop+plotH-plotBottom)/2 - 9*(len(lines)-1)
	for i, l := range lines {
		fmt.Fprintf(&note, `<tspan x="%d" y="%d">%s</tspan>`, cx, y0+18*i, esc(l))
	}
	return template.HTML(fmt.Sprintf(`<svg class="chart nodata" data-chart="%s" data-n="0" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s: %s" font-family="sans-serif">`+
		`<title>%s</title><text x="%d" y="18" font-size="14" font-weight="bold">%s</text>`+
		`<rect x="%d" y="%d" width="%d" height="%d" fill="#f6f6f6" stroke="#ccc"/>`+
		`<text class="nodata-note" text-anchor="middle" font-size="14" fill="#666">%s</text></svg>`,
		esc(name), plotW, plotH, plotW, plotH, esc(title), esc(why),
		esc(title), plotLeft, esc(title),
		plotLeft, plotTop, plotW-plotLeft-plotRight, plotH-plotTop-plotBottom,
		note.String()))
}

// wrapWords breaks s into lines of at most n characters, at spaces.
func wrapWords(s string, n int) []string {
	var lines []string
	cur := ""
	for _, w := range strings.Fields(s) {
		if cur != "" && len([]rune(cur))+1+len([]rune(w)) > n {
			lines = append(lines, cur)
			cur = ""
		}
		if cur != "" {
			cur += " "
		}
		cur += w
	}
	if cur != "" || len(lines) == 0 {
		lines = append(lines, cur)
	}
	return lines
}

// stackedBars draws one horizontal bar per category, split into one segment per series
// (vals[s][c] is series s in category c), on a linear x axis: a breakdown such as the time of one
// token split into network wait and the rest. Each segment is a data mark with data-cat,
// data-series and data-n (its value). notes[c], when given, is written under bar c. Categories
// beyond maxCats are left out and noted.
func stackedBars(name, title, xLabel string, cats, series []string, vals [][]float64, notes []string) template.HTML {
	const maxCats = 12 // keeps every bar at least ~15 px tall
	shown := min(len(cats), maxCats)
	hi := 0.0
	for c := 0; c < shown; c++ {
		t := 0.0
		for s := range series {
			t += stackValue(vals, s, c)
		}
		hi = math.Max(hi, t)
	}
	if shown == 0 || hi == 0 || !finite(hi) {
		return noData(name, title, "no data")
	}
	p := newPlot(name, title, linScale(0, hi), linScale(0, 1), xLabel, "")
	p.legendBelow = true
	// Category labels sit left of the bars, in full: the margin grows with the longest name
	// (about 6.2 px a character at 11 px), up to half the chart; a longer name gets a smaller font.
	longest := 0
	for c := 0; c < shown; c++ {
		longest = max(longest, len([]rune(cats[c])))
	}
	labelW := math.Min(math.Max(90, 6.2*float64(longest)+4), plotW/2-plotLeft)
	p.x.p0 = float64(plotLeft) + labelW
	rowH := float64(plotH-plotTop-plotBottom) / float64(shown)
	barH := math.Min(rowH*0.6, 28)
	for c := 0; c < shown; c++ {
		note := ""
		if c < len(notes) {
			note = notes[c]
		}
		p.stackedRow(cats[c], note, series, vals, c, float64(plotTop)+rowH*float64(c)+(rowH-barH)/2, barH, labelW)
	}
	if len(cats) > shown {
		p.note(fmt.Sprintf("%d more not shown", len(cats)-shown))
	}
	return p.xAxisSVG(xLabel)
}

// stackValue is series s's value in category c: 0 when missing, negative or not finite.
func stackValue(vals [][]float64, s, c int) float64 {
	if s < len(vals) && c < len(vals[s]) && vals[s][c] > 0 && finite(vals[s][c]) {
		return vals[s][c]
	}
	return 0
}

// stackedRow draws category c's bar at height y (px), barH tall: its label in the labelW-wide
// margin left of the bars, its note under it, one segment per series.
func (p *plot) stackedRow(cat, note string, series []string, vals [][]float64, c int, y, barH, labelW float64) {
	left := p.x.p0
	fs := math.Min(11, 11*(labelW+plotLeft-10)/(6.2*float64(len([]rune(cat)))+1))
	fmt.Fprintf(&p.body, `<text class="cat" x="%s" y="%s" text-anchor="end" font-size="%s">%s</text>`+"\n",
		num(left-6), num(y+barH/2+4), num(fs), esc(cat))
	if note != "" {
		fmt.Fprintf(&p.body, `<text x="%s" y="%s" font-size="10" fill="#444">%s</text>`+"\n",
			num(left+2), num(y+barH+11), esc(note))
	}
	acc := 0.0
	for s := range series {
		v := stackValue(vals, s, c)
		x0, x1 := p.x.px(acc), p.x.px(acc+v)
		acc += v
		fmt.Fprintf(&p.body, `<rect class="datum" data-cat="%s" data-series="%s" data-n="%s" x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s %s: %s</title></rect>`+"\n",
			esc(cat), esc(series[s]), num(v), num(x0), num(y), num(math.Max(x1-x0, 0)), num(barH), color(s),
			esc(cat), esc(series[s]), esc(tickLabel(v)))
		p.marks++
		p.addLegend(series[s], color(s), false)
	}
}

// xAxisSVG closes a chart whose y scale is a dummy (horizontal bars): the x axis only, from
// p.x.p0, then the body, notes and legend.
func (p *plot) xAxisSVG(xLabel string) template.HTML {
	left := p.x.p0
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" data-chart="%s" data-n="%d" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s" font-family="sans-serif">`+"\n",
		esc(p.name), p.marks, plotW, plotH, plotW, plotH, esc(p.title))
	fmt.Fprintf(&b, `<title>%s</title>`+"\n", esc(p.title))
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="14" font-weight="bold">%s</text>`+"\n", plotLeft, esc(p.title))
	y0 := plotH - plotBottom
	b.WriteString(`<g class="axes" font-size="11" fill="#333">` + "\n")
	for _, t := range p.x.ticks() {
		px := p.x.px(t)
		fmt.Fprintf(&b, `<line x1="%s" x2="%s" y1="%d" y2="%d" stroke="#e4e4e4"/><text x="%s" y="%d" text-anchor="middle">%s</text>`+"\n",
			num(px), num(px), plotTop, y0, num(px), y0+15, esc(tickLabel(t)))
	}
	fmt.Fprintf(&b, `<line x1="%s" x2="%d" y1="%d" y2="%d" stroke="#333"/>`+"\n", num(left), plotW-plotRight, y0, y0)
	fmt.Fprintf(&b, `<text x="%s" y="%d">%s</text>`+"\n", num(left), plotH-8, esc(xLabel))
	b.WriteString("</g>\n")
	b.WriteString(p.body.String())
	for i, n := range p.notes {
		fmt.Fprintf(&b, `<text x="6" y="%d" font-size="11" fill="#444">%s</text>`+"\n", plotH-8-12*i, esc(n))
	}
	p.drawLegend(&b)
	b.WriteString("</svg>")
	return template.HTML(b.String())
}

// shorten cuts s to at most n runes, marking the cut with "…" (legend labels; category names
// are never cut).
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
