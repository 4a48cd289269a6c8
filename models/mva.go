package models

import (
	"errors"
	"math"
)

// ClosedLoop is a closed queueing network: Clients clients each think for ThinkUS µs, then issue
// a request that visits every station once, spending DemandsUS[i] µs of service at station i
// (service demand: visits × service time). Stations are FCFS single servers unless Servers says
// otherwise; DelayUS is time spent in pure delay (a network link's latency, with no queueing).
type ClosedLoop struct {
	Clients   int
	ThinkUS   float64   // µs per cycle at the client, outside the system
	DemandsUS []float64 // µs of service demand per request at each queueing station
	DelayUS   float64   // µs per request of pure delay (no queueing), e.g. link latency
	// Servers is each station's number of servers (nil, or 0 at a station: one): a station of m
	// servers serves min(j, m) of its j requests at once, as P processors serve the runnable
	// threads. m need not be whole: 1.5 serves one request at full speed and two at 0.75 each,
	// 0.5 one at half speed (the share of the processors a machine's other work leaves).
	Servers []float64
}

// MVAResult is the steady state of a ClosedLoop.
type MVAResult struct {
	ThroughputPerS float64   // completed requests per second
	ResponseUS     float64   // mean time in the system per request (delay + queueing + service), µs
	QueueLen       []float64 // mean requests at each station (waiting or in service)
	Utilization    []float64 // busy fraction of each station, 0..1
	// BottleneckPerS is the asymptotic throughput bound 1/max(D_i/m_i), requests/s (0 with no
	// demand); Utilization is each station's busy share of its m_i servers.
	BottleneckPerS float64
}

// MVA solves the closed loop exactly by mean value analysis (Reiser and Lavenberg): for n = 1..N
// clients, R_i(n) = D_i·(1 + Q_i(n−1)), X(n) = n / (Z + delay + Σ R_i(n)), Q_i(n) = X(n)·R_i(n).
// A station of m > 1 servers is load-dependent (service rate min(j, m)/D_i with j requests
// there) and solved with its queue-length distribution: R_i(n) = Σ_j j·D_i/min(j, m)·p_i(j−1 | n−1),
// p_i(j | n) = X(n)·D_i/min(j, m)·p_i(j−1 | n−1), p_i(0 | n) the rest. Time is in µs, throughput
// in requests/s.
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
	if len(c.Servers) > k {
		return MVAResult{}, errors.New("mva: more server counts than stations")
	}
	servers := make([]float64, k)
	// p[i] is station i's queue-length distribution with one client fewer (multi-server only).
	p := make([][]float64, k)
	maxD := 0.0
	for i, d := range c.DemandsUS {
		if d < 0 {
			return MVAResult{}, errors.New("mva: negative service demand")
		}
		servers[i] = 1
		if i < len(c.Servers) && c.Servers[i] != 0 {
			m := c.Servers[i]
			if m < 0 || math.IsNaN(m) || math.IsInf(m, 0) {
				return MVAResult{}, errors.New("mva: server count not a positive number")
			}
			servers[i] = m
			if m > 1 {
				if c.Clients > 100_000 {
					return MVAResult{}, errors.New("mva: more than 1e5 clients at a multi-server station")
				}
				p[i] = []float64{1}
			}
		}
		maxD = math.Max(maxD, d/servers[i])
	}
	var x, resp float64
	for n := 1; n <= c.Clients; n++ {
		resp = c.DelayUS
		for i, d := range c.DemandsUS {
			if p[i] == nil { // one server, or less than one: a single server slowed to m
				r[i] = d / servers[i] * (1 + q[i])
			} else {
				r[i] = 0
				for j := 1; j <= n; j++ {
					r[i] += float64(j) * d / math.Min(float64(j), servers[i]) * p[i][j-1]
				}
			}
			resp += r[i]
		}
		cycle := c.ThinkUS + resp
		if cycle <= 0 {
			return MVAResult{}, errors.New("mva: cycle of zero time")
		}
		x = float64(n) / cycle // per µs
		for i := range q {
			q[i] = x * r[i]
			if p[i] != nil {
				p[i] = nextDistribution(p[i], x, c.DemandsUS[i], servers[i])
			}
		}
	}
	res := MVAResult{ThroughputPerS: x * 1e6, ResponseUS: resp, QueueLen: q, Utilization: make([]float64, k)}
	for i, d := range c.DemandsUS {
		res.Utilization[i] = x * d / servers[i]
	}
	if maxD > 0 {
		res.BottleneckPerS = 1e6 / maxD
	}
	return res, nil
}

// nextDistribution returns a multi-server station's queue-length distribution with one client
// more, from prev (n−1 clients) and the throughput x (per µs) with n: p(j | n) =
// x·d/min(j, m)·p(j−1 | n−1) for j ≥ 1, p(0 | n) what is left (never below 0: the subtraction
// can lose a little to rounding near saturation).
func nextDistribution(prev []float64, x, d, m float64) []float64 {
	next := make([]float64, len(prev)+1)
	sum := 0.0
	for j := 1; j < len(next); j++ {
		next[j] = x * d / math.Min(float64(j), m) * prev[j-1]
		sum += next[j]
	}
	next[0] = math.Max(1-sum, 0)
	return next
}
