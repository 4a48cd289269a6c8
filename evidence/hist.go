package evidence

import (
	"math"
	"math/bits"
	"sync"
)

// hist is a latency histogram in ns with buckets 5% wide: bounded memory, quantiles within 5%.
// Bucket b holds the ns whose int32(math.Log(ns)/logStep) is b (bucket -1 holds 0); counts is
// dense from bucket base on, and a sample finds its bucket in bucketLow without a logarithm.
type hist struct {
	n      uint64
	sum    float64
	max    int64
	zeros  uint64   // samples of 0 ns (bucket -1)
	base   int32    // the bucket of counts[0]
	counts []uint64 // by bucket from base on
}

const histStep = 1.05

var logStep = math.Log(histStep)

// logBucket is the bucket of ns > 0 by its definition.
func logBucket(ns int64) int32 { return int32(math.Log(float64(ns)) / logStep) }

// nBuckets is one more than the bucket of the largest int64.
var nBuckets = int(logBucket(math.MaxInt64)) + 1

// bucketLow[b] is the least ns > 0 whose bucket is at least b (logBucket never decreases as
// ns grows); bucketLow[nBuckets] is past every int64. byLen[k] is the bucket of the least ns of
// bits.Len64 k, where the search for a sample of that length starts; byTop[k][t], for k >
// topBits, the bucket of the least ns of length k whose topBits bits after the leading one are
// t, where it starts for such an ns (a sixteenth of a power of two spans at most two buckets).
// They are made on the first sample (about a millisecond), not by every program that imports
// the package.
var (
	bucketLow  []int64
	byLen      [65]int32
	byTop      [65][1 << topBits]int32
	tablesMade sync.Once
)

const topBits = 4

func makeTables() {
	bucketLow, byLen = histTables()
	for k := topBits + 2; k < 64; k++ {
		for t := range byTop[k] {
			least := int64(1<<topBits|t) << (k - topBits - 1)
			byTop[k][t] = bucketFrom(byLen[k], least)
		}
	}
}

func histTables() ([]int64, [65]int32) {
	low := make([]int64, nBuckets+1)
	low[nBuckets] = math.MaxInt64
	lo := int64(1)
	for b := 1; b < nBuckets; b++ {
		// the least ns in [lo, MaxInt64] whose bucket is at least b
		hi := int64(math.MaxInt64)
		for lo < hi {
			mid := lo + (hi-lo)/2
			if logBucket(mid) >= int32(b) {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		low[b] = lo
	}
	low[0] = 1
	var byLen [65]int32
	for k := 1; k < 64; k++ {
		byLen[k] = logBucket(1 << (k - 1))
	}
	return low, byLen
}

// bucket returns the bucket of ns > 0: logBucket(ns), from the tables.
func bucket(ns int64) int32 {
	k := bits.Len64(uint64(ns))
	if k < topBits+2 {
		return bucketFrom(byLen[k], ns)
	}
	return bucketFrom(byTop[k][ns>>(k-topBits-1)&(1<<topBits-1)], ns)
}

// bucketFrom returns the bucket of ns > 0, searching up from bucket b, which must not be past
// it.
func bucketFrom(b int32, ns int64) int32 {
	for bucketLow[b+1] <= ns {
		b++
	}
	return b
}

func (h *hist) add(ns int64) {
	if ns < 0 {
		ns = 0
	}
	h.n++
	h.sum += float64(ns)
	h.max = max(h.max, ns)
	if ns == 0 {
		h.zeros++
		return
	}
	tablesMade.Do(makeTables)
	b := bucket(ns)
	i := int(b - h.base)
	switch {
	case len(h.counts) == 0:
		h.base, i = b, 0
		h.counts = append(h.counts, 0)
	case i < 0:
		grown := make([]uint64, len(h.counts)-i, cap(h.counts)-i)
		copy(grown[-i:], h.counts)
		h.counts, h.base, i = grown, b, 0
	case i >= len(h.counts):
		h.counts = append(h.counts, make([]uint64, i+1-len(h.counts))...)
	}
	h.counts[i]++
}

// quantile returns the q-quantile in ns (the upper edge of its bucket, capped at the maximum).
func (h *hist) quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	want := uint64(math.Ceil(q * float64(h.n)))
	if want == 0 {
		want = 1
	}
	seen := h.zeros
	if seen >= want {
		return 0
	}
	for i, c := range h.counts {
		seen += c
		if seen >= want {
			k := h.base + int32(i)
			return math.Min(math.Pow(histStep, float64(k+1)), float64(h.max))
		}
	}
	return float64(h.max)
}

// us converts ns to µs rounded to 0.1 µs.
func us(ns float64) float64 { return math.Round(ns/100) / 10 }

// round3 rounds to 3 decimals.
func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
