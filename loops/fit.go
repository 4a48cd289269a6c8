package loops

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// DefaultConfidence is the level of the fits' confidence intervals.
const DefaultConfidence = 0.95

// PoorR2 is the R² under which a fit gets a warning: the line explains less than 80% of how
// the mean time moves with N.
const PoorR2 = 0.8

// minShare is the share of the fitted cycles an N must carry to count as a distinct N when
// judging whether N varied: 1%.
const minShare = 0.01

// ErrNoSpread is returned by FitPoints when the points have fewer than two distinct N.
var ErrNoSpread = errors.New("batch fit needs at least two distinct N")

// Point is one observation for FitPoints: the mean time T (µs) of the cycles (or of a sweep
// point) that carried N requests, and its weight (how many cycles it averages; 1 for a sweep
// point).
type Point struct {
	N, TUS, Weight float64
}

// FitPoints fits T = T_fixed + T_per_req·N by weighted least squares over the points and gives
// each parameter's confidence interval at level conf (Student's t, points−2 degrees of
// freedom; none with fewer than 3 points, which a warning says).
func FitPoints(pts []Point, conf float64) (*Fit, []string, error) {
	if conf <= 0 || conf >= 1 {
		conf = DefaultConfidence
	}
	xs, ys, ws := make([]float64, len(pts)), make([]float64, len(pts)), make([]float64, len(pts))
	distinct := map[float64]bool{}
	for i, p := range pts {
		xs[i], ys[i], ws[i] = p.N, p.TUS, math.Max(p.Weight, 0)
		if ws[i] == 0 {
			ws[i] = 1
		}
		distinct[p.N] = true
	}
	if len(distinct) < 2 {
		return nil, nil, ErrNoSpread
	}
	alpha, beta := stat.LinearRegression(xs, ys, ws, false)
	f := &Fit{TFixedUS: alpha, TPerReqUS: beta, Points: len(pts), CILevel: conf}
	f.R2 = stat.RSquared(xs, ys, ws, alpha, beta)
	if beta > 0 {
		f.ThroughputMaxPerS = 1e6 / beta
	}
	var warns []string
	df := float64(len(pts) - 2)
	f.TFixedCI, f.TPerReqCI = [2]float64{alpha, alpha}, [2]float64{beta, beta}
	if df < 1 {
		warns = append(warns, fmt.Sprintf("batch fit: %d points, need at least 3 for a confidence interval", len(pts)))
		return f.rounded(), warns, nil
	}
	// Weights are relative (cycles per N): scale them to sum to the number of points, so that
	// the residual variance is per point.
	var sw float64
	for _, w := range ws {
		sw += w
	}
	var sse, mx, sxx float64
	for i := range xs {
		w := ws[i] * float64(len(xs)) / sw
		r := ys[i] - (alpha + beta*xs[i])
		sse += w * r * r
		mx += w * xs[i]
	}
	mx /= float64(len(xs))
	for i := range xs {
		w := ws[i] * float64(len(xs)) / sw
		sxx += w * (xs[i] - mx) * (xs[i] - mx)
	}
	s2 := sse / df
	tq := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(1 - (1-conf)/2)
	seB := math.Sqrt(s2 / sxx)
	seA := math.Sqrt(s2 * (1/float64(len(xs)) + mx*mx/sxx))
	f.TPerReqCI = [2]float64{beta - tq*seB, beta + tq*seB}
	f.TFixedCI = [2]float64{alpha - tq*seA, alpha + tq*seA}
	return f.rounded(), warns, nil
}

func (f *Fit) rounded() *Fit {
	g := *f
	g.TFixedUS, g.TPerReqUS = round(f.TFixedUS, 3), round(f.TPerReqUS, 4)
	g.TFixedCI = [2]float64{round(f.TFixedCI[0], 3), round(f.TFixedCI[1], 3)}
	g.TPerReqCI = [2]float64{round(f.TPerReqCI[0], 4), round(f.TPerReqCI[1], 4)}
	g.R2 = round(f.R2, 4)
	g.ThroughputMaxPerS = math.Round(f.ThroughputMaxPerS)
	return &g
}

// Check returns the warnings a fit deserves: a poor R², a T_per_req that is not positive, or
// an interval that includes zero.
func (f *Fit) Check() []string {
	var w []string
	if f.R2 < PoorR2 {
		w = append(w, fmt.Sprintf("batch fit is poor: R² = %.2f (under %.1f), the time does not grow linearly with N", f.R2, PoorR2))
	}
	if f.TPerReqUS <= 0 {
		w = append(w, fmt.Sprintf("batch fit: T_per_req = %.3f µs is not positive: the time does not grow with N, so there is no throughput limit from it", f.TPerReqUS))
	} else if f.TPerReqCI[0] <= 0 && f.TPerReqCI[1] > f.TPerReqCI[0] {
		w = append(w, fmt.Sprintf("batch fit: T_per_req's %.0f%% interval [%.3f, %.3f] µs includes 0", 100*f.CILevel, f.TPerReqCI[0], f.TPerReqCI[1]))
	}
	return w
}

// fitThread fits the busy time of a thread's cycles that received requests, grouped by N and
// weighted by their cycles, and gives T_per_req by N range (1, 2-3, 4-7, 8-15, ...).
func fitThread(groups []NCycles, conf float64) (*Fit, []NRange, []string) {
	var pts []Point
	var fitted uint64
	for _, g := range groups {
		if g.N > 0 {
			pts = append(pts, Point{N: float64(g.N), TUS: g.BusyUS, Weight: float64(g.Cycles)})
			fitted += g.Cycles
		}
	}
	var warns []string
	distinct, top, topN := 0, uint64(0), 0
	for _, g := range groups {
		if g.N > 0 && float64(g.Cycles) >= minShare*float64(fitted) {
			distinct++
		}
		if g.N > 0 && g.Cycles > top {
			top, topN = g.Cycles, g.N
		}
	}
	if fitted == 0 {
		return nil, nil, []string{"no cycle received a request: no batch fit"}
	}
	if distinct < 2 {
		warns = append(warns, fmt.Sprintf("N barely varies: %.0f%% of the cycles that received requests carried N = %d, so T_per_req cannot be told apart from T_fixed (more clients, or a sweep, make N vary)",
			100*float64(top)/float64(fitted), topN))
	}
	f, w, err := FitPoints(pts, conf)
	warns = append(warns, w...)
	if err != nil {
		return nil, nil, append(warns, "no batch fit: "+err.Error())
	}
	warns = append(warns, f.Check()...)
	var ranges []NRange
	for lo := 1; lo <= maxN; lo *= 2 {
		hi := 2*lo - 1
		var r NRange
		var sn, st float64
		for _, g := range groups {
			if g.N >= lo && g.N <= hi {
				r.Cycles += g.Cycles
				sn += float64(g.N) * float64(g.Cycles)
				st += g.BusyUS * float64(g.Cycles)
			}
		}
		if r.Cycles == 0 {
			continue
		}
		r.NFrom, r.NTo = lo, hi
		r.MeanN = round(sn/float64(r.Cycles), 3)
		r.MeanUS = round(st/float64(r.Cycles), 3)
		r.TPerReqUS = round((st/float64(r.Cycles)-f.TFixedUS)/(sn/float64(r.Cycles)), 4)
		ranges = append(ranges, r)
	}
	return f, ranges, warns
}
