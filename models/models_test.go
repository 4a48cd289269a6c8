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

// token is a small token loop: two groups of async calls each closed by a submit, then a wait
// that joins the read of the results.
func token() []Call {
	a := Call{Name: "vkCmdDispatch", Kind: Async, SendBytes: 100, RecvBytes: 0}
	return []Call{a, a, {Name: "vkQueueSubmit", Kind: Submit, SendBytes: 1000}, a, a, {Name: "vkQueueSubmit", Kind: Submit, SendBytes: 1000},
		{Name: "vkWaitForFences", Kind: Sync, JoinNext: true}, {Name: "vnReadMemoryData", Kind: Sync, RecvBytes: 4000}}
}

func TestPredict(t *testing.T) {
	l := Loop{Calls: token(), ComputeUS: 800, MessageUS: 50, Link: Link{RTTUS: 1000}, FrameBytes: 8, ReplyRecordBytes: 16}
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	base := l.Predict(WhatIf{Coalesce: 1, Pipeline: 1})
	// 8 calls, each a round trip of 1050 µs, plus 800 µs of compute.
	if base.MessagesPerToken != 16 || base.RoundTripsPerToken != 8 || base.WaitsPerToken != 8 || !near(base.TokenTimeUS, 800+8*1050, 1e-9) {
		t.Errorf("baseline = %+v, want 16 messages, 8 round trips, %g µs", base, 800+8*1050.0)
	}
	co := l.Predict(WhatIf{Coalesce: 0, Pipeline: 1})
	// Frames: [a a submit] [a a submit] [wait+read]: 3 round trips.
	if co.MessagesPerToken != 6 || co.RoundTripsPerToken != 3 || !near(co.TokenTimeUS, 800+3*1050, 1e-9) {
		t.Errorf("coalesce = %+v, want 6 messages, 3 round trips, %g µs", co, 800+3*1050.0)
	}
	// K=2 cuts the async pairs into frames of their own, sent without a reply.
	co2 := l.Predict(WhatIf{Coalesce: 2, Pipeline: 1})
	// [a a] [submit] [a a] [submit] [wait+read]: two frames without a reply.
	if co2.MessagesPerToken != 1+2+1+2+2 || co2.RoundTripsPerToken != 3 {
		t.Errorf("coalesce 2 = %+v, want 8 messages, 3 round trips", co2)
	}
	pi := l.Predict(WhatIf{Coalesce: 1, Pipeline: 8})
	// Frames per call, the client blocks twice (wait, read); the first six replies overlap.
	if pi.MessagesPerToken != 16 || pi.WaitsPerToken != 2 || !(pi.TokenTimeUS < co.TokenTimeUS+1050) {
		t.Errorf("pipeline = %+v, want 16 messages, 2 waits, about 3 round trips", pi)
	}
	both := l.Predict(WhatIf{Coalesce: 0, Pipeline: 8})
	if both.MessagesPerToken != 6 || both.WaitsPerToken != 1 || !(both.TokenTimeUS < pi.TokenTimeUS) {
		t.Errorf("coalesce+pipeline = %+v, want 6 messages, 1 wait, faster than pipeline %g", both, pi.TokenTimeUS)
	}
	// A slow link makes bytes cost time: 1 MB/s adds 1 µs per byte to the baseline.
	slow := Link{RTTUS: 1000, BandwidthBps: 1e6}
	bw := l.Predict(WhatIf{Coalesce: 1, Pipeline: 1, Link: &slow})
	if !near(bw.TokenTimeUS, base.TokenTimeUS+base.BytesSentPerToken+base.BytesRecvPerToken, 1e-9) {
		t.Errorf("bandwidth: token %g µs, want %g", bw.TokenTimeUS, base.TokenTimeUS+base.BytesSentPerToken+base.BytesRecvPerToken)
	}
	// Pipelining is bounded by the server's serial work.
	heavy := l
	heavy.Calls = append([]Call(nil), l.Calls...)
	for i := range heavy.Calls {
		heavy.Calls[i].WorkUS = 500
	}
	hp := heavy.Predict(WhatIf{Coalesce: 1, Pipeline: 8})
	if hp.TokenTimeUS < 8*500 {
		t.Errorf("pipelined token %g µs is shorter than the server's serial work %d µs", hp.TokenTimeUS, 8*500)
	}
}

