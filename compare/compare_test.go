package compare

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/perflab/perflab/analyzers"
)

// traceRun makes a run that looks like an analysed trace: per-message round trips scattered
// around rtt, per-token times around token, and the metrics that go with them.
func traceRun(seed uint64, path string, rtt, token, msgs float64) Run {
	rng := rand.New(rand.NewPCG(seed, 3))
	r := Run{Path: path, Kind: "trace", Metrics: map[string]float64{}, Samples: map[string][]float64{}}
	for i := 0; i < 400; i++ {
		r.Samples["rtt_us"] = append(r.Samples["rtt_us"], rtt*(1+0.1*rng.ExpFloat64()))
	}
	for i := 0; i < 50; i++ {
		r.Samples["token_us"] = append(r.Samples["token_us"], token*(1+0.05*rng.NormFloat64()))
	}
	r.Metrics[MetricTokensPerS] = 1e6 / token
	r.Metrics[MetricMessages] = msgs
	r.Metrics[MetricRTTP50] = quantile(r.Samples["rtt_us"], 0.5)
	r.Metrics[MetricRTTP99] = quantile(r.Samples["rtt_us"], 0.99)
	r.Modes = []analyzers.Mode{{CenterUS: rtt, Share: 1}}
	return r
}

func TestCompare(t *testing.T) {
	before := []Run{traceRun(1, "base.plt", 100, 2000, 40)}
	after := []Run{traceRun(2, "coalesce.plt", 130, 1000, 10)}
	c := Compare(before, after, 0)
	got := map[string]MetricChange{}
	for _, m := range c.Metrics {
		got[m.Name] = m
	}
	want := map[string]string{MetricTokensPerS: "better", MetricMessages: "better", MetricRTTP50: "worse", MetricRTTP99: "worse"}
	for name, v := range want {
		m, ok := got[name]
		if !ok {
			t.Errorf("metric %s missing", name)
			continue
		}
		if m.Verdict != v {
			t.Errorf("%s: %s (p=%v), want %s", name, m.Verdict, m.PValue, v)
		}
	}
	if m := got[MetricTokensPerS]; m.Basis != "tokens" || m.CILow == nil || *m.CILow < 0.8 || *m.CIHigh > 1.2 {
		t.Errorf("tokens/s: basis %s CI [%v, %v], want tokens and around +100%%", m.Basis, m.CILow, m.CIHigh)
	}
	if c.Metrics[0].Name != MetricTokensPerS {
		t.Errorf("first metric %s, want tokens_per_s", c.Metrics[0].Name)
	}
	if len(c.Dists) != 1 || len(c.Dists[0].Before) != cdfPoints || len(c.Dists[0].Hist) != histBuckets {
		t.Errorf("distributions: %+v", c.Dists)
	}
	// A/A: nothing changes.
	aa := Compare(before, []Run{traceRun(3, "again.plt", 100, 2000, 40)}, 0)
	for _, m := range aa.Metrics {
		if m.Verdict != "~" {
			t.Errorf("A/A %s: %s (p=%v)", m.Name, m.Verdict, *m.PValue)
		}
	}
	if again := Compare(before, after, 0); !reflect.DeepEqual(c, again) {
		t.Error("same inputs gave a different comparison")
	}
}

func TestCompareSummariesOnly(t *testing.T) {
	b := Run{Path: "a.json", Metrics: map[string]float64{MetricTokensPerS: 100, MetricMessages: 40, MetricRTTP50: 50}}
	a := Run{Path: "b.json", Metrics: map[string]float64{MetricTokensPerS: 150, MetricMessages: 10, MetricRTTP50: 50}}
	c := Compare([]Run{b}, []Run{a}, 0)
	for _, m := range c.Metrics {
		want := "~"
		if m.Name == MetricMessages {
			want = "better"
		}
		if m.Verdict != want || m.PValue != nil {
			t.Errorf("%s: %s p=%v, want %s and no p", m.Name, m.Verdict, m.PValue, want)
		}
	}
}

