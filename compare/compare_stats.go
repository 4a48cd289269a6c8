package compare

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
	ratios := bootstrapRatios(x, y, q)
	if ratios == nil {
		return math.NaN(), math.NaN()
	}
	a := (1 - conf) / 2
	return quantileSorted(ratios, a), quantileSorted(ratios, 1-a)
}

// BootstrapTest is a bootstrap test of the ratio q(y)/q(x) (see BootstrapRatio): the interval
// at level 1−alpha and the p-value of the hypothesis that the ratio is 1 against alt (Greater:
// y's statistic is larger), from the same resamples, so that p < alpha exactly when the
// interval leaves 1 out (up to the resolution of the resamples). p is (k+1)/(B+1) with k the
// resamples on the wrong side of 1 (ties count one half), doubled when two-sided; NaN when
// there is nothing to resample.
func BootstrapTest(x, y []float64, q, alpha float64, alt Alternative) (lo, hi, p float64) {
	ratios := bootstrapRatios(x, y, q)
	if ratios == nil {
		return math.NaN(), math.NaN(), math.NaN()
	}
	lo, hi = quantileSorted(ratios, alpha/2), quantileSorted(ratios, 1-alpha/2)
	return lo, hi, bootstrapP(ratios, 1, alt)
}

// bootstrapP returns the bootstrap p-value of "ratio = at" against alt from sorted resampled
// ratios: Greater counts the resamples at or below at, Less those at or above.
func bootstrapP(ratios []float64, at float64, alt Alternative) float64 {
	var below, above float64
	for _, r := range ratios {
		switch {
		case r < at:
			below++
		case r > at:
			above++
		default:
			below += 0.5
			above += 0.5
		}
	}
	b := float64(len(ratios))
	switch alt {
	case Greater:
		return (below + 1) / (b + 1)
	case Less:
		return (above + 1) / (b + 1)
	}
	return math.Min(1, 2*(math.Min(below, above)+1)/(b+1))
}

// bootstrapRatios returns the sorted resampled ratios q(y)/q(x), or nil when a sample is
// empty or the x statistic is 0 in most resamples.
func bootstrapRatios(x, y []float64, q float64) []float64 {
	if len(x) == 0 || len(y) == 0 {
		return nil
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
		return nil
	}
	sort.Float64s(ratios)
	return ratios
}

// bootstrapMinN returns the fewest samples per side a bootstrap of the q-quantile needs: six
// (as for any percentile interval at 95%), and enough that two samples lie above the quantile,
// so that the tail the quantile describes is in the data at all (200 for a p99).
func bootstrapMinN(q float64) int {
	n := 6
	if q > 0 && q < 1 {
		n = max(n, int(math.Ceil(2/(1-q)-1e-9)))
	}
	return n
}

// ShiftRatioCI returns the distribution-free interval at level 1−alpha for the ratio y/x that
// goes with the two-sided Mann-Whitney U test (Moses' interval for a shift of log values):
// order the n1·n2 ratios y_j/x_i and take the C-th from each end, C the largest count with
// P(U < C) ≤ alpha/2. It leaves 1 out exactly when the U test rejects at alpha (without ties).
// It returns NaN bounds when a value is not positive or the samples are too few for any
// interval at that level.
func ShiftRatioCI(x, y []float64, alpha float64) (lo, hi float64) {
	n1, n2 := len(x), len(y)
	if n1 == 0 || n2 == 0 {
		return math.NaN(), math.NaN()
	}
	d := make([]float64, 0, n1*n2)
	for _, a := range x {
		for _, b := range y {
			if !(a > 0) || !(b > 0) {
				return math.NaN(), math.NaN()
			}
			d = append(d, math.Log(b/a))
		}
	}
	sort.Float64s(d)
	c := uCritical(n1, n2, alpha/2)
	if c < 1 {
		return math.NaN(), math.NaN()
	}
	return math.Exp(d[c-1]), math.Exp(d[len(d)-c])
}

// uCritical returns the largest C with P(U ≤ C−1) ≤ tail under the null hypothesis (no ties):
// exact up to exactMaxN values, the normal approximation above. 0 means none.
func uCritical(n1, n2 int, tail float64) int {
	if n1+n2 > exactMaxN {
		mu := float64(n1*n2) / 2
		sd := math.Sqrt(float64(n1*n2) * float64(n1+n2+1) / 12)
		// P(U ≤ c−1) ≈ Φ((c−1+0.5−mu)/sd) ≤ tail
		z := -normalQuantileUpper(tail)
		c := int(math.Floor(mu + z*sd + 0.5))
		return max(c, 0)
	}
	// cnt[i][j][u]: arrangements of i x's and j y's with U = u, built up as in Mann and Whitney.
	prev := make([][]float64, n2+1)
	for j := range prev {
		prev[j] = make([]float64, 1)
		prev[j][0] = 1
	}
	for i := 1; i <= n1; i++ {
		cur := make([][]float64, n2+1)
		cur[0] = []float64{1}
		for j := 1; j <= n2; j++ {
			cur[j] = make([]float64, i*j+1)
			for u := range cur[j] {
				// the largest value is an x (adds j to U) or a y (adds nothing)
				if u-j >= 0 && u-j < len(prev[j]) {
					cur[j][u] += prev[j][u-j]
				}
				if u < len(cur[j-1]) {
					cur[j][u] += cur[j-1][u]
				}
			}
		}
		prev = cur
	}
	dist := prev[n2]
	var total float64
	for _, c := range dist {
		total += c
	}
	c, cum := 0, 0.0
	for u := 0; u < len(dist); u++ {
		cum += dist[u]
		if cum/total > tail {
			break
		}
		c = u + 1 // P(U ≤ u) ≤ tail, so C = u+1 qualifies
	}
	return c
}

// normalQuantileUpper returns z with P(Z > z) = p for a standard normal Z.
func normalQuantileUpper(p float64) float64 { return math.Sqrt2 * math.Erfinv(1-2*p) }

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
// order statistics (type 7); NaN for an empty slice. compare's statistics across runs are the
// one exception to perflab's nearest-rank quantile (models.Quantile, docs/analyze.md): their
// figures are in every compare and gate report, and nearest rank would move them.
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