func TestBatchWhatIf(t *testing.T) {
	b := Batch{TFixedUS: 90, TPerReqUS: 10}
	for _, tc := range []struct {
		k, d int
		per  float64
	}{{1, 1, 100}, {10, 1, 19}, {1, 4, 25}, {1, 100, 10}, {10, 100, 10}} {
		p := BatchWhatIf(b, tc.k, tc.d)
		if !near(p.TokenTimeUS, tc.per, 1e-9) || !near(p.MessagesPerToken, 2/float64(tc.k), 1e-12) {
			t.Errorf("K=%d D=%d: %+v, want %g µs per request", tc.k, tc.d, p, tc.per)
		}
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

// TestMVAMultiServer checks the multi-server station against the closed form of the finite-source
// queue M/M/m//N (the machine-repairman model): N clients thinking Z each, one station of m
// servers with demand D. p_k ∝ N!/(N−k)!·(D/Z)^k/β(k), β(k) = k! up to m and m!·m^(k−m) past it,
// and X = Σ p_k·min(k, m)/D.
func TestMVAMultiServer(t *testing.T) {
	closedForm := func(n, m int, z, d float64) float64 {
		w := make([]float64, n+1)
		sum := 0.0
		for k := 0; k <= n; k++ {
			v := 1.0
			for i := 0; i < k; i++ {
				v *= float64(n-i) * d / z / math.Min(float64(i+1), float64(m))
			}
			w[k] = v
			sum += v
		}
		x := 0.0
		for k := 1; k <= n; k++ {
			x += w[k] / sum * math.Min(float64(k), float64(m)) / d
		}
		return x * 1e6
	}
	for _, tc := range []struct {
		n, m  int
		z, d  float64
		multi bool
	}{
		{n: 1, m: 2, z: 30, d: 20},
		{n: 2, m: 2, z: 30, d: 20},
		{n: 4, m: 2, z: 30, d: 20},
		{n: 16, m: 2, z: 30, d: 20},
		{n: 16, m: 4, z: 5, d: 40},
		{n: 8, m: 1, z: 10, d: 10},
		{n: 3, m: 8, z: 10, d: 10},
	} {
		r, err := MVA(ClosedLoop{Clients: tc.n, ThinkUS: tc.z, DemandsUS: []float64{tc.d}, Servers: []float64{float64(tc.m)}})
		if err != nil {
			t.Fatal(err)
		}
		if want := closedForm(tc.n, tc.m, tc.z, tc.d); !near(r.ThroughputPerS, want, 1e-9) {
			t.Errorf("N=%d m=%d Z=%g D=%g: X %.6g, closed form %.6g", tc.n, tc.m, tc.z, tc.d, r.ThroughputPerS, want)
		}
		if n := InFlight(r.ThroughputPerS, tc.z+r.ResponseUS); !near(n, float64(tc.n), 1e-9) {
			t.Errorf("N=%d m=%d: Little's law gives %g clients", tc.n, tc.m, n)
		}
		if b := 1e6 * float64(tc.m) / tc.d; r.ThroughputPerS > b*(1+1e-12) || r.BottleneckPerS != b {
			t.Errorf("N=%d m=%d: X %.6g over the bound m/D %.6g (reported %.6g)", tc.n, tc.m, r.ThroughputPerS, b, r.BottleneckPerS)
		}
	}
	// As many servers as clients: no queueing, the station is a delay of D.
	r, _ := MVA(ClosedLoop{Clients: 3, ThinkUS: 10, DemandsUS: []float64{20}, Servers: []float64{3}})
	if !near(r.ThroughputPerS, 3e6/30, 1e-12) {
		t.Errorf("3 clients on 3 servers: X %g, want %g", r.ThroughputPerS, 3e6/30)
	}
	// Half a server is one server at half speed: demand 2D.
	a, _ := MVA(ClosedLoop{Clients: 5, ThinkUS: 10, DemandsUS: []float64{4}, Servers: []float64{0.5}})
	b, _ := MVA(ClosedLoop{Clients: 5, ThinkUS: 10, DemandsUS: []float64{8}})
	if !near(a.ThroughputPerS, b.ThroughputPerS, 1e-12) {
		t.Errorf("half a server: X %g, want %g", a.ThroughputPerS, b.ThroughputPerS)
	}
	for _, bad := range [][]float64{{-1}, {math.NaN()}, {1, 2}} {
		if _, err := MVA(ClosedLoop{Clients: 2, DemandsUS: []float64{1}, Servers: bad}); err == nil {
			t.Errorf("servers %v: want an error", bad)
		}
	}
}