// TestCompareVerdictFromTest: the verdict comes from the test that gives p; below the samples
// a test needs there is no verdict, and the result says why; exact counts need no test.
func TestCompareVerdictFromTest(t *testing.T) {
	runs := func(vals ...float64) []Run {
		out := make([]Run, len(vals))
		for i, v := range vals {
			out[i] = Run{Path: fmt.Sprint(i), Metrics: map[string]float64{MetricTokensPerS: v, MetricBytesSent: v * 10.1, MetricMessages: 8}}
		}
		return out
	}
	get := func(c *Comparison, name string) MetricChange {
		for _, m := range c.Metrics {
			if m.Name == name {
				return m
			}
		}
		t.Fatalf("no metric %s", name)
		return MetricChange{}
	}
	// n = 1/1, -0.1%: no verdict, and it says so.
	c := Compare(runs(100), runs(99.9), 0)
	if m := get(c, MetricTokensPerS); m.Verdict != "~" || m.PValue != nil || m.MinN != 4 || !strings.Contains(m.VerdictNote, "too few runs") {
		t.Errorf("1/1: %+v, want ~ with a note asking for 4 runs", m)
	}
	if m := get(c, MetricBytesSent); m.Verdict != "~" || m.Test == "exact" {
		t.Errorf("1/1 fractional bytes per token: %s test %s, want ~ (not known exact)", m.Verdict, m.Test)
	}
	// Exact counts: the measured change, no p-value.
	c = Compare(runs(100, 101, 99), func() []Run {
		r := runs(100, 101, 99)
		r[0].Metrics[MetricMessages] = 9
		r[1].Metrics[MetricMessages] = 9
		r[2].Metrics[MetricMessages] = 9
		return r
	}(), 0)
	if m := get(c, MetricMessages); m.Verdict != "worse" || m.PValue != nil || m.Test != "exact" || *m.Change != 0.125 {
		t.Errorf("exact 8 → 9: %+v", m)
	}
	// 3/3 runs: the U test cannot reach 0.05.
	if m := get(Compare(runs(100, 101, 99), runs(50, 51, 49), 0), MetricTokensPerS); m.Verdict != "~" || m.MinN != 4 {
		t.Errorf("3/3: %+v, want too few", m)
	}
	// 6/6 runs, halved: p and verdict agree, and the interval leaves 0 out.
	m := get(Compare(runs(100, 101, 99, 102, 98, 100.5), runs(50, 51, 49, 50.5, 49.5, 52), 0), MetricTokensPerS)
	if m.Verdict != "worse" || m.PValue == nil || *m.PValue >= 0.05 || m.CIHigh == nil || *m.CIHigh >= 0 || m.Test != "mann-whitney" {
		t.Errorf("6/6 halved: %+v", m)
	}
	// Every verdict agrees with its p.
	for _, seed := range []uint64{1, 2, 3} {
		c := Compare([]Run{traceRun(seed, "a", 100, 2000, 40)}, []Run{traceRun(seed+10, "b", 104, 2050, 40)}, 0)
		for _, m := range c.Metrics {
			if m.PValue != nil && (*m.PValue < c.Alpha) != (m.Verdict != "~") {
				t.Errorf("%s: p=%g but verdict %s", m.Name, *m.PValue, m.Verdict)
			}
			if m.PValue != nil && m.CILow != nil && (*m.PValue < c.Alpha) == (*m.CILow <= 0 && *m.CIHigh >= 0) && math.Abs(*m.PValue-c.Alpha) > 0.01 {
				t.Errorf("%s: p=%g but interval [%g, %g]", m.Name, *m.PValue, *m.CILow, *m.CIHigh)
			}
		}
	}
}

func TestShiftRatioCI(t *testing.T) {
	x := []float64{10, 11, 12, 13, 14, 15}
	y := []float64{20, 22, 24, 26, 28, 30}
	lo, hi := ShiftRatioCI(x, y, 0.05)
	if !(lo > 1.3 && hi < 3 && lo < 2 && hi > 2) {
		t.Errorf("doubling: [%g, %g], want around 2", lo, hi)
	}
	if lo, _ := ShiftRatioCI(x[:3], y[:3], 0.05); !math.IsNaN(lo) {
		t.Errorf("3/3 at 0.05: %g, want no interval", lo)
	}
	// The interval's critical count agrees with the exact test: 4/4 → C = 1.
	if c := uCritical(4, 4, 0.025); c != 1 {
		t.Errorf("uCritical(4,4) = %d, want 1", c)
	}
	if c := uCritical(10, 10, 0.025); c != 24 {
		t.Errorf("uCritical(10,10) = %d, want 24 (tables: U ≤ 23 rejects)", c)
	}
}

