package analyzers

import (
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/perflab/perflab/models"
)

// LittlePoint is one group of measurements for a Little's-law check: the mean requests in
// flight L, the throughput λ (requests/s), and the measured mean response time W (µs).
type LittlePoint struct {
	Label          string
	InFlight       float64
	ThroughputPerS float64
	RTTMeasuredUS  float64 // the MEAN response time: the W of L = λ·W
	RTTMedianUS    float64 // the median, shown apart (0: not given)
}

// LittleFromTable checks Little's law on each point: the predicted response time L/λ against
// the measured one, as seed 003 §3 does. A point with no throughput predicts 0.
func LittleFromTable(points []LittlePoint) []LittleRow {
	rows := make([]LittleRow, 0, len(points))
	for _, p := range points {
		r := LittleRow{Label: p.Label, InFlight: p.InFlight, ThroughputPerS: p.ThroughputPerS,
			RTTMeasuredUS: p.RTTMeasuredUS, RTTMedianUS: p.RTTMedianUS, RTTPredictedUS: models.ResponseTime(p.InFlight, p.ThroughputPerS)}
		if p.RTTMeasuredUS > 0 && r.RTTPredictedUS > 0 {
			r.Error = r.RTTPredictedUS/p.RTTMeasuredUS - 1
		}
		rows = append(rows, r)
	}
	return rows
}

// BatchPoint is one (N, T) measurement for the batch model: N requests per cycle (or in
// flight), T the cycle time or round-trip time in µs. Weight is how many samples the point
// stands for (0 means 1).
type BatchPoint struct {
	N, TUS float64
	Weight float64
}

// FitBatchModel fits T = T_fixed + T_per_req·N by least squares (gonum) and gives each
// parameter's confidence interval at level conf from Student's t with points-2 degrees of
// freedom, R², the residuals and the throughput limit 1/T_per_req. With fewer than 3 points
// there is no interval (a warning says so); with fewer than 2 distinct N there is no fit.
func FitBatchModel(points []BatchPoint, conf float64) (*BatchFit, []string, error) {
	if conf <= 0 || conf >= 1 {
		conf = DefaultConfidence
	}
	xs := make([]float64, len(points))
	ys := make([]float64, len(points))
	ws := make([]float64, len(points))
	distinct := map[float64]bool{}
	for i, p := range points {
		xs[i], ys[i], ws[i] = p.N, p.TUS, p.Weight
		if ws[i] <= 0 {
			ws[i] = 1
		}
		distinct[p.N] = true
	}
	if len(distinct) < 2 {
		return nil, nil, models.ErrNoFit
	}
	// The points are group means; weights only matter for which groups exist, so the fit is
	// unweighted (each N one point), as in seed 003.
	alpha, beta := stat.LinearRegression(xs, ys, nil, false)
	f := &BatchFit{TFixedUS: alpha, TPerReqUS: beta, Points: len(points)}
	f.R2 = stat.RSquared(xs, ys, nil, alpha, beta)
	var sse float64
	f.Residuals = make([]float64, len(xs))
	for i := range xs {
		r := ys[i] - (alpha + beta*xs[i])
		f.Residuals[i] = round3(r)
		sse += r * r
	}
	if beta > 0 {
		f.ThroughputMax = 1e6 / beta
	}
	var warns []string
	df := float64(len(xs) - 2)
	if df < 1 {
		warns = append(warns, fmt.Sprintf("batch fit: %d points, need at least 3 for a confidence interval", len(xs)))
		f.TFixedCI = [2]float64{alpha, alpha}
		f.TPerReqCI = [2]float64{beta, beta}
		return f, warns, nil
	}
	mx := stat.Mean(xs, nil)
	var sxx float64
	for _, x := range xs {
		sxx += (x - mx) * (x - mx)
	}
	s2 := sse / df
	seB := math.Sqrt(s2 / sxx)
	seA := math.Sqrt(s2 * (1/float64(len(xs)) + mx*mx/sxx))
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(1 - (1-conf)/2)
	f.TFixedCI = [2]float64{alpha - t*seA, alpha + t*seA}
	f.TPerReqCI = [2]float64{beta - t*seB, beta + t*seB}
	if len(xs) < 5 {
		warns = append(warns, fmt.Sprintf("batch fit: only %d points; the intervals are wide", len(xs)))
	}
	return f, warns, nil
}

// Refinement is one step of the load-dependent refinement of the batch model (seed 003 §5.4):
// the marginal cost of a request between two loads, ΔT/ΔN, which grows with N when per-request
// work suffers from load (cache pressure, batching).
type Refinement struct {
	NFrom     float64 `json:"n_from"`
	N         float64 `json:"n"`
	TPerReqUS float64 `json:"t_per_req_us"` // µs per request between NFrom and N
}

// RefineBatch returns the marginal per-request cost between consecutive points (sorted by N).
// It is reported when the residuals of the straight-line fit show curvature.
func RefineBatch(points []BatchPoint) []Refinement {
	ps := append([]BatchPoint(nil), points...)
	sort.Slice(ps, func(i, j int) bool { return ps[i].N < ps[j].N })
	var out []Refinement
	for i := 1; i < len(ps); i++ {
		dn := ps[i].N - ps[i-1].N
		if dn <= 0 {
			continue
		}
		out = append(out, Refinement{NFrom: ps[i-1].N, N: ps[i].N, TPerReqUS: round3((ps[i].TUS - ps[i-1].TUS) / dn)})
	}
	return out
}

// curved reports whether residuals change sign twice or more in the pattern +,-,+ (a convex
// curve under a straight line): the load-dependent case.
func curved(res []float64) bool {
	if len(res) < 3 {
		return false
	}
	return res[0] > 0 && res[len(res)-1] > 0 || res[0] < 0 && res[len(res)-1] < 0
}

func round3(v float64) float64 { return math.Round(v*1e3)/1e3 + 0 }

// secs converts ns to seconds, rounded to the microsecond.
func secs(ns int64) float64 { return math.Round(float64(ns)/1e3) / 1e6 }
