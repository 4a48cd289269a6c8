package analyzers

import (
	"math"
	"math/bits"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/perflab/perflab/models"
)

// histSub is the number of linear sub-buckets per power of two of a Hist: 64 gives a relative
// error below 1/64 (1.6%) on every percentile, with values below 64 ns kept exactly.
const (
	histSubBits = 6
	histSub     = 1 << histSubBits
	// histExact is how many samples a Hist keeps verbatim, so small samples get exact
	// percentiles and exact confidence intervals.
	histExact = 2048
)

// Hist is a log-linear histogram of non-negative integer values (ns): bounded memory (at most
// 64×64 counters) and bounded relative error (1.6%), with the first histExact samples also
// kept exactly. The zero value is empty and ready.
type Hist struct {
	counts []uint64
	exact  []int64
	n      uint64
	sum    float64
	max    int64
	min    int64
	// inexact is set once more than histExact samples came: percentiles come from buckets.
	inexact bool
}

func histIndex(v int64) int {
	if v < histSub {
		return int(v)
	}
	e := bits.Len64(uint64(v)) - histSubBits // >= 1
	return e*histSub + int(uint64(v)>>uint(e-1)) - histSub
}

// histLow returns the smallest value of bucket i.
func histLow(i int) int64 {
	if i < histSub {
		return int64(i)
	}
	e := i / histSub
	m := i%histSub + histSub
	return int64(m) << uint(e-1)
}

// Add records v once.
func (h *Hist) Add(v int64) {
	// the common case, a Hist past its exact samples whose bucket exists: AddN's steps
	if h.inexact && v >= 0 {
		if i := histIndex(v); i < len(h.counts) {
			h.min = min(h.min, v)
			h.max = max(h.max, v)
			h.counts[i]++
			h.n++
			h.sum += float64(v)
			return
		}
	}
	h.AddN(v, 1)
}

// AddN records v n times.
func (h *Hist) AddN(v int64, n uint64) {
	if n == 0 {
		return
	}
	if v < 0 {
		v = 0
	}
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	if !h.inexact {
		if h.n+n <= histExact {
			for k := uint64(0); k < n; k++ {
				h.exact = append(h.exact, v)
			}
			h.n += n
			h.sum += float64(v) * float64(n)
			return
		}
		// From here on percentiles come from the buckets: fill them with the samples kept so
		// far. Until then a Hist holds no buckets, so that the many small histograms of an
		// analysis (one per connection and direction) cost only their samples.
		h.counts = h.bucketCounts()
		h.exact, h.inexact = nil, true
	}
	h.addBucket(v, n)
	h.n += n
	h.sum += float64(v) * float64(n)
}

// addBucket adds n to v's bucket.
func (h *Hist) addBucket(v int64, n uint64) {
	i := histIndex(v)
	if i >= len(h.counts) {
		h.counts = slices.Grow(h.counts, i+1-len(h.counts))[:i+1]
	}
	h.counts[i] += n
}

// bucketCounts returns the bucket counters: h.counts once h is inexact, else built from the
// exact samples.
func (h *Hist) bucketCounts() []uint64 {
	if h.inexact {
		return h.counts
	}
	var c Hist
	c.inexact = true
	for _, v := range h.exact {
		c.addBucket(v, 1)
	}
	return c.counts
}

// N returns the number of values recorded.
func (h *Hist) N() uint64 { return h.n }

// Mean returns the mean value, 0 when empty.
func (h *Hist) Mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// Sum returns the sum of the values.
func (h *Hist) Sum() float64 { return h.sum }

// Max returns the largest value recorded.
func (h *Hist) Max() int64 { return h.max }

// rank returns the value of 1-based rank r (nearest rank).
func (h *Hist) rank(r uint64) float64 {
	if h.n == 0 {
		return 0
	}
	r = min(max(r, 1), h.n)
	if !h.inexact {
		if !slices.IsSorted(h.exact) {
			slices.Sort(h.exact)
		}
		return float64(h.exact[r-1])
	}
	var acc uint64
	for i, c := range h.counts {
		acc += c
		if acc >= r {
			lo, hi := histLow(i), histLow(i+1)
			mid := float64(lo) + float64(hi-lo-1)/2
			return math.Min(math.Max(mid, float64(h.min)), float64(h.max))
		}
	}
	return float64(h.max)
}