// TestRunWarnings: a run whose counts are low (events lost, a damaged trace, messages
// pipelined past the payload heads) is named in compare's and gate's warnings, and a baseline
// keeps what makes it so.
func TestRunWarnings(t *testing.T) {
	low := Run{Path: "p16.plt", Metrics: map[string]float64{MetricMessages: 40}, Lost: 3, Damage: "cut", PastHead: 5001}
	ok := Run{Path: "p1.plt", Metrics: map[string]float64{MetricMessages: 40}}
	for _, c := range []struct {
		name string
		warn []string
	}{
		{"compare", Compare([]Run{ok}, []Run{low}, 0).Warnings},
		{"gate", Gate([]Run{low}, []Run{ok}, nil).Warnings},
	} {
		all := strings.Join(c.warn, "\n")
		for _, want := range []string{"p16.plt: trace lost 3 events", "p16.plt: damaged trace (cut)", "p16.plt: 5001 calls ran past their captured payload heads"} {
			if !strings.Contains(all, want) {
				t.Errorf("%s: no %q in %q", c.name, want, c.warn)
			}
		}
		if strings.Contains(all, "p1.plt:") {
			t.Errorf("%s: warns about the run whose counts are whole: %q", c.name, c.warn)
		}
	}
	// From analyze: RESP values past the heads, or text messages past them with replies to
	// requests not seen, make the counts lower bounds; text messages past the heads alone do
	// not (without pipelining their counts are exact).
	for _, c := range []struct {
		past, blind, unpaired, want uint64
	}{{5001, 0, 0, 5001}, {0, 100, 100, 100}, {0, 6000, 0, 0}} {
		s := &analyzers.Summary{CallsPastHead: c.past, CallsBlind: c.blind}
		s.RoundTrips.Unpaired = c.unpaired
		if c.past > 0 { // the bytes past the heads bound what was not counted
			s.BytesPastHead, s.RoundTrips.Count = 30, 2000
			s.Commands = []analyzers.CmdStats{{Name: "GET", Direction: "send", Kind: "request", Count: 1000}}
			if up := RunFromSummary("x.plt", "trace", s).CountsUpTo; up == nil || *up != 1+10.0/1000 {
				t.Errorf("counts up to %v, want 1.01 (10 values of 3 bytes, against 1000 requests)", up)
			}
		}
		if got := RunFromSummary("x.plt", "trace", s).PastHead; got != c.want {
			t.Errorf("calls past the head %d, blind %d, unpaired %d: PastHead %d, want %d", c.past, c.blind, c.unpaired, got, c.want)
		}
	}
	b, err := MarshalBaseline([]Run{low}, false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"calls_past_head": 5001`) {
		t.Errorf("the baseline forgets the calls past the heads:\n%s", b)
	}
}

// TestCompareLowerBounds: a metric counted from messages is a lower bound in a run whose
// messages were pipelined past the captured payload heads. A verdict stands only where the
// bound cannot overturn it: a count that grew to a lower bound, or fell from one, grew or fell
// at least as much; the other way it could go either way, and gets none.
func TestCompareLowerBounds(t *testing.T) {
	run := func(v float64, past uint64) []Run {
		return []Run{{Path: "r", Metrics: map[string]float64{MetricRoundTrips: v, MetricBytesSent: v * 100}, PastHead: past}}
	}
	for _, c := range []struct {
		name          string
		before, after []Run
		verdict, note string
	}{
		{"exact both ways", run(10, 0), run(8, 0), "better", ""},
		{"fell to a lower bound", run(10, 0), run(8, 50), "~", "the after side's counts are lower bounds"},
		{"grew to a lower bound", run(10, 0), run(12, 50), "worse", ""},
		{"fell from a lower bound", run(10, 50), run(8, 0), "better", ""},
		{"grew from a lower bound", run(10, 50), run(12, 0), "~", "the before side's counts are lower bounds"},
		{"both lower bounds", run(10, 50), run(8, 50), "~", "both sides' counts are lower bounds"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmp := Compare(c.before, c.after, 0)
			for _, m := range cmp.Metrics {
				switch m.Name {
				case MetricRoundTrips:
					if m.Verdict != c.verdict || !strings.Contains(m.VerdictNote, c.note) || (c.note == "") != (m.VerdictNote == "") {
						t.Errorf("round trips per token: %s (%q), want %s (%q)", m.Verdict, m.VerdictNote, c.verdict, c.note)
					}
				case MetricBytesSent: // bytes come from the calls, whole whatever the heads
					if strings.Contains(m.VerdictNote, "lower bounds") || strings.Contains(m.Note, "lower bounds") {
						t.Errorf("bytes per token said to be lower bounds: %+v", m)
					}
				}
			}
		})
	}
}

// TestCompareRequestsPerS: without units of work, the requests per second of a trace are
// compared on the gaps between requests (their mean, inverted), as tokens/s on token times.
func TestCompareRequestsPerS(t *testing.T) {
	run := func(seed uint64, gap float64) Run {
		rng := rand.New(rand.NewPCG(seed, 7))
		r := Run{Path: fmt.Sprint(seed), Metrics: map[string]float64{}, Samples: map[string][]float64{}}
		var sum float64
		for i := 0; i < 500; i++ {
			g := gap * (0.5 + rng.Float64())
			r.Samples["request_gap_us"] = append(r.Samples["request_gap_us"], g)
			sum += g
		}
		r.Metrics[MetricRequestsPerS] = 500 / (sum / 1e6)
		return r
	}
	for _, c := range []struct {
		name    string
		after   Run
		verdict string
	}{{"twice the rate", run(2, 50), "better"}, {"the same", run(3, 100), "~"}, {"half", run(4, 200), "worse"}} {
		cmp := Compare([]Run{run(1, 100)}, []Run{c.after}, 0)
		if len(cmp.Metrics) != 1 || cmp.Metrics[0].Name != MetricRequestsPerS {
			t.Fatalf("%s: metrics %+v", c.name, cmp.Metrics)
		}
		m := cmp.Metrics[0]
		if m.Verdict != c.verdict || m.Basis != "messages" || m.PValue == nil || m.Better != "higher" {
			t.Errorf("%s: %s basis %s p %v, want %s on messages", c.name, m.Verdict, m.Basis, m.PValue, c.verdict)
		}
	}
}

// TestCompareBoundedCounts: when the bytes past the heads bound the messages not counted
// (Run.CountsUpTo), a change larger than that bound keeps its verdict; a smaller one does not.
func TestCompareBoundedCounts(t *testing.T) {
	run := func(v float64, past uint64, up float64) []Run {
		r := Run{Path: "r", Metrics: map[string]float64{MetricRoundTrips: v}, PastHead: past}
		if up > 0 {
			r.CountsUpTo = &up
		}
		return []Run{r}
	}
	for _, c := range []struct {
		name          string
		before, after []Run
		verdict, note string
	}{
		{"grew beyond before's bound", run(10, 1, 1.001), run(12, 0, 0), "worse", "at most 0.1% higher"},
		{"grew within before's bound", run(10, 1, 1.5), run(12, 0, 0), "~", ""},
		{"fell below after's bound", run(10, 0, 0), run(8, 1, 1.01), "better", "at most 1% higher"},
		{"fell within after's bound", run(10, 0, 0), run(8, 1, 1.5), "~", ""},
		{"bound unknown", run(10, 0, 0), run(8, 1, 0), "~", ""},
	} {
		cmp := Compare(c.before, c.after, 0)
		m := cmp.Metrics[0]
		if m.Verdict != c.verdict || !strings.Contains(m.Note, c.note) || c.verdict == "~" && !strings.Contains(m.VerdictNote, "lower bounds") {
			t.Errorf("%s: %s (note %q, verdict note %q), want %s (%q)", c.name, m.Verdict, m.Note, m.VerdictNote, c.verdict, c.note)
		}
	}
}
