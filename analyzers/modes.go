package analyzers

import (
	"math"
	"sort"
)

// MaxModes is the largest number of populations FindModes looks for.
const MaxModes = 3

// minModeShare is the smallest share a population may have to be reported; smaller components
// of a mixture are noise in the tail. minModeCount is the fewest values (by weight) it may
// hold: one slow round trip among 30 (a connection's first) is an outlier, not a population.
const (
	minModeShare = 0.03
	minModeCount = 3
)

// FindModes finds the populations of a latency distribution given as (value, count) pairs —
// a histogram's bucket centres, or samples with count 1 — in any unit. It fits Gaussian
// mixtures of 1..MaxModes components to the values by expectation-maximisation, chooses the
// logarithms of the values by expectation-maximisation, and keeps the largest number of
// components that lowers the Bayesian information criterion while every two neighbouring
// components stay apart (Ashman's D > 2: two humps, not one skewed hump). It returns each
// population's centre (the median of the values most likely its), share (its weight) and
// range (exp of mean ± 2 standard deviations, within those values), sorted by centre. Values
// must be positive; with fewer than 20 samples it returns one mode.
//
// The fit is on logarithms because latency populations are skewed to the right; on seed 003's
// 16-client histogram it finds the 18% fast / 82% slow split that a fit on the raw values
// misses (it gives 14%).
func FindModes(values, counts []float64) []Mode {
	var xs, ws, vs []float64
	var n float64
	for i, v := range values {
		if i < len(counts) && counts[i] > 0 && v > 0 && !math.IsInf(v, 0) {
			vs = append(vs, v)
			xs = append(xs, math.Log(v))
			ws = append(ws, counts[i])
			n += counts[i]
		}
	}
	if len(xs) == 0 {
		return nil
	}
	best := fitMixture(xs, ws, nil, 1, nil)
	if n >= 20 {
		bestBIC := best.bic(n)
		order := byValue(xs)
		for k := 2; k <= MaxModes && k <= len(xs); k++ {
			for _, start := range [...]startFunc{startMixture, gapStart} {
				g := fitMixture(xs, ws, order, k, start)
				if g == nil || g.minWeight() < minModeShare || g.minWeight()*n < minModeCount || !g.separated() {
					continue
				}
				if b := g.bic(n); b < bestBIC-10 { // a clear gain, not a marginal one
					best, bestBIC = g, b
				}
			}
		}
	}
	lo, hi, med := best.seen(xs, ws)
	modes := make([]Mode, len(best.mu))
	for i := range best.mu {
		sd := math.Sqrt(best.v[i])
		c := math.Exp(best.mu[i])
		if med[i] >= 0 {
			c = vs[med[i]]
		}
		modes[i] = Mode{CenterUS: c, Share: best.w[i],
			LowUS: math.Exp(max(best.mu[i]-2*sd, lo[i])), HighUS: math.Exp(min(best.mu[i]+2*sd, hi[i]))}
	}
	sort.Slice(modes, func(i, j int) bool { return modes[i].CenterUS < modes[j].CenterUS })
	return modes
}

// seen returns, for each component, the least, the largest and the median (the lower middle,
// by weight) of the values xs (weights ws) most likely drawn from it: a range no wider than
// what was observed (mean ± 2 standard deviations of a component stretched by a few far values
// reaches values never seen, and misses the far ones), and a centre that is a value seen (the
// component's own median, exp of its mean, can fall between its values: 25 ms for three round
// trips of 45 µs, 189 µs and 301 ms); med holds its index in xs. A component no value is most
// likely drawn from gets an infinite range and a median of -1.
func (g *mixture) seen(xs, ws []float64) (lo, hi []float64, med []int) {
	k := len(g.w)
	lo, hi, med = make([]float64, k), make([]float64, k), make([]int, k)
	mass := make([]float64, k)
	for j := range lo {
		lo[j], hi[j], med[j] = math.Inf(1), math.Inf(-1), -1
	}
	own := make([]int, len(xs))
	for i, x := range xs {
		own[i] = -1
		if ws[i] <= 0 {
			continue
		}
		best, bp := 0, -1.0
		for j := range g.w {
			if p := g.w[j] * normPDF(x, g.mu[j], g.v[j]); p > bp {
				best, bp = j, p
			}
		}
		own[i] = best
		mass[best] += ws[i]
		lo[best], hi[best] = min(lo[best], x), max(hi[best], x)
	}
	acc := make([]float64, k)
	for _, i := range byValue(xs) {
		if j := own[i]; j >= 0 && med[j] < 0 {
			if acc[j] += ws[i]; acc[j] >= mass[j]/2 {
				med[j] = i
			}
		}
	}
	for j := range lo {
		if lo[j] > hi[j] { // no value is most likely its: keep mean ± 2 sd
			lo[j], hi[j] = math.Inf(-1), math.Inf(1)
		}
	}
	return lo, hi, med
}

