package reports

import (
	"bytes"
	"encoding/xml"
	"math/rand/v2"
	"testing"

	"github.com/perflab/perflab/compare"
	"github.com/perflab/perflab/internal/testutil"
)

func gateRuns(seed uint64, n int, scale float64) []compare.Run {
	rng := rand.New(rand.NewPCG(seed, 9))
	runs := make([]compare.Run, n)
	for i := range runs {
		j := func() float64 { return 1 + 0.02*rng.NormFloat64() }
		runs[i] = compare.Run{Path: "run", Kind: "venus-run", Metrics: map[string]float64{
			compare.MetricTokensPerS: 500 / scale * j(), compare.MetricRTTP50: 100 * scale * j(),
			compare.MetricRTTP99: 200 * scale * j(), compare.MetricMessages: 40, compare.MetricLost: 0,
		}}
	}
	return runs
}

func TestGateGolden(t *testing.T) {
	cases := map[string]*compare.GateResult{
		"pass":         compare.Gate(gateRuns(1, 8, 1), gateRuns(2, 8, 1), nil),
		"regression":   compare.Gate(gateRuns(1, 8, 1), gateRuns(2, 8, 1.3), nil),
		"inconclusive": compare.Gate(gateRuns(1, 5, 1), gateRuns(2, 5, 1.3), nil),
	}
	for name, r := range cases {
		if r.Verdict != name {
			t.Fatalf("%s: verdict %s", name, r.Verdict)
		}
		for _, f := range GateFormats {
			var buf bytes.Buffer
			if err := Gate(&buf, r, f); err != nil {
				t.Fatal(err)
			}
			ext := map[string]string{"table": "txt", "markdown": "md", "json": "json"}[f]
			testutil.Golden(t, "gate-"+name+"."+ext, buf.Bytes())
		}
		var buf bytes.Buffer
		if err := GateJUnit(&buf, r); err != nil {
			t.Fatal(err)
		}
		var v struct {
			Tests    int `xml:"tests,attr"`
			Failures int `xml:"failures,attr"`
		}
		if err := xml.Unmarshal(buf.Bytes(), &v); err != nil || v.Tests != len(r.Rules) || (v.Failures > 0) != (name == "regression") {
			t.Errorf("%s junit: %v %+v", name, err, v)
		}
		testutil.Golden(t, "gate-"+name+".junit.xml", buf.Bytes())
	}
}
