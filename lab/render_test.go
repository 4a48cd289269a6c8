package lab

import (
	"bytes"
	"math"
	"sort"
	"testing"

	"github.com/perflab/perflab/internal/testutil"
)

// synthetic returns a sweep shaped like seed 003: RTT = 1 µs + 1 µs·N, lognormal RTTs with a
// second, fast population of 20% at the largest N, and the clients' in-flight L = λ·W exactly.
func synthetic() *Result {
	res := &Result{Schema: Schema, Loop: "batch", DurationS: 1}
	s := Series{Transport: "shm", Mode: "baseline", Depth: 1}
	for i, n := range []int{1, 2, 4, 8, 16} {
		w := 1 + float64(n)
		p := Point{Transport: "shm", Mode: "baseline", Clients: n, Depth: 1, ThroughputPerS: math.Round(float64(n) / w * 1e6),
			RTTUS: RTT{P50: w, Mean: w, P99: 2 * w}, InflightMean: float64(n), RequestsPerCycle: float64(n) * 0.9}
		for k := 0; k < 1000; k++ {
			z := math.Sqrt2 * math.Erfinv(2*(float64(k)+0.5)/1000-1) // normal quantiles
			v := w * math.Exp(0.05*z)
			if n == 16 && k < 200 {
				z = math.Sqrt2 * math.Erfinv(2*(float64(k)+0.5)/200-1)
				v = 4 * math.Exp(0.05*z) // the fast population: small batches
			}
			p.samples = append(p.samples, v)
		}
		sort.Float64s(p.samples)
		p.Requests = int64(len(p.samples))
		res.Points = append(res.Points, p)
		s.points = append(s.points, i)
	}
	res.Series = []Series{s}
	analyze(res, &Config{})
	return res
}

func TestRenderGolden(t *testing.T) {
	res := synthetic()
	if f := res.BatchFit; f == nil || math.Abs(f.TFixedUS-1) > 1e-6 || math.Abs(f.TPerReqUS-1) > 1e-6 || f.R2 < 0.9999 {
		t.Errorf("fit %+v, want T_fixed 1, T_per_req 1, R² 1", f)
	}
	if got := res.Series[0].Saturation; got != 8 {
		t.Errorf("saturation at %d clients, want 8", got)
	}
	if m := res.Series[0].Modes; len(m) != 2 || math.Abs(m[0].Share-0.2) > 0.03 {
		t.Errorf("populations %+v, want a 20%% fast one and a slow one", m)
	}
	for _, f := range []string{"table", "markdown"} {
		var b bytes.Buffer
		if err := Render(&b, res, f); err != nil {
			t.Fatal(err)
		}
		testutil.Golden(t, "render."+f+".txt", b.Bytes())
	}
}
