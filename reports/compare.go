package reports

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/perflab/perflab/compare"
)

// CompareFormats are the formats of `perflab compare --format`.
var CompareFormats = []string{"table", "markdown", "json", "html"}

// Compare writes c in format: "table" (aligned text), "markdown", "json" or "html".
func Compare(w io.Writer, c *compare.Comparison, format string) error {
	if c == nil {
		return fmt.Errorf("render comparison: no comparison")
	}
	switch format {
	case "table", "":
		return compareTable(w, c)
	case "markdown":
		return compareMarkdown(w, c)
	case "json":
		return writeJSON(w, c)
	case "html":
		return compareHTML(w, c)
	}
	return fmt.Errorf("render comparison: unknown format %q (want %s)", format, strings.Join(CompareFormats, ", "))
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("render json: %w", err)
	}
	return nil
}

// cmpPct is a relative change that may be missing.
func cmpPct(p *float64) string {
	if p == nil {
		return "-"
	}
	return Change(*p)
}

func cmpCI(m compare.MetricChange) string {
	if m.CILow == nil || m.CIHigh == nil {
		return "-"
	}
	return "[" + Change(*m.CILow) + ", " + Change(*m.CIHigh) + "]"
}

// cmpPTest is a metric's p-value, "-" when nothing was tested, with a bootstrap's smallest p
// shown as the bound it is.
func cmpPTest(m compare.MetricChange) string {
	switch {
	case m.PValue == nil:
		return "-"
	case m.Test == "bootstrap" && *m.PValue <= 2.0/(compare.DefaultBootstrap+1)+1e-12:
		return "≤" + strconv.FormatFloat(*m.PValue, 'f', 3, 64) // 1/1001 is ≤0.001, not ≤<0.001
	}
	return PValue(*m.PValue)
}

func cmpName(m compare.MetricChange) string {
	if m.Unit == "" {
		return m.Name
	}
	return m.Name + " (" + m.Unit + ")"
}

// cmpVerdict is the verdict cell: the verdict, and when the samples were fewer than its test
// needs, that.
func cmpVerdict(m compare.MetricChange) string {
	switch {
	case m.MinN > 0:
		return m.Verdict + " (too few)"
	case m.VerdictNote != "":
		return m.Verdict + " (bounds)"
	}
	return m.Verdict
}

// cmpSection is the table of metrics: name, both sides, the change with its interval and p,
// the samples and the verdict.
func cmpSection(c *compare.Comparison) Section {
	level := 100 * (1 - c.Alpha)
	sec := Section{Header: []string{"metric", "before", "after", "change", strconv.FormatFloat(level, 'g', 3, 64) + "% CI", "p", "n", "verdict"},
		Align: "lrrrrrrl"}
	for _, m := range c.Metrics {
		sec.Rows = append(sec.Rows, []string{cmpName(m), Num(m.Before), Num(m.After), cmpPct(m.Change),
			cmpCI(m), cmpPTest(m), fmt.Sprintf("%d/%d", m.N[0], m.N[1]), cmpVerdict(m)})
	}
	return sec
}

// cmpLegend says where p, interval and verdict come from, one line each.
func cmpLegend(c *compare.Comparison) []string {
	tests := map[string]bool{}
	for _, m := range c.Metrics {
		tests[m.Test] = true
	}
	parts := []string{fmt.Sprintf("better/worse: p < α=%g; ~: not significant; (too few): fewer samples than the test needs", c.Alpha)}
	if tests["bootstrap"] {
		parts = append(parts, "per-message and per-token samples: p, interval and verdict from one bootstrap of the metric's statistic (1000 resamples, fixed seed)")
	}
	if tests["mann-whitney"] {
		parts = append(parts, "one value per run: two-sided Mann-Whitney U test and its interval for the ratio")
	}
	if tests["exact"] {
		parts = append(parts, "exact counts (the same in every run of a side): the change as measured, no test")
	}
	for _, m := range c.Metrics {
		if m.MinN == 0 && m.VerdictNote != "" {
			parts = append(parts, "(bounds): a side's counts are lower bounds (messages pipelined past the captured payload heads), which could overturn the change")
			break
		}
	}
	return parts
}

func compareTable(w io.Writer, c *compare.Comparison) error {
	fmt.Fprintf(w, "before: %s\nafter:  %s\n\n", strings.Join(c.Before, ", "), strings.Join(c.After, ", "))
	sec := cmpSection(c)
	if err := writeTextTable(w, &sec); err != nil {
		return fmt.Errorf("render comparison: %w", err)
	}
	cmpFootnotes(w, c, "")
	return nil
}

func cmpFootnotes(w io.Writer, c *compare.Comparison, bullet string) {
	if len(c.Shape) > 0 {
		fmt.Fprintf(w, "\nshape:\n")
		for _, s := range c.Shape {
			fmt.Fprintf(w, "%s  %s: %s → %s", bullet, s.Name, Num(s.Before), Num(s.After))
			if s.Note != "" {
				fmt.Fprintf(w, " (%s)", s.Note)
			}
			fmt.Fprintln(w)
		}
	}
	var notes []string
	for _, m := range c.Metrics {
		if m.VerdictNote != "" {
			notes = append(notes, m.Name+": "+m.VerdictNote)
		}
	}
	fmt.Fprintln(w)
	for _, l := range cmpLegend(c) {
		fmt.Fprintf(w, "%s  %s\n", bullet, l)
	}
	for _, n := range notes {
		fmt.Fprintf(w, "%s  %s\n", bullet, n)
	}
	for _, s := range c.Warnings {
		fmt.Fprintf(w, "%s  warning: %s\n", bullet, s)
	}
}

