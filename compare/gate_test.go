package compare

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/perflab/perflab/analyzers"
)

// synthRuns makes n runs whose metrics scatter around the given centres with relative noise cv.
func synthRuns(seed uint64, n int, cv float64, centres map[string]float64) []Run {
	rng := rand.New(rand.NewPCG(seed, 7))
	runs := make([]Run, n)
	for i := range runs {
		m := map[string]float64{}
		keys := make([]string, 0, len(centres))
		for k := range centres {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			m[k] = centres[k] * (1 + cv*rng.NormFloat64())
		}
		m[MetricLost] = 0
		runs[i] = Run{Path: "run" + string(rune('a'+i%26)), Kind: "venus-run", Metrics: m}
	}
	return runs
}

var centre = map[string]float64{MetricTokensPerS: 500, MetricRTTP50: 100, MetricRTTP99: 180, MetricMessages: 40}

func scaled(c map[string]float64, rtt float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range c {
		out[k] = v
	}
	out[MetricRTTP50] *= rtt
	out[MetricRTTP99] *= rtt
	out[MetricTokensPerS] /= rtt
	return out
}

func TestGateVerdicts(t *testing.T) {
	tests := []struct {
		name     string
		base     []Run
		cur      []Run
		want     string
		ruleWant map[string]string
		detail   string
	}{
		{"A/A", synthRuns(1, 10, 0.02, centre), synthRuns(2, 10, 0.02, centre), "pass", nil, ""},
		{"+20% latency", synthRuns(1, 10, 0.02, centre), synthRuns(3, 10, 0.02, scaled(centre, 1.2)), "regression",
			map[string]string{MetricRTTP50: "regression", MetricTokensPerS: "regression", MetricMessages: "pass"}, ""},
		{"n=5 is never a regression", synthRuns(1, 5, 0.01, centre), synthRuns(3, 5, 0.01, scaled(centre, 2)), "inconclusive",
			map[string]string{MetricRTTP50: "inconclusive"}, "need ≥ 6 runs per side, have 5 baseline and 5 current"},
		{"noise ceiling", synthRuns(1, 10, 0.25, centre), synthRuns(3, 10, 0.25, centre), "inconclusive",
			map[string]string{MetricRTTP50: "inconclusive"}, "too noisy: robust CV baseline"},
		{"better is a pass", synthRuns(1, 8, 0.02, centre), synthRuns(3, 8, 0.02, scaled(centre, 0.5)), "pass", nil, ""},
		{"one more message per token", synthRuns(1, 8, 0, centre), synthRuns(3, 8, 0, map[string]float64{MetricTokensPerS: 500, MetricRTTP50: 100, MetricRTTP99: 180, MetricMessages: 42}), "regression",
			map[string]string{MetricMessages: "regression"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Gate(tc.base, tc.cur, DefaultGateConfig())
			if r.Verdict != tc.want {
				t.Errorf("verdict %s, want %s; rules: %+v", r.Verdict, tc.want, r.Rules)
			}
			found := tc.detail == ""
			for _, rr := range r.Rules {
				if w, ok := tc.ruleWant[rr.Metric]; ok && rr.Verdict != w {
					t.Errorf("rule %s: %s (%s), want %s", rr.Metric, rr.Verdict, rr.Detail, w)
				}
				if tc.detail != "" && strings.Contains(rr.Detail, tc.detail) {
					found = true
				}
				if rr.Detail == "" {
					t.Errorf("rule %s has no detail", rr.Metric)
				}
			}
			if !found {
				t.Errorf("no rule detail mentions %q", tc.detail)
			}
			if again := Gate(tc.base, tc.cur, DefaultGateConfig()); !reflect.DeepEqual(r, again) {
				t.Error("same inputs gave a different result")
			}
		})
	}
}

// TestGateSampleSizeFloor is E3: with n < 6 per side no change, however large, is a regression.
func TestGateSampleSizeFloor(t *testing.T) {
	for _, n := range []int{3, 5, 6, 10} {
		base := synthRuns(10, n, 0.01, centre)
		cur := synthRuns(11, n, 0.01, scaled(centre, 3))
		r := Gate(base, cur, DefaultGateConfig())
		want := "regression"
		if n < DefaultMinSamples {
			want = "inconclusive"
		}
		if r.Verdict != want {
			t.Errorf("n=%d: %s, want %s", n, r.Verdict, want)
		}
	}
}

