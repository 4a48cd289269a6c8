package lab

import (
	"fmt"
	"math"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/models"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/venusd"
)

// LittleTolerance is how far L/λ may be from the measured mean RTT at a point before the sweep
// warns: 10%, the bound; a larger gap means the measurement windows of L, λ and W differ.
const LittleTolerance = 0.10

// saturationGain is how close to the sweep's highest throughput a point must come to count as
// saturated: within 10%, about the run-to-run noise of a one-second point on a shared machine.
const saturationGain = 0.10

// histogramBuckets is how many buckets the reported RTT histogram has; modeBucketRatio is the
// width ratio of the fine buckets the populations are found on (2%: well below the spread of a
// population, and bounded in count however many samples there are).
const (
	histogramBuckets = 20
	histogramTop     = 0.999 // the last bucket holds the slowest 0.1%, however far they reach
	modeBucketRatio  = 1.02
)

// analyze fills the Little's-law rows, and each series' batch fit, predictions, histogram and
// populations.
func analyze(res *Result, cfg *Config) {
	for i := range res.Points {
		p := &res.Points[i]
		checkLittle(res, p)
		if p.ShmSpin != nil && (!p.ShmSpin.Pays || p.ShmSpin.CPUsShort) {
			res.Warnings = append(res.Warnings, p.Label()+": "+p.ShmSpin.Note)
		}
	}
	for si := range res.Series {
		s := &res.Series[si]
		fitSeries(res, s)
		s.Saturation = saturation(res.Points, s.points)
		runQueueRises(res, s)
		evidenceRises(res, s)
		if len(s.points) > 0 {
			seriesLatency(res, s)
		}
	}
	if len(res.Series) > 0 {
		res.BatchFit = res.Series[0].BatchFit
	}
	compareTransports(res)
}

// checkLittle adds point p's Little's-law rows to res, from the clients' counters and, when the
// point kept a trace, from the trace measured apart from them, with a warning for each that is off
// by more than LittleTolerance.
func checkLittle(res *Result, p *Point) {
	row := analyzers.LittleFromTable([]analyzers.LittlePoint{{Label: p.Label(), InFlight: p.InflightMean,
		ThroughputPerS: p.ThroughputPerS, RTTMeasuredUS: p.RTTUS.Mean, RTTMedianUS: p.RTTUS.P50}})[0]
	res.LittlesLaw = append(res.LittlesLaw, roundLittle(row))
	if math.Abs(row.Error) > LittleTolerance {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%s: Little's law off by %.1f%%", p.Label(), 100*row.Error))
	}
	if p.Trace != "" {
		s, err := analyzers.Analyze(protocol.Files([]string{p.Trace}, nil), analyzers.Options{Protocol: "venus"})
		if err != nil {
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s: analyze trace: %v", p.Label(), err))
			return
		}
		// L from the trace's in-flight integral, λ from its completed round trips, W their
		// mean: measured apart from the clients' own counters.
		if s.InFlight == nil || len(s.LittlesLaw) == 0 || s.RoundTrips.RTTUS.Mean <= 0 {
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s: the trace has no round trips to check Little's law on", p.Label()))
			return
		}
		r := analyzers.LittleFromTable([]analyzers.LittlePoint{{Label: p.Label() + " trace", InFlight: s.InFlight.Mean,
			ThroughputPerS: s.LittlesLaw[0].ThroughputPerS, RTTMeasuredUS: s.RoundTrips.RTTUS.Mean, RTTMedianUS: s.RoundTrips.RTTUS.P50}})[0]
		res.LittlesLaw = append(res.LittlesLaw, roundLittle(r))
		if math.Abs(r.Error) > LittleTolerance {
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s: Little's law off by %.1f%% in the trace", p.Label(), 100*r.Error))
		}
	}
}

// fitSeries fits the batch model to the series' points and sets its fit and predictions, or warns
// when it cannot.
func fitSeries(res *Result, s *Series) {
	var pts []analyzers.BatchPoint
	for _, k := range s.points {
		p := &res.Points[k]
		pts = append(pts, analyzers.BatchPoint{N: p.InflightMean, TUS: p.RTTUS.Mean, Weight: float64(p.Requests)})
	}
	fit, warns, err := analyzers.FitBatchModel(pts, analyzers.DefaultConfidence)
	if err == nil {
		s.BatchFit = roundFit(fit)
		for _, w := range warns {
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s/%s/d%d: %s", s.Transport, s.Mode, s.Depth, w))
		}
		b := models.Batch{TFixedUS: fit.TFixedUS, TPerReqUS: fit.TPerReqUS}
		for _, k := range s.points {
			p := &res.Points[k]
			s.Predictions = append(s.Predictions, Prediction{Clients: p.Clients, InFlight: p.InflightMean,
				CyclePredictedUS: round3(b.Cycle(p.InflightMean)), ThroughputPredictedPerS: math.Round(b.Throughput(p.InflightMean)),
				ThroughputMeasuredPerS: p.ThroughputPerS})
		}
	} else {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%s/%s/d%d: no batch fit: %v", s.Transport, s.Mode, s.Depth, err))
	}
}

