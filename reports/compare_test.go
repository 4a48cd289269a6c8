package reports

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/compare"
	"github.com/perflab/perflab/internal/testutil"
)

// cmpRun builds a run with per-message round trips and per-token times, as a trace gives.
func cmpRun(seed uint64, path string, rtt, token, msgs float64) compare.Run {
	rng := rand.New(rand.NewPCG(seed, 5))
	r := compare.Run{Path: path, Kind: "trace", Metrics: map[string]float64{}, Samples: map[string][]float64{}}
	for i := 0; i < 300; i++ {
		r.Samples["rtt_us"] = append(r.Samples["rtt_us"], rtt*(1+0.2*rng.ExpFloat64()))
	}
	for i := 0; i < 40; i++ {
		r.Samples["token_us"] = append(r.Samples["token_us"], token*(1+0.05*rng.NormFloat64()))
	}
	r.Metrics[compare.MetricTokensPerS] = 1e6 / token
	r.Metrics[compare.MetricMessages] = msgs
	r.Metrics[compare.MetricRoundTrips] = msgs / 2
	r.Metrics[compare.MetricRTTP50] = 0 // taken from the samples
	r.Metrics[compare.MetricRTTP99] = 0
	r.Modes = []analyzers.Mode{{CenterUS: rtt, Share: 1}}
	return r
}

func sampleComparison() *compare.Comparison {
	return compare.Compare(
		[]compare.Run{cmpRun(1, "baseline.plt", 100, 2400, 48)},
		[]compare.Run{cmpRun(2, "coalesce+pipeline.plt", 115, 900, 12)}, 0)
}

func TestCompareGolden(t *testing.T) {
	c := sampleComparison()
	for _, f := range CompareFormats {
		var buf bytes.Buffer
		if err := Compare(&buf, c, f); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		ext := map[string]string{"table": "txt", "markdown": "md", "json": "json", "html": "html"}[f]
		testutil.Golden(t, "compare."+ext, buf.Bytes())
		if f == "json" {
			var v struct {
				Schema  string `json:"schema"`
				Metrics []struct {
					Name    string   `json:"name"`
					Before  float64  `json:"before"`
					After   float64  `json:"after"`
					Change  *float64 `json:"change"`
					PValue  *float64 `json:"p_value"`
					Verdict string   `json:"verdict"`
				} `json:"metrics"`
			}
			if err := json.Unmarshal(buf.Bytes(), &v); err != nil || v.Schema != "perflab.compare/v1" || len(v.Metrics) == 0 {
				t.Fatalf("json contract: %v %+v", err, v)
			}
		}
		if f == "html" {
			s := buf.String()
			for _, want := range []string{`data-chart="cdf-rtt_us"`, `data-chart="hist-rtt_us"`, ">before<", ">after<"} {
				if !strings.Contains(s, want) {
					t.Errorf("html lacks %s", want)
				}
			}
		}
	}
	if err := Compare(&bytes.Buffer{}, c, "xml"); err == nil {
		t.Error("unknown format: want an error")
	}
}
