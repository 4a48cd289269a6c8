package evidence

import "math"

// hist is a latency histogram in ns with buckets 5% wide: bounded memory, quantiles within 5%.
type hist struct {
	n      uint64
	sum    float64
	max    int64
	counts map[int32]uint64
}

const histStep = 1.05

var logStep = math.Log(histStep)

func (h *hist) add(ns int64) {
	if h.counts == nil {
		h.counts = map[int32]uint64{}
	}
	if ns < 0 {
		ns = 0
	}
	h.n++
	h.sum += float64(ns)
	h.max = max(h.max, ns)
	b := int32(-1)
	if ns > 0 {
		b = int32(math.Log(float64(ns)) / logStep)
	}
	h.counts[b]++
}

// quantile returns the q-quantile in ns (the upper edge of its bucket, capped at the maximum).
func (h *hist) quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	keys := make([]int32, 0, len(h.counts))
	for k := range h.counts {
		keys = append(keys, k)
	}
	sortInt32(keys)
	want := uint64(math.Ceil(q * float64(h.n)))
	if want == 0 {
		want = 1
	}
	var seen uint64
	for _, k := range keys {
		seen += h.counts[k]
		if seen >= want {
			if k < 0 {
				return 0
			}
			return math.Min(math.Pow(histStep, float64(k+1)), float64(h.max))
		}
	}
	return float64(h.max)
}

func (h *hist) mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

func sortInt32(a []int32) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

// us converts ns to µs rounded to 0.1 µs.
func us(ns float64) float64 { return math.Round(ns/100) / 10 }

// round3 rounds to 3 decimals.
func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
