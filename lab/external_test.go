package lab

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/perflab/perflab/loops"
)

// TestAnalyzeExternal checks the sweep's analysis on points that follow the batch model
// exactly (T_cycle = 20 + 10·N µs, one loop thread): the fit recovers it, every prediction is
// the measured throughput, and a point whose trace L over its window disagrees with the
// client's λ times the trace's W is the one Little's-law warning, a point whose connections were
// in flight together for 60% of its window the one such warning; the closed-loop section is
// there.
func TestAnalyzeExternal(t *testing.T) {
	res := &ExternalResult{}
	for i, n := range []float64{1, 2, 4, 7, 11} {
		clients := 1 << i
		cycle := 20 + 10*n
		tput := n / cycle * 1e6
		w := float64(clients) / tput * 1e6
		l := tput * w / 1e6
		if clients == 8 {
			l *= 1.2 // the trace saw 20% more in flight than the client's figures say
		}
		res.Points = append(res.Points, ExternalPoint{Clients: clients, ThroughputPerS: tput, RTTUS: RTT{Mean: w + 1},
			InflightMean: l, TraceRoundTrips: 1000, TraceRTTMeanUS: w, LoopThreads: 1, RequestsPerCycle: n, CycleUS: cycle,
			LoadWindow: Window{Seconds: 1, RoundTrips: 1000}, SteadyWindow: &Window{Seconds: 0.95, RoundTrips: 950}, ServerResidenceUS: 10 + 10*n,
			Loops:   []loops.Thread{{ByN: []loops.NCycles{{N: 1, Cycles: 10, BusyUS: 12, PathUS: 12}, {N: clients + 1, Cycles: 10, BusyUS: 2 + 10*float64(clients+1), PathUS: 2 + 10*float64(clients+1)}}}},
			samples: []float64{w * 0.9, w, w * 1.1}})
	}
	res.Points[4].ClientLoop = &ClientLoop{TID: 42, Cycles: 100, Replies: 1000, BusyUS: 50, RepliesPerCycle: 10, BusyPerReplyUS: 5, Utilization: 0.95}
	res.Points[4].Utilization = 0.3
	res.Points[3].ServerCPUUS, res.Points[3].ServerRunDelayUS = 5, 0.5*8/res.Points[3].ThroughputPerS*1e6 // half of c8's cycle
	res.Points[2].SteadyWindow.Seconds = 0.6                                                              // c4's connections were all in flight for 60% of its window only
	analyzeExternal(res)
	f := res.BatchFit
	if f == nil || math.Abs(f.TFixedUS-20) > 1e-3 || math.Abs(f.TPerReqUS-10) > 1e-3 || f.R2 < 0.9999 {
		t.Fatalf("fit %+v, want T_fixed 20, T_per_req 10, R² 1", f)
	}
	if len(res.Predictions) != 5 {
		t.Fatalf("%d predictions, want 5", len(res.Predictions))
	}
	for _, p := range res.Predictions {
		if math.Abs(p.ThroughputPredictedPerS/p.ThroughputMeasuredPerS-1) > 1e-3 {
			t.Errorf("c%d: predicted %.0f, measured %.0f", p.Clients, p.ThroughputPredictedPerS, p.ThroughputMeasuredPerS)
		}
	}
	warns := strings.Join(res.Warnings, "\n")
	if strings.Count(warns, "Little's law") != 1 || !strings.Contains(warns, "c8: Little's law off by 20.0%") {
		t.Errorf("warnings:\n%s\nwant one Little's-law warning, for c8", warns)
	}
	if !strings.Contains(warns, "c16: the client's own event loop (thread 42) was busy 95% of its time, the server's loops 30%") || strings.Count(warns, "client's own event loop (thread") != 1 {
		t.Errorf("warnings:\n%s\nwant the client-bound warning at c16 only", warns)
	}
	if strings.Count(warns, "waited") != 1 || !strings.Contains(warns, "c8: the server's threads waited 51.4 µs per request for a processor (run queue), 50% of each request's 102.9 µs") {
		t.Errorf("warnings:\n%s\nwant the run-queue warning at c8 only", warns)
	}
	if strings.Count(warns, "in flight together") != 1 || !strings.Contains(warns, "c4: all 4 connections were in flight together for 60% of the 1.000 s load window") {
		t.Errorf("warnings:\n%s\nwant the warning of connections not in flight together at c4 only", warns)
	}
	if len(res.Histogram) == 0 {
		t.Error("no RTT histogram at the largest client count")
	}
	var b strings.Builder
	if err := RenderExternal(&b, res, "table"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"RTT scaling", "| c8 ", "| +20.0% |", "largest error 20.0%: Little's law does NOT hold", "T_fixed = 20 µs (95.0% CI 20 – 20), T_per_req = 10 µs",
		"RTT histogram at 16 clients", "Closed-loop prediction", "| calibration |", "51.43 |", "warning: "} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestRunExternalBadConfig(t *testing.T) {
	rec := func(context.Context, []uint32, []string, string) ([]byte, error) { return nil, nil }
	for _, tc := range []struct {
		cfg  ExternalConfig
		want string
	}{
		{ExternalConfig{Server: []uint32{1}, Client: "bench -c 4", Record: rec}, "{clients}"},
		{ExternalConfig{Client: "bench -c {clients}", Record: rec}, "needs the server"},
		{ExternalConfig{Server: []uint32{1}, Client: "bench -c {clients}", Record: rec, Protocol: "nope"}, "nope"},
	} {
		if _, err := RunExternal(context.Background(), tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// TestRunQueueCause checks that a point's run-queue wait is put on the machine's other work
// only where that work took more than half a processor over the point's window.
func TestRunQueueCause(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cpu   *WindowCPU
		cause string
	}{
		{"others took 1.2 processors", &WindowCPU{Processors: 2, AvailableProcessors: 0.8}, "the machine's other work (1.20 of the 2 processors)"},
		{"others took 0.02", &WindowCPU{Processors: 2, AvailableProcessors: 1.98}, "the point's own threads (server, client, recorder) waited for each other"},
		{"processors unknown", nil, "which no model of the loops tells apart"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := runQueueCause(tc.cpu); !strings.Contains(got, tc.cause) {
				t.Errorf("%q, want it to say %q", got, tc.cause)
			}
		})
	}
}
