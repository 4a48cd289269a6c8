package analyzers

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
)

// This file holds the statistics of before/after comparisons and of the CI gate: the
// Mann-Whitney U test, Holm's correction and a bootstrap interval for a ratio of medians.
// They assume little: no normality, no equal variances, only independent samples.

// Alternative is the alternative hypothesis of a test of x against y.
type Alternative int

// Alternatives.
const (
	TwoSided Alternative = iota // x and y differ in location
	Greater                     // x tends to be larger than y
	Less                        // x tends to be smaller than y
)

// exactMaxN is the largest n1+n2 for which MannWhitney computes the exact permutation
// distribution (a dynamic program over rank sums, ties included); above it the normal
// approximation with tie and continuity corrections is within 1e-3 of the exact p.
const exactMaxN = 60

// MannWhitney tests whether x and y come from the same distribution against alt, and returns
// the U statistic of x (the number of pairs with x > y, ties counting one half) and the p-value.
// It returns p = 1 when either sample is empty. Samples of at most exactMaxN values in all get
// the exact distribution, so with 5 values per side no p below 1/252 (one-sided) or 2/252
// (two-sided, 0.0079) is possible.
func MannWhitney(x, y []float64, alt Alternative) (u, p float64) {
	n1, n2 := len(x), len(y)
	if n1 == 0 || n2 == 0 {
		return 0, 1
	}
	n := n1 + n2
	type obs struct {
		v   float64
		inX bool
	}
	all := make([]obs, 0, n)
	for _, v := range x {
		all = append(all, obs{v, true})
	}
	for _, v := range y {
		all = append(all, obs{v, false})
	}
	// Ties get mid-ranks, so their order does not matter.
	slices.SortFunc(all, func(a, b obs) int { return cmp.Compare(a.v, b.v) })
	// Mid-ranks, doubled so that they are integers: rank2 = 2·rank.
	rank2 := make([]int, n)
	var tieTerm float64
	var wx2 int // doubled rank sum of x
	for i := 0; i < n; {
		j := i
		for j < n && all[j].v == all[i].v {
			j++
		}
		r2 := i + 1 + j // (i+1 + j) = 2 × mean rank of positions i+1..j
		for k := i; k < j; k++ {
			rank2[k] = r2
			if all[k].inX {
				wx2 += r2
			}
		}
		t := float64(j - i)
		tieTerm += t*t*t - t
		i = j
	}
	u = float64(wx2)/2 - float64(n1*(n1+1))/2
	if n <= exactMaxN {
		return u, exactP(rank2, n1, wx2, alt)
	}
	mu := float64(n1*n2) / 2
	sigma2 := float64(n1*n2) / 12 * (float64(n+1) - tieTerm/float64(n*(n-1)))
	if sigma2 <= 0 {
		return u, 1
	}
	sd := math.Sqrt(sigma2)
	upper := func() float64 { return normalSF((u - mu - 0.5) / sd) } // P(U ≥ u)
	lower := func() float64 { return normalSF((mu - u - 0.5) / sd) } // P(U ≤ u)
	switch alt {
	case Greater:
		p = upper()
	case Less:
		p = lower()
	default:
		p = 2 * math.Min(upper(), lower())
	}
	return u, math.Min(1, p)
}

func normalSF(z float64) float64 { return 0.5 * math.Erfc(z/math.Sqrt2) }

// exactP returns the permutation p-value of the doubled rank sum wx2 of the first group of
// size n1, given the doubled ranks of all observations.
func exactP(rank2 []int, n1, wx2 int, alt Alternative) float64 {
	maxS := 0
	for _, r := range rank2 {
		maxS += r
	}
	// dp[k][s]: number of subsets of size k with doubled rank sum s.
	dp := make([][]float64, n1+1)
	for k := range dp {
		dp[k] = make([]float64, maxS+1)
	}
	dp[0][0] = 1
	for _, r := range rank2 {
		for k := n1; k >= 1; k-- {
			prev, cur := dp[k-1], dp[k]
			for s := maxS; s >= r; s-- {
				if prev[s-r] != 0 {
					cur[s] += prev[s-r]
				}
			}
		}
	}
	var total, ge, le float64
	for s, c := range dp[n1] {
		total += c
		if s >= wx2 {
			ge += c
		}
		if s <= wx2 {
			le += c
		}
	}
	switch alt {
	case Greater:
		return ge / total
	case Less:
		return le / total
	}
	return math.Min(1, 2*math.Min(ge, le)/total)
}