// Quantile returns the q-quantile (0 ≤ q ≤ 1) by nearest rank (models.QuantileRank, perflab's
// one quantile definition).
func (h *Hist) Quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	return h.rank(uint64(models.QuantileRank(int(h.n), q)))
}

// MedianCI returns the confidence interval of the median at level conf from the binomial
// distribution of order statistics, and false when n is too small for one (n < 6 at 95%).
func (h *Hist) MedianCI(conf float64) (lo, hi float64, ok bool) { return h.QuantileCI(0.5, conf) }

// QuantileCI returns a distribution-free confidence interval of the q-quantile at level conf:
// the order statistics X(j), X(k) with P(X(j) ≤ quantile ≤ X(k)) ≥ conf, the number of samples
// below the quantile being Binomial(n, q). It returns false when n is too small (a p99 needs
// about 300 samples at 95%).
func (h *Hist) QuantileCI(q, conf float64) (lo, hi float64, ok bool) {
	j, k, ok := quantileRanks(h.n, q, conf)
	if !ok {
		return 0, 0, false
	}
	return h.rank(j), h.rank(k), true
}

// quantileRanks returns 1-based ranks j < k with P(X(j) ≤ x_q ≤ X(k)) ≥ conf.
func quantileRanks(n uint64, q, conf float64) (uint64, uint64, bool) {
	if n < 2 || q <= 0 || q >= 1 {
		return 0, 0, false
	}
	alpha := (1 - conf) / 2
	var j, k uint64
	if n <= 1000 {
		b := distuv.Binomial{N: float64(n), P: q}
		// j: the largest with P(B ≤ j-1) ≤ alpha; k: the smallest with P(B ≥ k) ≤ alpha
		for x := uint64(0); x < n; x++ {
			if b.CDF(float64(x)) > alpha {
				break
			}
			j = x + 1
		}
		k = n + 1
		for x := n; x >= 1; x-- {
			if 1-b.CDF(float64(x-1)) > alpha {
				break
			}
			k = x
		}
	} else {
		z := distuv.UnitNormal.Quantile(1 - alpha)
		sd := math.Sqrt(float64(n) * q * (1 - q))
		if c := float64(n)*q - z*sd; c >= 1 {
			j = uint64(math.Floor(c))
		}
		k = uint64(math.Ceil(float64(n)*q+z*sd)) + 1
	}
	if j < 1 || k > n || j >= k {
		return 0, 0, false
	}
	return j, k, true
}

// latency summarises h (ns) in microseconds; it adds the median's interval when conf > 0.
func (h *Hist) latency(conf float64) Latency {
	if h.n == 0 {
		return Latency{}
	}
	l := Latency{
		P50: us(h.Quantile(0.5)), P90: us(h.Quantile(0.9)), P99: us(h.Quantile(0.99)),
		P999: us(h.Quantile(0.999)), Max: us(float64(h.max)), Mean: us(h.Mean()), N: h.n,
	}
	if lo, hi, ok := h.MedianCI(conf); ok {
		l.P50Low, l.P50High = us(lo), us(hi)
	}
	if lo, hi, ok := h.QuantileCI(0.99, conf); ok {
		l.P99Low, l.P99High = us(lo), us(hi)
	}
	return l
}

// buckets returns the histogram as (low, high, count) in µs, merging to at most maxBuckets
// buckets of equal ratio.
func (h *Hist) buckets(maxBuckets int) []HistBucket {
	var out []HistBucket
	counts := h.bucketCounts()
	first, last := -1, -1
	for i, c := range counts {
		if c > 0 {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		return nil
	}
	n := last - first + 1
	step := (n + maxBuckets - 1) / maxBuckets
	for i := first; i <= last; i += step {
		var c uint64
		for k := i; k < i+step && k <= last; k++ {
			c += counts[k]
		}
		out = append(out, HistBucket{LowUS: us(float64(histLow(i))), HighUS: us(float64(histLow(min(i+step, last+1)))), Count: c})
	}
	return out
}

// values returns bucket centres (ns) and counts, for mode finding.
func (h *Hist) values() (vs, cs []float64) {
	for i, c := range h.bucketCounts() {
		if c > 0 {
			lo, hi := histLow(i), histLow(i+1)
			vs = append(vs, float64(lo)+float64(hi-lo)/2)
			cs = append(cs, float64(c))
		}
	}
	return
}

func us(ns float64) float64 { return math.Round(ns) / 1e3 }