// TestGateFalseAlarms is E1 on synthetic data: A/A gates with 2% noise on the timed metrics
// and exact message counts. With allowances, no metric may alarm in more than 1% of gates; a
// noisy metric gated with no allowance at all stays under the suite's 5% (Holm).
func TestGateFalseAlarms(t *testing.T) {
	const gates = 400
	exact := func(runs []Run) []Run {
		for _, r := range runs {
			r.Metrics[MetricMessages] = 40
		}
		return runs
	}
	perMetric := map[string]int{}
	suite := 0
	strict := DefaultGateConfig()
	strict.Rules = append(strict.Rules, Rule{Metric: "rtt_p90_us", Direction: "lower"})
	noisy := map[string]float64{MetricTokensPerS: 500, MetricRTTP50: 100, MetricRTTP99: 180, "rtt_p90_us": 150}
	for i := uint64(0); i < gates; i++ {
		r := Gate(exact(synthRuns(100+2*i, 10, 0.02, centre)), exact(synthRuns(101+2*i, 10, 0.02, centre)), DefaultGateConfig())
		for _, rr := range r.Rules {
			if rr.Verdict == "regression" {
				perMetric[rr.Metric]++
				t.Logf("false alarm %d: %s: %s", i, rr.Metric, rr.Detail)
			}
		}
		if Gate(synthRuns(5000+2*i, 10, 0.02, noisy), synthRuns(5001+2*i, 10, 0.02, noisy), strict).Verdict == "regression" {
			suite++
		}
	}
	for m, n := range perMetric {
		if n > gates/100 {
			t.Errorf("%s alarmed in %d of %d A/A gates, want ≤ 1%%", m, n, gates)
		}
	}
	if suite > gates/20 {
		t.Errorf("a suite with a zero-allowance noisy rule alarmed in %d of %d A/A gates, want ≤ 5%%", suite, gates)
	}
	t.Logf("per-metric alarms %v; zero-allowance suite alarms %d of %d", perMetric, suite, gates)
}

func TestCheckInputs(t *testing.T) {
	runs := synthRuns(1, 6, 0, centre)
	runs[3].Lost, runs[3].Path = 17, "cut.plt"
	cfg := DefaultGateConfig()
	err := CheckInputs(runs, cfg)
	var bad *BadInputError
	if !errors.As(err, &bad) || !strings.Contains(err.Error(), "cut.plt: trace lost 17 events") {
		t.Fatalf("lost events: %v, want a BadInputError naming the file", err)
	}
	cfg.AllowLost = true
	if err := CheckInputs(runs, cfg); err != nil {
		t.Fatalf("allow_lost: %v", err)
	}
	runs[3].Metrics[MetricLost] = 17
	if r := Gate(synthRuns(2, 6, 0, centre), runs, cfg); r.Verdict != "regression" {
		t.Errorf("lost events allowed in: verdict %s, want the lost rule to fail", r.Verdict)
	}
	runs[3].Lost = 0
	runs[2].Damage = "3 chunks read, 1 bad"
	if err := CheckInputs(runs, DefaultGateConfig()); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("damaged trace: %v", err)
	}
}

func TestParseGateConfig(t *testing.T) {
	good := `# perflab's own gate
alpha 0.01
min_samples 8
max_cv 5%
min_effect 0.03
allow_lost yes
on_inconclusive fail
rule tokens_per_s higher 15% alpha=0.02
rule messages_per_token lower 0
rule lost zero
`
	c, err := ParseGateConfig(strings.NewReader(good), "gate.conf")
	if err != nil {
		t.Fatal(err)
	}
	want := &GateConfig{Alpha: 0.01, MinSamples: 8, MaxCV: 0.05, MinEffect: 0.03, FewRunsMargin: DefaultFewRunsMargin, AllowLost: true, OnInconclusive: "fail",
		Rules: []Rule{{Metric: MetricTokensPerS, Direction: "higher", Allowed: 0.15, Alpha: 0.02}, {Metric: MetricMessages, Direction: "lower"}, {Metric: MetricLost, Direction: "zero"}}}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("config = %+v\nwant %+v", c, want)
	}
	for _, tc := range []struct{ in, msg string }{
		{"alpha 2", "gate.conf:1: alpha must be in (0, 1)"},
		{"min_samples 5", "min_samples must be an integer ≥ 6"},
		{"\n\nrule x sideways 1%", "gate.conf:3: direction must be lower, higher or zero"},
		{"rule x lower", "needs an allowed change"},
		{"rule x lower 5% beta=1", "beta must be in (0, 1)"},
		{"colour blue", "unknown setting"},
		{"allow_lost maybe", "want yes or no"},
	} {
		_, err := ParseGateConfig(strings.NewReader(tc.in), "gate.conf")
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%q: %v, want %q", tc.in, err, tc.msg)
		}
	}
	c, err = ParseGateConfig(strings.NewReader("alpha 0.05\n"), "x")
	if err != nil || len(c.Rules) != len(DefaultGateConfig().Rules) {
		t.Errorf("no rules: %v %+v, want the default rules", err, c)
	}
}

