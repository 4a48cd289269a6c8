package models

import (
	"math"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol*math.Max(1, math.Abs(b)) }

func TestBatch(t *testing.T) {
	b := Batch{TFixedUS: 100, TPerReqUS: 10}
	for _, c := range []struct {
		name string
		got  float64
		want float64
	}{
		{"cycle 0", b.Cycle(0), 100},
		{"cycle 10", b.Cycle(10), 200},
		{"throughput 10", b.Throughput(10), 10 / 200e-6},
		{"max throughput", b.MaxThroughput(), 1e5},
		{"half power", b.HalfPowerN(), 10},
		{"throughput at N½ is half the max", b.Throughput(b.HalfPowerN()), b.MaxThroughput() / 2},
	} {
		if !near(c.got, c.want, 1e-9) {
			t.Errorf("%s = %g, want %g", c.name, c.got, c.want)
		}
	}
	if got := (Batch{TFixedUS: 5}).MaxThroughput(); got != 0 {
		t.Errorf("no per-request cost: max throughput %g, want 0 (no limit)", got)
	}
}

func TestFitBatch(t *testing.T) {
	// The benchkv 2-rank table: RTT vs clients above saturation grows ~linearly.
	n := []float64{1, 2, 4, 8}
	tt := make([]float64, len(n))
	for i, x := range n {
		tt[i] = 3 + 1.25*x
	}
	b, r2, err := FitBatch(n, tt)
	if err != nil {
		t.Fatal(err)
	}
	if !near(b.TFixedUS, 3, 1e-9) || !near(b.TPerReqUS, 1.25, 1e-9) || !near(r2, 1, 1e-9) {
		t.Errorf("fit = %+v r2=%g, want {3 1.25} 1", b, r2)
	}
	if _, _, err := FitBatch([]float64{2, 2}, []float64{1, 3}); err == nil {
		t.Error("fit on one distinct N: want ErrNoFit")
	}
}

func TestLittlesLaw(t *testing.T) {
	// 16 clients, 1.05 M/s, 15.6 in flight → 14.86 µs (benchkv table).
	if got := ResponseTime(15.6, 1.05e6); !near(got, 14.857, 1e-3) {
		t.Errorf("W = %g µs, want 14.857", got)
	}
	if got := InFlight(1.05e6, 14.857142857); !near(got, 15.6, 1e-6) {
		t.Errorf("L = %g, want 15.6", got)
	}
	if got := Throughput(15.6, 14.857142857); !near(got, 1.05e6, 1e-6) {
		t.Errorf("λ = %g, want 1.05e6", got)
	}
	if ResponseTime(1, 0) != 0 || Throughput(1, 0) != 0 {
		t.Error("zero denominators must give 0")
	}
}

func TestMVA(t *testing.T) {
	tests := []struct {
		name    string
		c       ClosedLoop
		x, resp float64
	}{
		// One client: no queueing, X = 1/(Z + delay + ΣD).
		{"one client", ClosedLoop{Clients: 1, ThinkUS: 10, DemandsUS: []float64{5, 5}, DelayUS: 80}, 1e6 / 100, 90},
		// Two clients, one station of 1 µs, no think: R(2) = 1·(1+Q(1)) = 2, X = 1 per µs.
		{"saturated", ClosedLoop{Clients: 2, DemandsUS: []float64{1}}, 1e6, 2},
		// Many clients: throughput tends to the bottleneck 1/max D.
		{"bottleneck", ClosedLoop{Clients: 200, ThinkUS: 10, DemandsUS: []float64{2, 1}}, 5e5, 390},
	}
	for _, tc := range tests {
		r, err := MVA(tc.c)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !near(r.ThroughputPerS, tc.x, 1e-3) || !near(r.ResponseUS, tc.resp, 1e-3) {
			t.Errorf("%s: X=%g R=%g, want X=%g R=%g", tc.name, r.ThroughputPerS, r.ResponseUS, tc.x, tc.resp)
		}
		// Little's law over the whole loop: N = X·(Z + R).
		if n := InFlight(r.ThroughputPerS, tc.c.ThinkUS+r.ResponseUS); !near(n, float64(tc.c.Clients), 1e-6) {
			t.Errorf("%s: Little's law gives %g clients, want %d", tc.name, n, tc.c.Clients)
		}
	}
	if _, err := MVA(ClosedLoop{}); err == nil {
		t.Error("zero clients: want an error")
	}
}

