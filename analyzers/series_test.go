package analyzers

import (
	"math/rand"
	"slices"
	"testing"
)

// TestSeriesBucketCache checks that a series finds the same buckets with its cache of the last
// one as by dividing every time: times mostly rising, some back, a jump far ahead, a new origin
// (as a second trace sets), sums and maxima.
func TestSeriesBucketCache(t *testing.T) {
	for _, useMax := range []bool{false, true} {
		rng := rand.New(rand.NewSource(1))
		got, want := series{useMax: useMax}, series{useMax: useMax}
		ts := int64(5e9)
		got.origin, want.origin = ts, ts
		for i := range 200_000 {
			switch {
			case i == 150_000: // the next trace: a new origin
				ts = 1e9
				got.origin, want.origin = ts, ts
			case i%10_000 == 9_999:
				ts += 3e9 // idle for seconds: buckets merge
			case rng.Intn(10) == 0:
				ts -= rng.Int63n(2e6)
			default:
				ts += rng.Int63n(50_000)
			}
			v := float64(1 + rng.Intn(8))
			got.add(ts, v)
			want.hi = 0 // no cache: every add divides
			want.add(ts, v)
		}
		if got.width != want.width || !slices.Equal(got.vals, want.vals) {
			t.Fatalf("max %v: width %d, %d buckets; want width %d, %d buckets", useMax, got.width, len(got.vals), want.width, len(want.vals))
		}
	}
}