func TestRatiosAndBaseline(t *testing.T) {
	a := synthRuns(1, 3, 0, map[string]float64{MetricTokensPerS: 100})
	b := synthRuns(2, 3, 0, map[string]float64{MetricTokensPerS: 250})
	r, err := Ratios(b, a)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(r[0].Metrics[MetricTokensPerS]-2.5) > 1e-12 {
		t.Errorf("ratio %g, want 2.5", r[0].Metrics[MetricTokensPerS])
	}
	if _, err := Ratios(b, a[:2]); err == nil {
		t.Error("unpaired runs: want an error")
	}
	data, err := MarshalBaseline(r, true)
	if err != nil {
		t.Fatal(err)
	}
	back, rel, err := parseRuns("base.json", data)
	if err != nil || !rel || len(back) != 3 || back[1].Metrics[MetricTokensPerS] != r[1].Metrics[MetricTokensPerS] {
		t.Errorf("baseline round trip: %v rel=%v %+v", err, rel, back)
	}
}

func TestParseRuns(t *testing.T) {
	venus := `{"schema":"perflab.venus.run/v1","mode":"baseline","tokens":64,"tokens_per_s":812.5,"per_token":{"frames":48,"round_trips":24,"bytes_sent":9000,"bytes_recv":4000}}
{"schema":"perflab.venus.run/v1","mode":"baseline","tokens":64,"tokens_per_s":799,"per_token":{"frames":48,"round_trips":24,"bytes_sent":9000,"bytes_recv":4000}}
`
	runs, _, err := parseRuns("runs.jsonl", []byte(venus))
	if err != nil || len(runs) != 2 || runs[1].Metrics[MetricTokensPerS] != 799 || runs[0].Metrics[MetricMessages] != 48 || runs[0].Path != "runs.jsonl#1" {
		t.Fatalf("venus runs: %v %+v", err, runs)
	}
	for _, tc := range []struct{ in, msg string }{
		{`{"schema":"other/v1"}`, "schema \"other/v1\" is none of"},
		{`{"schema":"perflab.venus.run/v1"}`, "no tokens_per_s"},
		{`{"schema":"perflab.venus.run/v1","tokens_per_s":-1}`, "metric tokens_per_s is -1"},
		{`{"schema":`, "unexpected EOF"},
	} {
		if _, _, err := parseRuns("x.json", []byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want %q", tc.in, err, tc.msg)
		}
	}
}

