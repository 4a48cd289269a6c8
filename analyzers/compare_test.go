package analyzers

import (
	"math/rand/v2"
	"reflect"
	"testing"
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
	r.Modes = []Mode{{CenterUS: rtt, Share: 1}}
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