type mixture struct {
	w, mu, v []float64
	ll       float64
}

func (g *mixture) bic(n float64) float64 {
	k := float64(3*len(g.w) - 1)
	return k*math.Log(n) - 2*g.ll
}

// separated reports whether every two neighbouring components have Ashman's D above 2.
func (g *mixture) separated() bool {
	idx := make([]int, len(g.mu))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return g.mu[idx[a]] < g.mu[idx[b]] })
	for k := 0; k+1 < len(idx); k++ {
		a, b := idx[k], idx[k+1]
		if math.Sqrt2*math.Abs(g.mu[a]-g.mu[b])/math.Sqrt(g.v[a]+g.v[b]) <= 2 {
			return false
		}
	}
	return true
}

func (g *mixture) minWeight() float64 {
	m := 1.0
	for _, w := range g.w {
		m = math.Min(m, w)
	}
	return m
}

// startFunc makes the EM's start for k components of the values xs (weights ws; order: their
// indices by value), or nil when it has none.
type startFunc func(xs, ws []float64, order []int, k int, total, varAll, floor float64) *mixture

// byValue returns the indices of xs in order of value.
func byValue(xs []float64) []int {
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return xs[idx[a]] < xs[idx[b]] })
	return idx
}

// fitMixture runs EM for k components from the start that start makes; one component needs
// no start (nor order).
func fitMixture(xs, ws []float64, order []int, k int, start startFunc) *mixture {
	total, mean, varAll := weightedMoments(xs, ws)
	// Resolution floor: a bucketed histogram has width; no component may be narrower than a
	// small fraction of the spread.
	floor := math.Max(varAll*1e-4, 1e-12)
	if k == 1 {
		return &mixture{w: []float64{1}, mu: []float64{mean}, v: []float64{math.Max(varAll, floor)}, ll: loglik(xs, ws, []float64{1}, []float64{mean}, []float64{math.Max(varAll, floor)})}
	}
	g := start(xs, ws, order, k, total, varAll, floor)
	if g == nil {
		return nil
	}
	em := newEMState(k)
	prev := math.Inf(-1)
	for iter := 0; iter < 500; iter++ {
		ll, ok := g.emStep(xs, ws, total, floor, em)
		if !ok {
			return nil
		}
		g.ll = ll
		if math.Abs(ll-prev) < 1e-9*math.Abs(ll)+1e-9 {
			break
		}
		prev = ll
	}
	g.ll = loglik(xs, ws, g.w, g.mu, g.v)
	return g
}

// weightedMoments returns the total weight of xs (weights ws), their weighted mean and
// variance.
func weightedMoments(xs, ws []float64) (total, mean, varAll float64) {
	for i, x := range xs {
		total += ws[i]
		mean += ws[i] * x
	}
	mean /= total
	for i, x := range xs {
		varAll += ws[i] * (x - mean) * (x - mean)
	}
	varAll /= total
	return total, mean, varAll
}

// startMixture is the EM's start for k components: the sorted mass split into k equal parts,
// each a component of its mean and a variance of varAll/k²; nil when a part is empty.
func startMixture(xs, ws []float64, idx []int, k int, total, varAll, floor float64) *mixture {
	g := &mixture{w: make([]float64, k), mu: make([]float64, k), v: make([]float64, k)}
	var acc float64
	part := 0
	sums := make([]float64, k)
	wts := make([]float64, k)
	for _, i := range idx {
		if acc >= float64(part+1)*total/float64(k) && part < k-1 {
			part++
		}
		sums[part] += ws[i] * xs[i]
		wts[part] += ws[i]
		acc += ws[i]
	}
	for j := 0; j < k; j++ {
		if wts[j] == 0 {
			return nil
		}
		g.mu[j] = sums[j] / wts[j]
		g.w[j] = wts[j] / total
		g.v[j] = math.Max(varAll/float64(k*k), floor)
	}
	return g
}