func TestPredict(t *testing.T) {
	// A token: 3 segments of 4 calls (the last of each is a wait), 1 ms of compute, a round
	// trip of 100 µs of which 10 µs is server work, on a 1 ms link.
	segs := []Segment{{Calls: 4, PerToken: 3}}
	link := Link{RTTUS: 1000}
	rtt := 1100.0
	token := 1000 + 12*rtt
	l, err := Calibrate(segs, token, rtt, 10, link, 100, 50, 8)
	if err != nil {
		t.Fatal(err)
	}
	base := l.Predict(WhatIf{Coalesce: 1, Pipeline: 1})
	if !near(base.TokenTimeUS, token, 1e-9) || base.MessagesPerToken != 24 || base.RoundTripsPerToken != 12 {
		t.Errorf("baseline = %+v, want token %g µs, 24 messages, 12 round trips", base, token)
	}
	co := l.Predict(WhatIf{Coalesce: 0, Pipeline: 1})
	// One round trip per segment carrying 4 calls: 90 + 1000 + 4·10 µs.
	if co.MessagesPerToken != 6 || co.RoundTripsPerToken != 3 || !near(co.TokenTimeUS, 1000+3*1130, 1e-9) {
		t.Errorf("coalesce = %+v, want 6 messages, 3 round trips, %g µs", co, 1000+3*1130.0)
	}
	co2 := l.Predict(WhatIf{Coalesce: 2, Pipeline: 1})
	if co2.MessagesPerToken != 12 || co2.RoundTripsPerToken != 6 {
		t.Errorf("coalesce 2 = %+v, want 12 messages, 6 round trips", co2)
	}
	pi := l.Predict(WhatIf{Coalesce: 1, Pipeline: 64})
	// Four messages in flight: the last reply is in after one latency plus four services.
	if pi.MessagesPerToken != 24 || pi.WaitsPerToken != 3 || !near(pi.TokenTimeUS, 1000+3*(1090+40), 1e-9) {
		t.Errorf("pipeline = %+v, want 24 messages, 3 waits, %g µs", pi, 1000+3*1130.0)
	}
	pi2 := l.Predict(WhatIf{Coalesce: 1, Pipeline: 2})
	if pi2.WaitsPerToken != 9 || !(pi2.TokenTimeUS > pi.TokenTimeUS && pi2.TokenTimeUS < base.TokenTimeUS) {
		t.Errorf("pipeline 2 = %+v: want 9 waits and a time between pipeline and baseline", pi2)
	}
	// A slow link makes bytes cost time: 1 MB/s, 158 bytes per call exchange.
	slow := Link{RTTUS: 1000, BandwidthBps: 1e6}
	bw := l.Predict(WhatIf{Coalesce: 1, Pipeline: 1, Link: &slow})
	if !near(bw.TokenTimeUS, token+12*(108+58), 1e-9) {
		t.Errorf("bandwidth: token %g µs, want %g", bw.TokenTimeUS, token+12*166.0)
	}
}

func TestModes(t *testing.T) {
	for _, n := range []string{"baseline", "coalesce", "pipeline", "coalesce+pipeline"} {
		if _, err := LookupMode(n); err != nil {
			t.Error(err)
		}
	}
	if _, err := LookupMode("turbo"); err == nil {
		t.Error("unknown mode: want an error")
	}
	if _, err := LookupLink("webrtc-wifi"); err != nil {
		t.Error(err)
	}
}
