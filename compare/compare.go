package compare

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/perflab/perflab/analyzers"
)

// CompareSchema is the schema name of `perflab compare --format json`.
const CompareSchema = "perflab.compare/v1"

// DefaultAlpha is the significance level of comparisons and gate rules: 0.05.
const DefaultAlpha = 0.05

// Comparison is a before/after comparison: what `perflab compare` prints.
type Comparison struct {
	Schema   string         `json:"schema"`
	Before   []string       `json:"before"`
	After    []string       `json:"after"`
	Alpha    float64        `json:"alpha"`
	Metrics  []MetricChange `json:"metrics"`
	Shape    []ShapeChange  `json:"shape,omitempty"`
	Dists    []DistPair     `json:"distributions,omitempty"`
	Warnings []string       `json:"warnings"`
}

// MetricChange is one headline metric before and after.
type MetricChange struct {
	Name   string  `json:"name"`
	Unit   string  `json:"unit,omitempty"`
	Better string  `json:"better"` // "lower" or "higher"
	Before float64 `json:"before"`
	After  float64 `json:"after"`
	// Change is after/before − 1 (0.25 = +25%); +Inf is reported as null.
	Change *float64 `json:"change"`
	// CILow and CIHigh bound after/before − 1 at CILevel: a bootstrap of the metric's quantile
	// (or mean token time) for per-message samples, the interval of the U test (ratios of run
	// values) for runs.
	CILow  *float64 `json:"ci_low,omitempty"`
	CIHigh *float64 `json:"ci_high,omitempty"`
	// CILevel is the interval's confidence, 1 − alpha.
	CILevel float64 `json:"ci_level,omitempty"`
	// PValue is the two-sided p-value of Test, null when nothing was tested.
	PValue *float64 `json:"p_value"`
	// Verdict comes from the same test as PValue: "better" or "worse" when p < alpha, or
	// for an exact count that changed; else "~".
	Verdict string `json:"verdict"` // "better", "worse", "~"
	// VerdictNote says why there is no verdict: the samples are fewer than the test needs (MinN
	// per side), or a side's counts are lower bounds that could overturn the change.
	VerdictNote string `json:"verdict_note,omitempty"`
	MinN        int    `json:"min_n,omitempty"`
	N           [2]int `json:"n"`     // samples before and after
	Basis       string `json:"basis"` // what the samples are: "messages", "tokens", "runs", "counts", "none"
	// Test is what decided: "bootstrap" (of the metric's statistic, per-message or per-token
	// samples), "mann-whitney" (two-sided U test of run values), "exact" (a count identical in
	// every run of each side), "none".
	Test string `json:"test"`
	Note string `json:"note,omitempty"`
}

// ShapeChange is a change in the shape of a distribution: a mode's share or a tail.
type ShapeChange struct {
	Name   string  `json:"name"`
	Before float64 `json:"before"`
	After  float64 `json:"after"`
	Note   string  `json:"note,omitempty"`
}

// DistPair holds the before and after distributions of one latency, ready to draw: CDF points
// and a histogram on shared logarithmic buckets.
type DistPair struct {
	Name   string     `json:"name"` // sample name, "rtt_us"
	Before []CDFPoint `json:"before_cdf"`
	After  []CDFPoint `json:"after_cdf"`
	Hist   []HistPair `json:"histogram"`
	N      [2]int     `json:"n"`
}

// CDFPoint is P(X ≤ Value) = Frac.
type CDFPoint struct {
	Value float64 `json:"value"`
	Frac  float64 `json:"frac"`
}

// HistPair is one histogram bucket [LowUS, HighUS) with the share of each side in it (0..1).
type HistPair struct {
	LowUS  float64 `json:"low_us"`
	HighUS float64 `json:"high_us"`
	Before float64 `json:"before"`
	After  float64 `json:"after"`
}

// minCommandSamples is the fewest round trips of a command, per side, for its own rows.
const minCommandSamples = 5

// headline is the order metrics are reported in; others follow by name.
var headline = []string{MetricTokensPerS, MetricRequestsPerS, MetricMessages, MetricRoundTrips, MetricBytesSent, MetricBytesRecv,
	MetricRTTP50, MetricRTTP90, MetricRTTP99, "send_p50_us", "send_p99_us", "recv_p50_us", "recv_p99_us"}