// MinPValue returns the smallest p-value a Mann-Whitney test with n1 and n2 untied values can
// give: 1/C(n1+n2, n1) one-sided, twice that two-sided. It is 1 when a side is empty.
func MinPValue(n1, n2 int, alt Alternative) float64 {
	if n1 == 0 || n2 == 0 {
		return 1
	}
	// log C(n, k) through lgamma to avoid overflow.
	lg := func(v int) float64 { r, _ := math.Lgamma(float64(v) + 1); return r }
	p := math.Exp(lg(n1) + lg(n2) - lg(n1+n2))
	if alt == TwoSided {
		p *= 2
	}
	return math.Min(1, p)
}

// Holm returns Holm's step-down adjusted p-values, in the order of p: the family-wise error rate
// stays below α when every adjusted p below α is called significant.
func Holm(p []float64) []float64 {
	m := len(p)
	idx := make([]int, m)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return p[idx[a]] < p[idx[b]] })
	adj := make([]float64, m)
	run := 0.0
	for rank, i := range idx {
		v := math.Min(1, float64(m-rank)*p[i])
		run = math.Max(run, v)
		adj[i] = run
	}
	return adj
}

// BootstrapSeed is the fixed seed of every bootstrap, so that the same inputs always give the
// same intervals and the same verdicts.
const BootstrapSeed = 0x70657266 // "perf"

// DefaultBootstrap is the number of bootstrap resamples (1000: the 2.5% and 97.5% points then
// rest on 25 resamples each).
const DefaultBootstrap = 1000

// bootstrapMaxN caps each sample fed to the bootstrap: larger samples are thinned to evenly
// spaced order statistics, which keeps the shape and makes the interval wider (conservative).
const bootstrapMaxN = 2000

// BootstrapRatio returns a percentile bootstrap interval at level conf (0.95) for
// q(y)/q(x), the ratio of the q-quantiles of y and x (q = 0.5: the ratio of medians), with
// DefaultBootstrap resamples drawn from a generator seeded with BootstrapSeed. A q outside
// [0, 1] means the mean instead of a quantile. It returns NaN bounds when a sample is empty or
// the x statistic is 0 in most resamples.
func BootstrapRatio(x, y []float64, q, conf float64) (lo, hi float64) {
	if len(x) == 0 || len(y) == 0 {
		return math.NaN(), math.NaN()
	}
	xs, ys := thin(x), thin(y)
	rng := rand.New(rand.NewPCG(BootstrapSeed, uint64(len(x))<<32|uint64(len(y))))
	bx := make([]float64, len(xs))
	by := make([]float64, len(ys))
	ratios := make([]float64, 0, DefaultBootstrap)
	for b := 0; b < DefaultBootstrap; b++ {
		for i := range bx {
			bx[i] = xs[rng.IntN(len(xs))]
		}
		for i := range by {
			by[i] = ys[rng.IntN(len(ys))]
		}
		den, num := statistic(bx, q), statistic(by, q)
		if den == 0 {
			continue
		}
		ratios = append(ratios, num/den)
	}
	if len(ratios) < DefaultBootstrap/2 {
		return math.NaN(), math.NaN()
	}
	sort.Float64s(ratios)
	a := (1 - conf) / 2
	return quantileSorted(ratios, a), quantileSorted(ratios, 1-a)
}

// statistic returns the q-quantile of v (sorting it), or its mean when q is outside [0, 1].
func statistic(v []float64, q float64) float64 {
	if q < 0 || q > 1 {
		var s float64
		for _, x := range v {
			s += x
		}
		return s / float64(len(v))
	}
	sort.Float64s(v)
	return quantileSorted(v, q)
}

func thin(v []float64) []float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) <= bootstrapMaxN {
		return s
	}
	out := make([]float64, bootstrapMaxN)
	for i := range out {
		out[i] = s[int(float64(i)*float64(len(s)-1)/float64(bootstrapMaxN-1))]
	}
	return out
}

// quantileSorted returns the q-quantile of sorted values by linear interpolation between
// order statistics (type 7); NaN for an empty slice.
func quantileSorted(s []float64, q float64) float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	if q <= 0 {
		return s[0]
	}
	if q >= 1 {
		return s[len(s)-1]
	}
	h := q * float64(len(s)-1)
	i := int(h)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (h-float64(i))*(s[i+1]-s[i])
}

// quantile returns the q-quantile of v (not modified).
func quantile(v []float64, q float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return quantileSorted(s, q)
}

// robustCV returns 1.4826·MAD/|median| of v, the coefficient of variation a normal sample would
// have, computed so that a few outliers do not move it; 0 for fewer than two values or a zero
// median.
func robustCV(v []float64) float64 {
	if len(v) < 2 {
		return 0
	}
	m := quantile(v, 0.5)
	if m == 0 {
		return 0
	}
	dev := make([]float64, len(v))
	for i, x := range v {
		dev[i] = math.Abs(x - m)
	}
	return 1.4826 * quantile(dev, 0.5) / math.Abs(m)
}
