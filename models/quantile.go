package models

import "math"

// Quantile returns the q-quantile (0 ≤ q ≤ 1) of sorted (ascending) values by nearest rank: the
// value of rank ⌈q·n⌉ (1-based; rank 1 for q = 0), so that it is always one of the values and a
// p99 of 100 values is the 99th. This is perflab's one quantile definition (docs/analyze.md):
// analyze's latency histograms (analyzers.Hist.Quantile), bench and top use it. An empty slice
// gives NaN.
func Quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	return sorted[QuantileRank(len(sorted), q)-1]
}

// QuantileRank returns the 1-based nearest rank ⌈q·n⌉ of the q-quantile of n values, clamped to
// 1..n (n ≥ 1).
func QuantileRank(n int, q float64) int {
	r := int(math.Ceil(q * float64(n)))
	return max(1, min(r, n))
}