func metricOrder(names []string) []string {
	rank := map[string]int{}
	for i, n := range headline {
		rank[n] = i + 1
	}
	sort.SliceStable(names, func(i, j int) bool {
		ri, rj := rank[names[i]], rank[names[j]]
		if ri == 0 {
			ri = len(headline) + 1
		}
		if rj == 0 {
			rj = len(headline) + 1
		}
		if ri != rj {
			return ri < rj
		}
		return names[i] < names[j]
	})
	return names
}

// runWarnings says, of every run of the sides, what makes its counts low: events lost, a
// damaged trace, messages pipelined past the captured payload heads.
func runWarnings(sides ...[]Run) []string {
	var out []string
	for _, side := range sides {
		for _, r := range side {
			if r.Lost > 0 {
				out = append(out, fmt.Sprintf("%s: trace lost %d events: counts are low", r.Path, r.Lost))
			}
			if r.Damage != "" {
				out = append(out, fmt.Sprintf("%s: damaged trace (%s)", r.Path, r.Damage))
			}
			if r.PastHead > 0 {
				out = append(out, fmt.Sprintf("%s: %d calls ran past their captured payload heads, with messages pipelined behind them that were not counted: its message, request and round-trip counts are lower bounds", r.Path, r.PastHead))
			}
		}
	}
	return out
}

// Compare compares the before runs with the after runs at significance alpha (0 means
// DefaultAlpha). A metric's samples are, in order of preference: per-message latencies (or
// per-token times) pooled over the runs of a side, when both sides are traces; the runs'
// values, when both sides have two runs or more; else none, and only exact counts get a
// verdict. Per-message samples of one run are not independent (a slow phase slows its
// neighbours), so their p-values are optimistic: the result says so in its warnings.
func Compare(before, after []Run, alpha float64) *Comparison {
	if alpha <= 0 || alpha >= 1 {
		alpha = DefaultAlpha
	}
	c := &Comparison{Schema: CompareSchema, Alpha: alpha, Warnings: []string{}}
	for _, r := range before {
		c.Before = append(c.Before, r.Path)
	}
	for _, r := range after {
		c.After = append(c.After, r.Path)
	}
	c.Warnings = append(c.Warnings, runWarnings(before, after)...)
	names := map[string]bool{}
	for _, r := range before {
		for k := range r.Metrics {
			if k != MetricLost && has(after, k) {
				names[k] = true
			}
		}
	}
	list := make([]string, 0, len(names))
	for k := range names {
		list = append(list, k)
	}
	usedMessages := false
	for _, name := range metricOrder(list) {
		m := compareMetric(name, before, after, alpha)
		m.bounded(before, after)
		if strings.Contains(name, "{") && (m.N[0] < minCommandSamples || m.N[1] < minCommandSamples) {
			continue // a command seen a few times (during load) says nothing per command
		}
		if m.Basis == "messages" {
			usedMessages = true
		}
		c.Metrics = append(c.Metrics, m)
	}
	if usedMessages {
		c.Warnings = append(c.Warnings, "latency p-values treat messages as independent samples; messages of one run are correlated, so confirm a small change with several runs per side")
	}
	c.Shape = shapeChanges(before, after)
	for _, s := range []string{"rtt_us", "send_us", "recv_us"} {
		x, y := pooled(before, s), pooled(after, s)
		if len(x) > 0 && len(y) > 0 {
			c.Dists = append(c.Dists, distPair(s, x, y))
		}
	}
	return c
}

func has(runs []Run, metric string) bool {
	for _, r := range runs {
		if _, ok := r.Metrics[metric]; !ok {
			return false
		}
	}
	return len(runs) > 0
}

func values(runs []Run, metric string) []float64 {
	v := make([]float64, 0, len(runs))
	for _, r := range runs {
		if x, ok := r.Metrics[metric]; ok {
			v = append(v, x)
		}
	}
	return v
}

func pooled(runs []Run, sample string) []float64 {
	var v []float64
	for _, r := range runs {
		s, ok := r.Samples[sample]
		if !ok {
			return nil
		}
		v = append(v, s...)
	}
	return v
}

