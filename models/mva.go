package models

import (
	"errors"
	"math"
)

// ClosedLoop is a closed queueing network: Clients clients each think for ThinkUS µs, then issue
// a request that visits every station once, spending DemandsUS[i] µs of service at station i
// (service demand: visits × service time). Stations are FCFS single servers; DelayUS is time
// spent in pure delay (a network link's latency, with no queueing).
type ClosedLoop struct {
	Clients   int
	ThinkUS   float64   // µs per cycle at the client, outside the system
	DemandsUS []float64 // µs of service demand per request at each queueing station
	DelayUS   float64   // µs per request of pure delay (no queueing), e.g. link latency
}

// MVAResult is the steady state of a ClosedLoop.
type MVAResult struct {
	ThroughputPerS float64   // completed requests per second
	ResponseUS     float64   // mean time in the system per request (delay + queueing + service), µs
	QueueLen       []float64 // mean requests at each station (waiting or in service)
	Utilization    []float64 // busy fraction of each station, 0..1
	// BottleneckPerS is the asymptotic throughput bound 1/max(D_i), requests/s (0 with no demand).
	BottleneckPerS float64
}

// MVA solves the closed loop exactly by mean value analysis (Reiser and Lavenberg): for n = 1..N
// clients, R_i(n) = D_i·(1 + Q_i(n−1)), X(n) = n / (Z + delay + Σ R_i(n)), Q_i(n) = X(n)·R_i(n).
// Time is in µs, throughput in requests/s.
func MVA(c ClosedLoop) (MVAResult, error) {
	if c.Clients < 1 {
		return MVAResult{}, errors.New("mva: need at least one client")
	}
	if c.Clients > 1_000_000 {
		return MVAResult{}, errors.New("mva: more than 1e6 clients")
	}
	if c.ThinkUS < 0 || c.DelayUS < 0 {
		return MVAResult{}, errors.New("mva: negative think time or delay")
	}
	k := len(c.DemandsUS)
	q := make([]float64, k)
	r := make([]float64, k)
	maxD := 0.0
	for _, d := range c.DemandsUS {
		if d < 0 {
			return MVAResult{}, errors.New("mva: negative service demand")
		}
		maxD = math.Max(maxD, d)
	}
	var x, resp float64
	for n := 1; n <= c.Clients; n++ {
		resp = c.DelayUS
		for i, d := range c.DemandsUS {
			r[i] = d * (1 + q[i])
			resp += r[i]
		}
		cycle := c.ThinkUS + resp
		if cycle <= 0 {
			return MVAResult{}, errors.New("mva: cycle of zero time")
		}
		x = float64(n) / cycle // per µs
		for i := range q {
			q[i] = x * r[i]
		}
	}
	res := MVAResult{ThroughputPerS: x * 1e6, ResponseUS: resp, QueueLen: q, Utilization: make([]float64, k)}
	for i, d := range c.DemandsUS {
		res.Utilization[i] = x * d
	}
	if maxD > 0 {
		res.BottleneckPerS = 1e6 / maxD
	}
	return res, nil
}
