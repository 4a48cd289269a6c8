package models

import "errors"

// Batch is the batch model of a request cycle: a cycle that carries N requests takes
// T_cycle = T_fixed + T_per_req·N. T_fixed is what every cycle pays once (a network round trip,
// a system call pair, a wake-up); T_per_req is what each request adds (server work, bytes).
// Both are in microseconds.
type Batch struct {
	TFixedUS  float64 // µs per cycle
	TPerReqUS float64 // µs per request
}

// ErrNoFit is returned when a fit has too few points or no spread in N.
var ErrNoFit = errors.New("batch fit needs at least two distinct N")

// Cycle returns the time of a cycle carrying n requests, in µs.
func (b Batch) Cycle(n float64) float64 { return b.TFixedUS + b.TPerReqUS*n }

// Throughput returns the requests completed per second when every cycle carries n requests:
// n / T_cycle(n), in requests/s. It is 0 when the cycle takes no time or n ≤ 0.
func (b Batch) Throughput(n float64) float64 {
	c := b.Cycle(n)
	if c <= 0 || n <= 0 {
		return 0
	}
	return n / c * 1e6
}

// MaxThroughput returns the limit of Throughput as n grows, 1/T_per_req, in requests/s; +Inf is
// reported as 0 when T_per_req is not positive (no limit from per-request cost).
func (b Batch) MaxThroughput() float64 {
	if b.TPerReqUS <= 0 {
		return 0
	}
	return 1e6 / b.TPerReqUS
}

// HalfPowerN returns the batch size at which half of MaxThroughput is reached,
// N½ = T_fixed/T_per_req (requests). It is 0 when T_per_req is not positive.
func (b Batch) HalfPowerN() float64 {
	if b.TPerReqUS <= 0 {
		return 0
	}
	return b.TFixedUS / b.TPerReqUS
}

// FitBatch fits T = T_fixed + T_per_req·N to the points (n[i], t[i]) by ordinary least squares
// (t in µs) and returns the model and its coefficient of determination R². It returns ErrNoFit
// when there are fewer than two distinct n.
func FitBatch(n, t []float64) (Batch, float64, error) {
	if len(n) != len(t) || len(n) < 2 {
		return Batch{}, 0, ErrNoFit
	}
	var sn, st float64
	for i := range n {
		sn += n[i]
		st += t[i]
	}
	k := float64(len(n))
	mn, mt := sn/k, st/k
	var sxx, sxy, syy float64
	for i := range n {
		dx, dy := n[i]-mn, t[i]-mt
		sxx += dx * dx
		sxy += dx * dy
		syy += dy * dy
	}
	if sxx == 0 {
		return Batch{}, 0, ErrNoFit
	}
	slope := sxy / sxx
	b := Batch{TFixedUS: mt - slope*mn, TPerReqUS: slope}
	r2 := 1.0
	if syy > 0 {
		r2 = sxy * sxy / (sxx * syy)
	}
	return b, r2, nil
}
