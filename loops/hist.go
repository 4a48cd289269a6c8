package loops

import (
	"math"
	"slices"
)

// histRatio is the width ratio of a hist's buckets: 1% relative precision on any quantile,
// in about 2,300 buckets from 1 ns to 100 s.
const histRatio = 1.01

// hist is a log-bucketed histogram of durations (ns) with bounded memory.
type hist struct {
	counts map[int32]uint64
	n      uint64
	sum    float64
	max    int64
}

func bucketOf(v int64) int32 {
	if v <= 1 {
		return 0
	}
	return int32(math.Log(float64(v)) / math.Log(histRatio))
}

func (h *hist) add(v int64) {
	if v < 0 {
		v = 0
	}
	if h.counts == nil {
		h.counts = map[int32]uint64{}
	}
	h.counts[bucketOf(v)]++
	h.n++
	h.sum += float64(v)
	h.max = max(h.max, v)
}

// quantile returns the q-quantile (nearest rank) in ns, at the centre of its bucket, capped by
// the largest value.
func (h *hist) quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	keys := make([]int32, 0, len(h.counts))
	for k := range h.counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	var seen uint64
	for _, k := range keys {
		seen += h.counts[k]
		if seen >= rank {
			if k == 0 {
				return math.Min(1, float64(h.max))
			}
			return math.Min(math.Pow(histRatio, float64(k)+0.5), float64(h.max))
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