func fptr(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func compareMetric(name string, before, after []Run, alpha float64) MetricChange {
	mi := Info(name)
	m := MetricChange{Name: name, Unit: mi.Unit, Better: "lower", Verdict: "~", Basis: "none", Test: "none"}
	if mi.Higher {
		m.Better = "higher"
	}
	bv, av := values(before, name), values(after, name)
	m.Before, m.After = median(bv), median(av)
	m.N = [2]int{len(bv), len(av)}
	if mi.Count && Exact(bv, mi.Whole) && Exact(av, mi.Whole) {
		// An exact count has no spread to test: it changed by exactly what was measured.
		m.Basis, m.Test = "counts", "exact"
		m.Change = fptr(ratio(m.After, m.Before) - 1)
		if m.After != m.Before {
			m.setVerdict(m.After > m.Before, mi.Higher)
		}
		m.Note = "exact count: the same in every run of each side, so it changed by exactly this (no test needed)"
		return m
	}
	var x, y []float64 // per-message or per-token samples
	if mi.Sample != "" {
		x, y = pooled(before, mi.Sample), pooled(after, mi.Sample)
	}
	switch {
	case len(x) > 0 && len(y) > 0:
		m.sampleChange(name, mi, x, y, alpha)
	case len(bv) > 0 && len(av) > 0:
		m.runsChange(bv, av, alpha, mi.Higher)
	default:
		m.Change = fptr(ratio(m.After, m.Before) - 1)
	}
	return m
}

// bounded keeps a verdict on a metric derived from message counts only where the counts that
// are lower bounds (messages pipelined past the captured payload heads, uncounted) cannot
// overturn it. A side's true value is at least what was counted, and at most that times its
// runs' CountsUpTo when known: a change beyond what the other side's bound allows (a count
// that grew to a lower bound, or fell from one, always is) keeps its verdict; any other may
// go either way, and gets none.
func (m *MetricChange) bounded(before, after []Run) {
	if !Info(m.Name).Counted {
		return
	}
	lowBefore, lowAfter := lowerBound(before), lowerBound(after)
	if !lowBefore && !lowAfter {
		return
	}
	side := "the after side's counts are"
	switch {
	case lowBefore && lowAfter:
		side = "both sides' counts are"
	case lowBefore:
		side = "the before side's counts are"
	}
	// With the most the counts may fall short (countsUpTo), a change beyond it stands: a rise
	// above what before's counts could be at most, a fall below what after's could be.
	upB, upA := upTo(before), upTo(after)
	grew, fell := m.After > m.Before*upB, m.After*upA < m.Before
	if grew || fell {
		if m.Verdict == "~" {
			return
		}
		bound, up, other := "before", upB, "after"
		if fell {
			bound, up, other = "after", upA, "before"
		}
		why := side + " lower bounds (messages pipelined past the captured payload heads), which can only widen this change"
		if up > 1 {
			why = fmt.Sprintf("messages past the captured payload heads could make %s's count at most %s higher, less than the change (%s's could only widen it)", bound, pctOver(up), other)
		}
		m.Note = strings.TrimPrefix(m.Note+"; ", "; ") + why
		return
	}
	if m.Verdict != "~" || m.VerdictNote == "" {
		m.VerdictNote = side + " lower bounds (messages pipelined past the captured payload heads, not counted): the true change may go either way"
	}
	m.Verdict = "~"
}

// upTo is the most by which the counts of runs may fall short, as a factor: 1 when they are
// exact, +Inf when unknown.
func upTo(runs []Run) float64 {
	f := 1.0
	for _, r := range runs {
		switch {
		case r.PastHead == 0:
		case r.CountsUpTo == nil:
			return math.Inf(1)
		default:
			f = max(f, *r.CountsUpTo)
		}
	}
	return f
}

// pctOver renders a factor above 1 as the percentage it adds: "0.08%".
func pctOver(f float64) string {
	p := 100 * (f - 1)
	if p >= 10 {
		return strconv.FormatFloat(p, 'f', 0, 64) + "%"
	}
	return strconv.FormatFloat(p, 'g', 2, 64) + "%"
}

// lowerBound reports whether any run's counts are lower bounds.
func lowerBound(runs []Run) bool {
	for _, r := range runs {
		if r.PastHead > 0 {
			return true
		}
	}
	return false
}

// setVerdict says whether the change is better or worse: afterLarger, for a metric where
// higher is better when higher is set.
func (m *MetricChange) setVerdict(afterLarger, higher bool) {
	if afterLarger == higher {
		m.Verdict = "better"
	} else {
		m.Verdict = "worse"
	}
}

// sampleChange tests the metric on the pooled per-message (or per-token) samples x before and
// y after: a bootstrap of the metric's statistic.
func (m *MetricChange) sampleChange(name string, mi MetricInfo, x, y []float64, alpha float64) {
	m.Basis, m.Test = "messages", "bootstrap"
	q := mi.Quantile
	if mi.Rate {
		// tokens/s is tokens over time: the ratio of mean token times, inverted (requests/s
		// likewise, of the gaps between requests).
		q = -1
		if name == MetricTokensPerS {
			m.Basis = "tokens"
		}
	} else {
		// The metric is the quantile of the pooled samples, so that value and interval agree.
		m.Before, m.After = quantile(x, mi.Quantile), quantile(y, mi.Quantile)
	}
	m.N = [2]int{len(x), len(y)}
	m.Change = fptr(ratio(m.After, m.Before) - 1)
	need := bootstrapMinN(q)
	if len(x) < need || len(y) < need {
		m.MinN = need
		m.VerdictNote = fmt.Sprintf("too few samples: a bootstrap of this statistic needs ≥ %d per side", need)
		return
	}
	lo, hi, p := BootstrapTest(x, y, q, alpha, TwoSided)
	if mi.Rate {
		lo, hi = 1/hi, 1/lo // token times → tokens/s
	}
	m.PValue = fptr(p)
	m.CILow, m.CIHigh = fptr(lo-1), fptr(hi-1)
	m.CILevel = 1 - alpha
	if p < alpha && m.Change != nil && *m.Change != 0 {
		m.setVerdict(*m.Change > 0, mi.Higher)
	}
}

// runsChange tests the metric on the runs' values bv before and av after: Mann-Whitney, with
// the interval of the ratio of shifts.
func (m *MetricChange) runsChange(bv, av []float64, alpha float64, higher bool) {
	m.Basis, m.Test = "runs", "mann-whitney"
	m.Change = fptr(ratio(m.After, m.Before) - 1)
	if MinPValue(len(bv), len(av), TwoSided) >= alpha {
		m.MinN = minRunsFor(alpha)
		m.VerdictNote = fmt.Sprintf("too few runs: the U test needs ≥ %d runs per side to reach p < %g", m.MinN, alpha)
		if len(bv) == 1 && len(av) == 1 {
			m.VerdictNote += " (or traces, for per-message samples)"
		}
		return
	}
	u, p := MannWhitney(bv, av, TwoSided)
	m.PValue = fptr(p)
	lo, hi := ShiftRatioCI(bv, av, alpha)
	m.CILow, m.CIHigh = fptr(lo-1), fptr(hi-1)
	m.CILevel = 1 - alpha
	if p < alpha {
		// U counts before > after pairs: above half of them, after is the smaller side.
		m.setVerdict(u < float64(len(bv)*len(av))/2, higher)
	}
}

// Exact reports whether a count is known exactly from v, the values of one side's runs: every
// run gives the same value, and, a single run being no evidence of spread, whole (a count of
// messages per unit that is a whole number, as it is when every unit has the same count).
func Exact(v []float64, whole bool) bool {
	if len(v) == 0 || !allEqual(v) {
		return false
	}
	return len(v) > 1 || (whole && v[0] == math.Trunc(v[0]))
}

// minRunsFor returns the fewest runs per side with which a two-sided U test can reach p < alpha.
func minRunsFor(alpha float64) int {
	n := 1
	for MinPValue(n, n, TwoSided) >= alpha && n < 100 {
		n++
	}
	return n
}

func allEqual(v []float64) bool {
	for _, x := range v {
		if x != v[0] {
			return false
		}
	}
	return true
}

func ratio(a, b float64) float64 {
	if b == 0 {
		if a == 0 {
			return 1
		}
		return math.Inf(1)
	}
	return a / b
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	return quantile(v, 0.5)
}

// shapeChanges reports the modes of the round-trip latency and the tail weight p99/p50.
func shapeChanges(before, after []Run) []ShapeChange {
	var out []ShapeChange
	if len(before) == 1 && len(after) == 1 {
		b, a := before[0].Modes, after[0].Modes
		if len(b) > 0 || len(a) > 0 {
			out = append(out, ShapeChange{Name: "modes", Before: float64(len(b)), After: float64(len(a)), Note: modesNote(b, a)})
		}
	}
	for _, s := range []string{"rtt", "send", "recv"} {
		var tb, ta float64
		x, y := pooled(before, s+"_us"), pooled(after, s+"_us")
		p50, p99 := s+"_p50_us", s+"_p99_us"
		switch {
		case len(x) > 0 && len(y) > 0:
			tb = ratio(quantile(x, 0.99), quantile(x, 0.5))
			ta = ratio(quantile(y, 0.99), quantile(y, 0.5))
		case has(before, p50) && has(after, p50) && has(before, p99) && has(after, p99):
			tb = ratio(median(values(before, p99)), median(values(before, p50)))
			ta = ratio(median(values(after, p99)), median(values(after, p50)))
		default:
			continue
		}
		if math.IsInf(tb, 0) || math.IsInf(ta, 0) {
			continue
		}
		note := "tail unchanged"
		switch {
		case ta > tb*1.25:
			note = "heavier tail"
		case ta < tb/1.25:
			note = "lighter tail"
		}
		out = append(out, ShapeChange{Name: s + " p99/p50", Before: tb, After: ta, Note: note})
	}
	return out
}

func modesNote(b, a []analyzers.Mode) string {
	f := func(ms []analyzers.Mode) string {
		if len(ms) == 0 {
			return "none"
		}
		parts := make([]string, len(ms))
		for i, m := range ms {
			parts[i] = fmt.Sprintf("%.3g µs (%.0f%%)", m.CenterUS, 100*m.Share)
		}
		return strings.Join(parts, ", ")
	}
	return "before: " + f(b) + "; after: " + f(a)
}

// cdfPoints is the number of points of a drawn CDF.
const cdfPoints = 100

// histBuckets is the number of shared log buckets of a drawn histogram.
const histBuckets = 30

func distPair(name string, x, y []float64) DistPair {
	xs := append([]float64(nil), x...)
	ys := append([]float64(nil), y...)
	sort.Float64s(xs)
	sort.Float64s(ys)
	d := DistPair{Name: name, Before: cdf(xs), After: cdf(ys), N: [2]int{len(xs), len(ys)}}
	lo := math.Min(xs[0], ys[0])
	hi := math.Max(xs[len(xs)-1], ys[len(ys)-1])
	if lo <= 0 {
		lo = 0.1
	}
	if hi <= lo {
		hi = lo * 2
	}
	step := math.Log(hi/lo) / histBuckets
	for i := 0; i < histBuckets; i++ {
		d.Hist = append(d.Hist, HistPair{LowUS: lo * math.Exp(step*float64(i)), HighUS: lo * math.Exp(step*float64(i+1))})
	}
	fill := func(s []float64, set func(h *HistPair, v float64)) {
		counts := make([]float64, histBuckets)
		for _, v := range s {
			i := 0
			if v > lo {
				i = int(math.Log(v/lo) / step)
			}
			if i >= histBuckets {
				i = histBuckets - 1
			}
			counts[i]++
		}
		for i := range d.Hist {
			set(&d.Hist[i], counts[i]/float64(len(s)))
		}
	}
	fill(xs, func(h *HistPair, v float64) { h.Before = v })
	fill(ys, func(h *HistPair, v float64) { h.After = v })
	return d
}

func cdf(s []float64) []CDFPoint {
	n := cdfPoints
	if len(s) < n {
		n = len(s)
	}
	out := make([]CDFPoint, n)
	for i := range out {
		f := float64(i+1) / float64(n)
		out[i] = CDFPoint{Value: quantileSorted(s, f), Frac: f}
	}
	return out
}