func FuzzParseRuns(f *testing.F) {
	f.Add([]byte(`{"schema":"perflab.venus.run/v1","tokens_per_s":1,"per_token":{"frames":2}}`))
	f.Add([]byte(`{"schema":"perflab.gate.baseline/v1","relative":true,"runs":[{"path":"a","metrics":{"tokens_per_s":2}}]}`))
	f.Add([]byte(`{"schema":"perflab.analyze/v1","units":[{"name":"token","count":3,"units_per_s":10}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		runs, _, err := parseRuns("fuzz", data)
		if err != nil && runs != nil {
			t.Fatal("error with runs")
		}
		if err == nil {
			Gate(runs, runs, DefaultGateConfig())
			Compare(runs, runs, 0)
		}
	})
}

func FuzzParseGateConfig(f *testing.F) {
	f.Add("alpha 0.05\nrule tokens_per_s higher 10%\n")
	f.Add("rule lost zero\nallow_lost yes\n")
	f.Add("max_cv 3%\nmin_samples 10\nrule rtt_p99_us lower 0.2 alpha=0.01 max_cv=5%\n")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseGateConfig(strings.NewReader(s), "fuzz")
		if (err == nil) != (c != nil) {
			t.Fatal("config and error disagree")
		}
	})
}

// TestGatePower is E2 on synthetic data: with 2% run-to-run noise, 10 runs per side and a rule
// that allows no change (minimum effect 2%), +10% is caught in ≥ 95% of gates and +5% in ≥ 80%.
func TestGatePower(t *testing.T) {
	cfg, err := ParseGateConfig(strings.NewReader("rule rtt_p50_us lower 0%\n"), "power.conf")
	if err != nil {
		t.Fatal(err)
	}
	base := map[string]float64{MetricRTTP50: 100}
	for _, tc := range []struct {
		shift float64
		want  int // of 100
	}{{1.10, 95}, {1.05, 80}} {
		caught := 0
		for i := uint64(0); i < 100; i++ {
			r := Gate(synthRuns(7000+2*i, 10, 0.02, base), synthRuns(7001+2*i, 10, 0.02, map[string]float64{MetricRTTP50: 100 * tc.shift}), cfg)
			if r.Verdict == "regression" {
				caught++
			}
		}
		t.Logf("+%.0f%%: %d of 100 caught", 100*(tc.shift-1), caught)
		if caught < tc.want {
			t.Errorf("+%.0f%%: %d of 100 caught, want ≥ %d", 100*(tc.shift-1), caught, tc.want)
		}
	}
}

func BenchmarkMannWhitney(b *testing.B) {
	for _, n := range []int{10, 1000, 100000} {
		x, y := make([]float64, n), make([]float64, n)
		for i := range x {
			x[i], y[i] = float64(i%997), float64(i%991)+0.5
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				MannWhitney(x, y, TwoSided)
			}
		})
	}
}

func BenchmarkBootstrapRatio(b *testing.B) {
	x, y := make([]float64, 100000), make([]float64, 100000)
	for i := range x {
		x[i], y[i] = float64(i%997), float64(i%991)+0.5
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		BootstrapRatio(x, y, 0.5, analyzers.DefaultConfidence)
	}
}

// TestGateFewRuns: with one run per side an exact count is decided by its change, and a timed
// rule by the samples within the runs, but only beyond the allowance times the run-drift margin.
func TestGateFewRuns(t *testing.T) {
	run := func(seed uint64, tokenUS, msgs float64) []Run {
		r := traceRun(seed, fmt.Sprintf("run%d.plt", seed), 100, tokenUS, msgs)
		r.Metrics[MetricLost] = 0
		return []Run{r}
	}
	tests := []struct {
		name    string
		base    []Run
		cur     []Run
		want    string
		rule    string
		verdict string
		basis   string
	}{
		{"A/A", run(1, 2000, 66), run(2, 2000, 66), "pass", MetricTokensPerS, "pass", "tokens"},
		{"5x slower", run(1, 2000, 66), run(2, 10000, 66), "regression", MetricTokensPerS, "regression", "tokens"},
		{"30% slower is within run drift", run(1, 2000, 66), run(2, 2600, 66), "pass", MetricTokensPerS, "pass", "tokens"},
		{"exact count grows", run(1, 2000, 12), run(2, 2000, 66), "regression", MetricMessages, "regression", "counts"},
		{"exact count shrinks", run(1, 2000, 66), run(2, 2000, 12), "pass", MetricMessages, "pass", "counts"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Gate(tc.base, tc.cur, DefaultGateConfig())
			if r.Verdict != tc.want {
				t.Errorf("verdict %s, want %s; rules %+v", r.Verdict, tc.want, r.Rules)
			}
			for _, rr := range r.Rules {
				if rr.Metric == tc.rule && (rr.Verdict != tc.verdict || rr.Basis != tc.basis) {
					t.Errorf("%s: %s on %s (%s), want %s on %s", rr.Metric, rr.Verdict, rr.Basis, rr.Detail, tc.verdict, tc.basis)
				}
				if rr.Basis == "counts" && rr.PValue != nil {
					t.Errorf("%s: exact count with a p-value %g", rr.Metric, *rr.PValue)
				}
			}
		})
	}
	// Without samples (venus run JSON), one run per side stays inconclusive for timed rules.
	b, c := run(1, 2000, 66), run(2, 10000, 66)
	b[0].Samples, c[0].Samples = nil, nil
	r := Gate(b, c, DefaultGateConfig())
	for _, rr := range r.Rules {
		if rr.Metric == MetricTokensPerS && rr.Verdict != "inconclusive" {
			t.Errorf("no samples: tokens/s %s, want inconclusive", rr.Verdict)
		}
	}
}

// TestGateFewRunsSampleHint: a rule with too few runs whose traces hold too few samples for a
// bootstrap says how many they hold and how many it needs.
func TestGateFewRunsSampleHint(t *testing.T) {
	base, cur := synthRuns(1, 2, 0.01, centre), synthRuns(3, 2, 0.01, scaled(centre, 2))
	for _, rs := range [][]Run{base, cur} {
		for i := range rs {
			rs[i].Samples = map[string][]float64{Info(MetricRTTP50).Sample: {100, 101}}
		}
	}
	r := Gate(base, cur, DefaultGateConfig())
	for _, rr := range r.Rules {
		if rr.Metric != MetricRTTP50 {
			continue
		}
		want := "; the traces hold 4/4 samples, a bootstrap needs ≥ 6 per side"
		if rr.Verdict != "inconclusive" || !strings.HasSuffix(rr.Detail, want) {
			t.Errorf("%s %s: %q, want inconclusive ending %q", rr.Metric, rr.Verdict, rr.Detail, want)
		}
		return
	}
	t.Fatalf("no %s rule in %+v", MetricRTTP50, r.Rules)
}

// TestGateLowerBounds: a rule on a count from messages is decided only where runs whose counts
// are lower bounds (messages pipelined past the captured payload heads) cannot overturn it.
func TestGateLowerBounds(t *testing.T) {
	runs := func(msgs float64, past uint64) []Run {
		out := make([]Run, 6)
		for i := range out {
			out[i] = Run{Path: fmt.Sprint(i), Metrics: map[string]float64{MetricMessages: msgs}, PastHead: past}
		}
		return out
	}
	for _, c := range []struct {
		name      string
		base, cur []Run
		want      string
	}{
		{"exact: fewer messages pass", runs(40, 0), runs(30, 0), "pass"},
		{"fewer counted in lower-bound runs: not a pass", runs(40, 0), runs(30, 9), "inconclusive"},
		{"more counted in lower-bound runs: a regression all the more", runs(40, 0), runs(50, 9), "regression"},
		{"more than a lower-bound baseline: not a regression", runs(40, 9), runs(50, 0), "inconclusive"},
		{"fewer than a lower-bound baseline: a pass all the more", runs(40, 9), runs(30, 0), "pass"},
		{"both lower bounds", runs(40, 9), runs(40, 9), "inconclusive"},
	} {
		r := Gate(c.base, c.cur, DefaultGateConfig())
		for _, rr := range r.Rules {
			if rr.Metric != MetricMessages {
				continue
			}
			if rr.Verdict != c.want || c.want == "inconclusive" && !strings.Contains(rr.Detail, "lower bounds") {
				t.Errorf("%s: %s (%s), want %s", c.name, rr.Verdict, rr.Detail, c.want)
			}
		}
	}
}

// TestGateBoundedCounts: with the messages not counted bounded by the bytes past the heads
// (Run.CountsUpTo), a rule stands when the bound cannot move it across the allowance.
func TestGateBoundedCounts(t *testing.T) {
	runs := func(msgs float64, past uint64, up float64) []Run {
		out := make([]Run, 6)
		for i := range out {
			out[i] = Run{Path: fmt.Sprint(i), Metrics: map[string]float64{MetricMessages: msgs}, PastHead: past}
			if up > 0 {
				out[i].CountsUpTo = &up
			}
		}
		return out
	}
	for _, c := range []struct {
		name      string
		base, cur []Run
		want      string
	}{
		{"more than a baseline bounded close: a regression", runs(40, 9, 1.01), runs(50, 0, 0), "regression"},
		{"more than a baseline that could be far higher", runs(40, 9, 2), runs(50, 0, 0), "inconclusive"},
		{"the same as a current bounded close", runs(40, 0, 0), runs(40, 9, 1.001), "inconclusive"}, // 0% allowed: any hidden message is a regression
		{"fewer in a current bounded close: a pass", runs(40, 0, 0), runs(30, 9, 1.01), "pass"},
	} {
		r := Gate(c.base, c.cur, DefaultGateConfig())
		for _, rr := range r.Rules {
			if rr.Metric == MetricMessages && rr.Verdict != c.want {
				t.Errorf("%s: %s (%s), want %s", c.name, rr.Verdict, rr.Detail, c.want)
			}
		}
	}
}