// rttShape returns the histogram of RTT samples (µs) and the populations found in it.
func rttShape(samples []float64) ([]analyzers.HistBucket, []analyzers.Mode) {
	h := histogram(samples, histogramBuckets, histogramTop)
	var modes []analyzers.Mode
	vs, cs := fineBuckets(samples)
	for _, m := range analyzers.FindModes(vs, cs) {
		modes = append(modes, analyzers.Mode{CenterUS: round3(m.CenterUS), Share: round3(m.Share),
			LowUS: round3(m.LowUS), HighUS: round3(m.HighUS)})
	}
	return h, modes
}

// seriesLatency sets the series' RTT histogram, populations and loop phase times from its last
// point (the most clients), then drops that point's samples and loop counters.
func seriesLatency(res *Result, s *Series) {
	last := &res.Points[s.points[len(s.points)-1]]
	s.HistogramClients = last.Clients
	h, modes := rttShape(last.samples)
	s.Histogram, s.Modes = h, append(s.Modes, modes...)
	last.samples = nil
	if d := last.loop; d != nil && d.Cycle.N() > 0 {
		for _, ph := range []struct {
			name string
			h    *venusd.LoopHist
		}{{"poll", &d.Poll}, {"execute", &d.Exec}, {"flush", &d.Flush}, {"cycle", &d.Cycle}} {
			s.LoopPhases = append(s.LoopPhases, PhaseTiming{Phase: ph.name, P50US: round3(ph.h.Quantile(0.5) / 1e3),
				P90US: round3(ph.h.Quantile(0.9) / 1e3), P99US: round3(ph.h.Quantile(0.99) / 1e3)})
		}
		last.loop = nil
	}
}

// saturation returns the smallest client count whose throughput is within saturationGain of
// the series' highest (0 when only the last point gets there: no plateau was measured).
func saturation(points []Point, idx []int) int {
	best := 0.0
	for _, k := range idx {
		best = math.Max(best, points[k].ThroughputPerS)
	}
	for i, k := range idx {
		if points[k].ThroughputPerS >= best*(1-saturationGain) {
			if i == len(idx)-1 {
				return 0
			}
			return points[k].Clients
		}
	}
	return 0
}

// histogram buckets sorted samples (µs) into at most n buckets of equal width ratio from the
// smallest sample to the top quantile; the last bucket reaches the largest sample.
func histogram(sorted []float64, n int, top float64) []analyzers.HistBucket {
	if len(sorted) == 0 || n < 1 {
		return nil
	}
	lo, hi := math.Max(sorted[0], 0.001), math.Max(models.Quantile(sorted, top), 0.001)
	if hi <= lo {
		return []analyzers.HistBucket{{LowUS: round3(lo), HighUS: round3(hi), Count: uint64(len(sorted))}}
	}
	ratio := math.Pow(hi/lo, 1/float64(n))
	out := make([]analyzers.HistBucket, n)
	edge := lo
	for i := range out {
		out[i].LowUS = round3(edge)
		edge *= ratio
		out[i].HighUS = round3(edge)
	}
	out[n-1].HighUS = round3(sorted[len(sorted)-1])
	k := 0
	for _, v := range sorted {
		b := int(math.Log(math.Max(v, lo)/lo) / math.Log(ratio))
		k = max(0, min(b, n-1))
		out[k].Count++
	}
	return out
}

// fineBuckets returns bucket centres and counts of sorted samples (µs) in buckets of width ratio
// modeBucketRatio, for FindModes.
func fineBuckets(sorted []float64) (vs, cs []float64) {
	if len(sorted) == 0 {
		return nil, nil
	}
	lo := math.Max(sorted[0], 0.001)
	lr := math.Log(modeBucketRatio)
	last := -1
	for _, v := range sorted {
		b := int(math.Log(math.Max(v, lo)/lo) / lr)
		if b != last {
			vs = append(vs, lo*math.Exp((float64(b)+0.5)*lr))
			cs = append(cs, 0)
			last = b
		}
		cs[len(cs)-1]++
	}
	return vs, cs
}

func roundLittle(r analyzers.LittleRow) analyzers.LittleRow {
	r.InFlight, r.ThroughputPerS = round3(r.InFlight), math.Round(r.ThroughputPerS)
	r.RTTPredictedUS, r.RTTMeasuredUS, r.Error = round3(r.RTTPredictedUS), round3(r.RTTMeasuredUS), math.Round(r.Error*1e4)/1e4
	return r
}

func roundFit(f *analyzers.BatchFit) *analyzers.BatchFit {
	g := *f
	g.TFixedUS, g.TPerReqUS, g.R2 = round3(f.TFixedUS), round3(f.TPerReqUS), math.Round(f.R2*1e4)/1e4
	g.TFixedCI = [2]float64{round3(f.TFixedCI[0]), round3(f.TFixedCI[1])}
	g.TPerReqCI = [2]float64{round3(f.TPerReqCI[0]), round3(f.TPerReqCI[1])}
	g.ThroughputMax = math.Round(f.ThroughputMax)
	return &g
}
