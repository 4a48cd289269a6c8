package merge

import (
	"errors"
	"fmt"
	"math"
)

// MaxDriftPPM is the largest clock drift the estimate considers, in parts per million. Crystal
// oscillators drift by tens of ppm; a bound that reaches this far means the traffic did not
// bound the drift.
const MaxDriftPPM = 1000

// Estimate is where a host's clock lies relative to the reference's: a timestamp t (ns) of the
// host is t + Offset + Drift·(t − Ref) on the reference clock.
type Estimate struct {
	Ref                int64   // host-clock instant the drift is taken around (middle of the messages), ns
	Offset             float64 // ns
	OffsetLo, OffsetHi float64 // ns: every offset that keeps all one-way delays ≥ 0 lies here
	Drift              float64 // dimensionless (1e-6 is 1 ppm)
	DriftLo, DriftHi   float64
	Out, Back          int // messages reference→host and host→reference
}

// Map returns t (host clock, ns) on the reference clock.
func (e Estimate) Map(t int64) int64 {
	return t + int64(math.Round(e.Offset+e.Drift*float64(t-e.Ref)))
}

// ErrUnbounded says that the messages do not bound the clocks: traffic in one direction only, or
// too short a span for the drift.
var ErrUnbounded = errors.New("the traffic does not bound the clocks")

// ErrInconsistent says that no offset and drift keep every one-way delay non-negative: a clock
// stepped during the recording, or messages were matched wrongly (a recording started mid-stream
// or lost events).
var ErrInconsistent = errors.New("no clock offset and drift fit the messages")

// EstimateClock bounds the offset and drift of a host's clock against the reference's. out are
// messages from the reference (Send on the reference clock) to the host (Recv on the host's
// clock); back the other way. Each message says its receive ended after its send began:
//
//	out:  Recv + θ + δ·(Recv − Ref) ≥ Send      back:  Send + θ + δ·(Send − Ref) ≤ Recv
//
// so the feasible (θ, δ) form a convex polygon. For a drift δ, θ lies between
// f(δ) = max over out of (Send − Recv − δ·(Recv − Ref)) and g(δ) = min over back of
// (Recv − Send − δ·(Send − Ref)); f is convex and g concave, so the feasible drifts are the
// interval where g − f ≥ 0. The estimate is the drift where g − f is widest and the offset in the
// middle of [f, g] there (it assumes the fastest messages took as long each way); the intervals
// are the polygon's extent.
func EstimateClock(out, back []Msg) (Estimate, error) {
	var est Estimate
	est.Out, est.Back = len(out), len(back)
	if len(out) == 0 || len(back) == 0 {
		return est, fmt.Errorf("%w: %d messages one way, %d the other (both directions are needed)", ErrUnbounded, len(out), len(back))
	}
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, m := range out {
		lo, hi = min(lo, m.Recv), max(hi, m.Recv)
	}
	for _, m := range back {
		lo, hi = min(lo, m.Send), max(hi, m.Send)
	}
	ref := lo + (hi-lo)/2
	est.Ref = ref
	type line struct{ c, x float64 } // c − δ·x
	lower := make([]line, len(out))
	for i, m := range out {
		lower[i] = line{float64(m.Send - m.Recv), float64(m.Recv - ref)}
	}
	upper := make([]line, len(back))
	for i, m := range back {
		upper[i] = line{float64(m.Recv - m.Send), float64(m.Send - ref)}
	}
	f := func(d float64) float64 {
		v := math.Inf(-1)
		for _, l := range lower {
			v = max(v, l.c-d*l.x)
		}
		return v
	}
	g := func(d float64) float64 {
		v := math.Inf(1)
		for _, l := range upper {
			v = min(v, l.c-d*l.x)
		}
		return v
	}
	h := func(d float64) float64 { return g(d) - f(d) }
	const dmax = MaxDriftPPM * 1e-6
	best := argmax(h, -dmax, dmax)
	if h(best) < 0 {
		return est, fmt.Errorf("%w: at best some message arrives %.0f ns before it was sent", ErrInconsistent, -h(best))
	}
	if h(-dmax) >= 0 || h(dmax) >= 0 {
		return est, fmt.Errorf("%w: any drift within ±%d ppm fits (the messages span %.3f s; a longer recording bounds it)", ErrUnbounded, MaxDriftPPM, float64(hi-lo)/1e9)
	}
	est.DriftLo = root(h, -dmax, best)
	est.DriftHi = root(h, dmax, best)
	est.Drift = best
	est.Offset = (f(best) + g(best)) / 2
	est.OffsetLo = f(argmax(func(d float64) float64 { return -f(d) }, est.DriftLo, est.DriftHi))
	est.OffsetHi = g(argmax(g, est.DriftLo, est.DriftHi))
	return est, nil
}

// argmax returns where the concave function h is largest on [a, b] (golden-section search).
func argmax(h func(float64) float64, a, b float64) float64 {
	const r = 0.6180339887498949
	c, d := b-r*(b-a), a+r*(b-a)
	hc, hd := h(c), h(d)
	for i := 0; i < 200 && b-a > 1e-15; i++ {
		if hc < hd {
			a, c, hc = c, d, hd
			d = a + r*(b-a)
			hd = h(d)
		} else {
			b, d, hd = d, c, hc
			c = b - r*(b-a)
			hc = h(c)
		}
	}
	return (a + b) / 2
}

// root returns where h crosses zero between out (h < 0) and in (h ≥ 0), on the in side.
func root(h func(float64) float64, out, in float64) float64 {
	for i := 0; i < 200 && math.Abs(in-out) > 1e-15; i++ {
		m := (out + in) / 2
		if h(m) >= 0 {
			in = m
		} else {
			out = m
		}
	}
	return in
}
