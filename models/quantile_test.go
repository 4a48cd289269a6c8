package models

import (
	"math"
	"testing"
)

func TestQuantile(t *testing.T) {
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(i + 1)
	}
	for _, tc := range []struct {
		v    []float64
		q    float64
		want float64
	}{
		{hundred, 0.99, 99}, {hundred, 0.5, 50}, {hundred, 0, 1}, {hundred, 1, 100}, {hundred, 0.999, 100},
		{[]float64{3}, 0.5, 3}, {[]float64{1, 2}, 0.5, 1}, {[]float64{1, 2, 3}, 0.5, 2}, {[]float64{1, 2, 3, 4}, 0.75, 3},
	} {
		if got := Quantile(tc.v, tc.q); got != tc.want {
			t.Errorf("Quantile(n=%d, %g) = %g, want %g", len(tc.v), tc.q, got, tc.want)
		}
	}
	if !math.IsNaN(Quantile(nil, 0.5)) {
		t.Error("Quantile of nothing is not NaN")
	}
}