func compareMarkdown(w io.Writer, c *compare.Comparison) error {
	fmt.Fprintf(w, "### perflab compare\n\nbefore: `%s` · after: `%s`\n\n", strings.Join(c.Before, "`, `"), strings.Join(c.After, "`, `"))
	var b strings.Builder
	sec := cmpSection(c)
	mdTable(&b, &sec)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("render comparison: %w", err)
	}
	cmpFootnotes(w, c, "-")
	return nil
}

type comparePage struct {
	C      *compare.Comparison
	Legend []string
	Notes  []string
	Rows   [][]string
	Charts []chart
}

func compareHTML(w io.Writer, c *compare.Comparison) error {
	sec := cmpSection(c)
	p := comparePage{C: c, Rows: append([][]string{sec.Header}, sec.Rows...), Legend: cmpLegend(c)}
	for _, m := range c.Metrics {
		if m.VerdictNote != "" {
			p.Notes = append(p.Notes, m.Name+": "+m.VerdictNote)
		}
	}
	for _, d := range c.Dists {
		p.Charts = append(p.Charts,
			chart{Name: "cdf-" + d.Name, Caption: "CDF of " + d.Name + ", before and after.", SVG: compareCDF(d)},
			chart{Name: "hist-" + d.Name, Caption: "Histogram of " + d.Name + " (share of messages per log bucket), before and after.", SVG: compareHist(d)})
	}
	if err := compareTmpl.Execute(w, p); err != nil {
		return fmt.Errorf("render comparison html: %w", err)
	}
	return nil
}

func compareCDF(d compare.DistPair) template.HTML {
	name, title := "cdf-"+d.Name, "CDF: "+d.Name
	if len(d.Before) == 0 || len(d.After) == 0 {
		return noData(name, title, "no data")
	}
	lo := math.Min(d.Before[0].Value, d.After[0].Value)
	hi := math.Max(d.Before[len(d.Before)-1].Value, d.After[len(d.After)-1].Value)
	if !(lo > 0) {
		lo = 0.1
	}
	if hi <= lo {
		hi = lo * 2
	}
	p := newPlot(name, title, logScale(lo, hi), linScale(0, 1), "latency (µs, log)", "fraction ≤ latency")
	p.legendBelow = true // a legend inside the plot would cover the curves' upper ends
	for i, side := range [][]compare.CDFPoint{d.Before, d.After} {
		xs, ys := make([]float64, len(side)), make([]float64, len(side))
		for j, pt := range side {
			xs[j], ys[j] = math.Max(pt.Value, lo), pt.Frac
		}
		p.step([]string{"before", "after"}[i], i, xs, ys)
	}
	return p.svg()
}

func compareHist(d compare.DistPair) template.HTML {
	name, title := "hist-"+d.Name, "Histogram: "+d.Name
	if len(d.Hist) == 0 {
		return noData(name, title, "no data")
	}
	var maxV float64
	for _, h := range d.Hist {
		maxV = math.Max(maxV, math.Max(h.Before, h.After))
	}
	p := newPlot(name, title, logScale(d.Hist[0].LowUS, d.Hist[len(d.Hist)-1].HighUS), linScale(0, maxV), "latency (µs, log)", "share")
	p.legendBelow = true
	for i := 0; i < 2; i++ {
		var lo, hi, v []float64
		for _, h := range d.Hist {
			// Two bars side by side in each bucket, split at the geometric middle.
			mid := math.Sqrt(h.LowUS * h.HighUS)
			if i == 0 {
				lo, hi, v = append(lo, h.LowUS), append(hi, mid), append(v, h.Before)
			} else {
				lo, hi, v = append(lo, mid), append(hi, h.HighUS), append(v, h.After)
			}
		}
		p.bars([]string{"before", "after"}[i], i, lo, hi, v)
	}
	return p.svg()
}

var compareTmpl = template.Must(template.New("compare").Funcs(template.FuncMap{
	"verdictClass": func(v string) string { return strings.Fields(v + " ~")[0] },
	"num":          Num,
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>perflab compare</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:1400px}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}
td:first-child,th:first-child{text-align:left}.better{background:#e3f4e3}.worse{background:#fbe3e0}
.warn{background:#fff4d6;border:1px solid #e0b84a;padding:.5em 1em;margin:.5em 0}
figure{display:inline-block;margin:.5em}figcaption{font-size:.85em;color:#555;max-width:640px}
</style></head><body>
<h1>perflab compare</h1>
<p>before: {{range $i, $p := .C.Before}}{{if $i}}, {{end}}<code>{{$p}}</code>{{end}} · after: {{range $i, $p := .C.After}}{{if $i}}, {{end}}<code>{{$p}}</code>{{end}}</p>
{{range .C.Warnings}}<div class="warn">{{.}}</div>
{{end}}<table>
{{range $i, $r := .Rows}}{{if eq $i 0}}<tr>{{range $r}}<th>{{.}}</th>{{end}}</tr>{{else}}<tr class="{{index $r 7 | verdictClass}}">{{range $r}}<td>{{.}}</td>{{end}}</tr>{{end}}
{{end}}</table>
<p>{{range $i, $l := .Legend}}{{if $i}}<br>{{end}}{{$l}}{{end}}</p>
{{if .Notes}}<ul>{{range .Notes}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{if .C.Shape}}<h2>Shape</h2><ul>{{range .C.Shape}}<li>{{.Name}}: {{num .Before}} → {{num .After}}{{if .Note}} ({{.Note}}){{end}}</li>{{end}}</ul>{{end}}
{{range .Charts}}<figure id="{{.Name}}">{{.SVG}}<figcaption>{{.Caption}}</figcaption></figure>
{{end}}</body></html>
`))
