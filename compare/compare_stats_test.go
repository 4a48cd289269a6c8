package compare

import (
	"math"
	"testing"
)

func TestMannWhitneyExact(t *testing.T) {
	tests := []struct {
		name string
		x, y []float64
		alt  Alternative
		u, p float64
	}{
		// Complete separation, 5 per side: the smallest p there is.
		{"separated greater", []float64{6, 7, 8, 9, 10}, []float64{1, 2, 3, 4, 5}, Greater, 25, 1.0 / 252},
		{"separated two-sided", []float64{6, 7, 8, 9, 10}, []float64{1, 2, 3, 4, 5}, TwoSided, 25, 2.0 / 252},
		{"separated wrong way", []float64{6, 7, 8, 9, 10}, []float64{1, 2, 3, 4, 5}, Less, 25, 1},
		// Identical samples: every value tied, nothing to see.
		{"all tied", []float64{1, 1, 1}, []float64{1, 1, 1}, TwoSided, 4.5, 1},
		// R: wilcox.test(c(1.1,2.2,3.3,4.4), c(0.5,1.5,2.5), alternative="greater", exact=TRUE) → W=9, p=0.2
		{"small", []float64{1.1, 2.2, 3.3, 4.4}, []float64{0.5, 1.5, 2.5}, Greater, 9, 0.2},
	}
	for _, tc := range tests {
		u, p := MannWhitney(tc.x, tc.y, tc.alt)
		if u != tc.u || math.Abs(p-tc.p) > 1e-12 {
			t.Errorf("%s: U=%g p=%g, want U=%g p=%g", tc.name, u, p, tc.u, tc.p)
		}
	}
}

func TestMannWhitneyNormalAgreesWithExact(t *testing.T) {
	// 40 vs 40 with a shift: the normal approximation (n > exactMaxN) and the exact
	// distribution on the same data thinned to 30 vs 30 must tell the same story.
	var x, y []float64
	for i := 0; i < 40; i++ {
		x = append(x, float64(i%13)+0.5)
		y = append(y, float64(i%11)+5)
	}
	_, pn := MannWhitney(y, x, Greater)
	_, pe := MannWhitney(y[:30], x[:30], Greater)
	if !(pn < 0.05 && pe < 0.05) {
		t.Errorf("shifted samples: normal p=%g exact p=%g, want both < 0.05", pn, pe)
	}
	_, p := MannWhitney(x, x, TwoSided)
	if p < 0.99 {
		t.Errorf("identical samples: p=%g, want ≈ 1", p)
	}
}

func TestMinPValue(t *testing.T) {
	if got := MinPValue(5, 5, TwoSided); math.Abs(got-2.0/252) > 1e-12 {
		t.Errorf("n=5: %g, want 0.0079", got)
	}
	if got := MinPValue(6, 6, Greater); math.Abs(got-1.0/924) > 1e-12 {
		t.Errorf("n=6 one-sided: %g, want 1/924", got)
	}
}

func TestHolm(t *testing.T) {
	got := Holm([]float64{0.01, 0.04, 0.03, 0.5})
	want := []float64{0.04, 0.09, 0.09, 0.5}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Fatalf("Holm = %v, want %v", got, want)
		}
	}
}

func TestBootstrapRatio(t *testing.T) {
	var x, y []float64
	for i := 0; i < 200; i++ {
		v := 100 + float64(i%17)
		x = append(x, v)
		y = append(y, 1.2*v)
	}
	lo, hi := BootstrapRatio(x, y, 0.5, 0.95)
	if !(lo <= 1.2 && hi >= 1.2 && lo > 1.1 && hi < 1.3) {
		t.Errorf("ratio CI [%g, %g], want around 1.2", lo, hi)
	}
	lo2, hi2 := BootstrapRatio(x, y, 0.5, 0.95)
	if lo != lo2 || hi != hi2 {
		t.Error("bootstrap is not deterministic")
	}
}
