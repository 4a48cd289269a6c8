package evidence

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestBucketTable checks the table lookup against the logarithm that defines the buckets, at
// every bucket's edges and at random values of every magnitude.
func TestBucketTable(t *testing.T) {
	tablesMade.Do(makeTables)
	for b := 1; b < nBuckets; b++ {
		lo := bucketLow[b]
		if got := bucket(lo); got != logBucket(lo) || got < int32(b) {
			t.Fatalf("bucket(%d) = %d, log gives %d, want at least %d", lo, got, logBucket(lo), b)
		}
		if lo > 1 {
			if got := bucket(lo - 1); got != logBucket(lo-1) || got >= int32(b) {
				t.Fatalf("bucket(%d) = %d, log gives %d, want under %d", lo-1, got, logBucket(lo-1), b)
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200_000 {
		ns := r.Int64N(math.MaxInt64) >> r.IntN(63)
		if ns <= 0 {
			continue
		}
		if got, want := bucket(ns), logBucket(ns); got != want {
			t.Fatalf("bucket(%d) = %d, want %d", ns, got, want)
		}
	}
}

// TestHistQuantiles compares the quantiles with those of the bucket counts kept by the
// logarithm's bucket, sorted.
func TestHistQuantiles(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	cases := map[string]func() int64{
		"rtt":   func() int64 { return 40_000 + r.Int64N(9_000) },
		"wide":  func() int64 { return r.Int64N(1<<40) >> r.IntN(40) },
		"zeros": func() int64 { return r.Int64N(3) - 1 },
		"falls": func() int64 { return 1 << (40 - r.IntN(40)) },
	}
	for name, gen := range cases {
		t.Run(name, func(t *testing.T) {
			var h hist
			ref := map[int32]uint64{}
			var n uint64
			var mx int64
			for range 5_000 {
				ns := gen()
				h.add(ns)
				ns = max(ns, 0)
				b := int32(-1)
				if ns > 0 {
					b = logBucket(ns)
				}
				ref[b]++
				n++
				mx = max(mx, ns)
			}
			keys := make([]int32, 0, len(ref))
			for k := range ref {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, q := range []float64{0, 0.01, 0.5, 0.9, 0.99, 1} {
				want := float64(mx)
				need := max(uint64(math.Ceil(q*float64(n))), 1)
				var seen uint64
				for _, k := range keys {
					seen += ref[k]
					if seen >= need {
						want = 0
						if k >= 0 {
							want = math.Min(math.Pow(histStep, float64(k+1)), float64(mx))
						}
						break
					}
				}
				if got := h.quantile(q); got != want {
					t.Errorf("quantile(%g) = %g, want %g", q, got, want)
				}
			}
		})
	}
}