// gapStart is the EM's start for k components split at the k-1 widest gaps between
// neighbouring values: a small population far from the rest (a few blocking requests among
// fast ones) gets a component of its own, which a start from equal shares of the mass gives
// to the far tail of a wide one instead. Each part's variance is its own, at least floor; nil
// when the values have fewer than k distinct ones.
func gapStart(xs, ws []float64, idx []int, k int, total, varAll, floor float64) *mixture {
	if len(idx) < k {
		return nil
	}
	gaps := make([]int, 0, len(idx)-1) // gaps[g]: the position after which gap g lies
	for p := 0; p+1 < len(idx); p++ {
		if xs[idx[p+1]] > xs[idx[p]] {
			gaps = append(gaps, p)
		}
	}
	if len(gaps) < k-1 {
		return nil
	}
	sort.Slice(gaps, func(a, b int) bool {
		da, db := xs[idx[gaps[a]+1]]-xs[idx[gaps[a]]], xs[idx[gaps[b]+1]]-xs[idx[gaps[b]]]
		if da != db {
			return da > db
		}
		return gaps[a] < gaps[b]
	})
	cuts := append([]int(nil), gaps[:k-1]...)
	sort.Ints(cuts)
	g := &mixture{w: make([]float64, k), mu: make([]float64, k), v: make([]float64, k)}
	from := 0
	for j := 0; j < k; j++ {
		to := len(idx) - 1
		if j < k-1 {
			to = cuts[j]
		}
		var sw, sx float64
		for _, i := range idx[from : to+1] {
			sw += ws[i]
			sx += ws[i] * xs[i]
		}
		mu := sx / sw
		var sv float64
		for _, i := range idx[from : to+1] {
			sv += ws[i] * (xs[i] - mu) * (xs[i] - mu)
		}
		g.w[j], g.mu[j], g.v[j] = sw/total, mu, max(sv/sw, floor)
		from = to + 1
	}
	return g
}

// emState is the scratch of the EM steps of a k-component mixture.
type emState struct {
	resp, nk, sx, sxx []float64
}

func newEMState(k int) *emState {
	return &emState{resp: make([]float64, k), nk: make([]float64, k), sx: make([]float64, k), sxx: make([]float64, k)}
}

// emStep is one EM iteration: the responsibilities and the means, then the weights and
// variances about the new means. It returns the log-likelihood before the step, and false when
// a component lost all its weight.
func (g *mixture) emStep(xs, ws []float64, total, floor float64, em *emState) (float64, bool) {
	k := len(g.w)
	resp, nk, sx, sxx := em.resp, em.nk, em.sx, em.sxx
	for j := range nk {
		nk[j], sx[j], sxx[j] = 0, 0, 0
	}
	var ll float64
	for i, x := range xs {
		var s float64
		for j := 0; j < k; j++ {
			resp[j] = g.w[j] * normPDF(x, g.mu[j], g.v[j])
			s += resp[j]
		}
		if s <= 0 || math.IsNaN(s) {
			s = 1e-300
		}
		ll += ws[i] * math.Log(s)
		for j := 0; j < k; j++ {
			r := ws[i] * resp[j] / s
			nk[j] += r
			sx[j] += r * x
		}
	}
	for j := 0; j < k; j++ {
		if nk[j] <= 0 {
			return ll, false
		}
		g.mu[j] = sx[j] / nk[j]
	}
	for i, x := range xs {
		var s float64
		for j := 0; j < k; j++ {
			resp[j] = g.w[j] * normPDF(x, g.mu[j], g.v[j])
			s += resp[j]
		}
		if s <= 0 {
			continue
		}
		for j := 0; j < k; j++ {
			d := x - g.mu[j]
			sxx[j] += ws[i] * resp[j] / s * d * d
		}
	}
	for j := 0; j < k; j++ {
		g.w[j] = nk[j] / total
		g.v[j] = math.Max(sxx[j]/nk[j], floor)
	}
	return ll, true
}

func loglik(xs, ws, w, mu, v []float64) float64 {
	var ll float64
	for i, x := range xs {
		var s float64
		for j := range w {
			s += w[j] * normPDF(x, mu[j], v[j])
		}
		if s <= 0 {
			s = 1e-300
		}
		ll += ws[i] * math.Log(s)
	}
	return ll
}

func normPDF(x, mu, v float64) float64 {
	d := x - mu
	return math.Exp(-d*d/(2*v)) / math.Sqrt(2*math.Pi*v)
}
