package lab

import (
	"math"
	"os"
	"strings"
	"testing"

	"github.com/perflab/perflab/loops"
)

// synthSweep builds sweep points that follow the closed-loop model exactly: the server's loop
// path T = sf + sp·N per cycle (and 20 µs more of busy time after it) (cycles of N = 1..clients, k loop threads), a client loop of
// busy cf + cp·r per cycle at r replies per cycle (none when cp is 0), and the delay z outside
// them, on processors processors.
func synthSweep(t *testing.T, sf, sp, cf, cp, z float64, k, processors int, clients []int) []closedLoopInput {
	return synthSweepCPU(t, sf, sp, cf, cp, z, k, processors, clients, false)
}

// synthSweepCPU is synthSweep; with cpu, each point has the server's processor time per
// request and its requests per cycle following the model, and cycles grouped by N whose clock
// time grows 100 µs per request (a loop made to wait for a processor), which the fit must not
// take.
func synthSweepCPU(t *testing.T, sf, sp, cf, cp, z float64, k, processors int, clients []int, cpu bool) []closedLoopInput {
	t.Helper()
	st := loopStations{serverFixed: sf, serverPerReq: sp, serverLoops: min(k, processors), client: cp > 0, clientFixed: cf, clientPerReq: cp}
	var in []closedLoopInput
	for i, c := range clients {
		r, err := st.solve(c, z)
		if err != nil {
			t.Fatal(err)
		}
		p := closedLoopInput{Clients: c, ThroughputPerS: r.throughput, LoopThreads: min(c, k), ResidenceUS: r.serverUS}
		for n := 1; n <= c; n++ {
			// 20 µs of the loop's own work after its replies: busy, not on the path
			p.ServerByN = append(p.ServerByN, loops.NCycles{N: n, Cycles: uint64(100 * n), BusyUS: sf + sp*float64(n) + 20, PathUS: sf + sp*float64(n)})
			if cpu {
				p.ServerByN[n-1].PathUS = 100 * float64(n)
			}
		}
		if cpu {
			p.N = 1 + 0.5*float64(i)
			p.CPUUS = (sf + sp*p.N) / p.N
		}
		if cp > 0 {
			rpc := 0.5 + float64(i) // replies per cycle grow with the clients
			p.Client = &ClientLoop{Cycles: 1000, RepliesPerCycle: rpc, BusyUS: cf + cp*rpc}
		}
		in = append(in, p)
	}
	return in
}

func TestFitClosedLoop(t *testing.T) {
	clients := []int{1, 2, 4, 8, 16}
	for _, tc := range []struct {
		name                string
		sf, sp, cf, cp, z   float64
		k, processors       int
		wantZDominates      bool
		wantClientFit       bool
		wantSideBySideLoops int
		cpu                 bool
	}{
		{name: "server's processor time", sf: 5, sp: 10, cf: 2, cp: 20, z: 30, k: 1, processors: 2, wantZDominates: true, wantClientFit: true, cpu: true},
		{name: "server and client loops", sf: 5, sp: 10, cf: 2, cp: 20, z: 30, k: 1, processors: 2, wantZDominates: true, wantClientFit: true, wantSideBySideLoops: 1},
		{name: "server-bound, threaded client", sf: 4, sp: 40, z: 10, k: 1, processors: 2},
		{name: "four loops on two processors", sf: 3, sp: 16, z: 20, k: 4, processors: 2, wantZDominates: true, wantSideBySideLoops: 2},
		{name: "overlapping loop tails (negative Z)", sf: 12, sp: 8, cf: 6, cp: 5, z: -10, k: 1, processors: 2, wantClientFit: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := synthSweepCPU(t, tc.sf, tc.sp, tc.cf, tc.cp, tc.z, tc.k, tc.processors, clients, tc.cpu)
			cl, warns, err := fitClosedLoop(in, tc.processors, loops.DefaultConfidence)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(cl.ZUS-tc.z) > 0.01 || math.Abs(cl.ServerFit.TFixedUS-tc.sf) > 1e-3 || math.Abs(cl.ServerFit.TPerReqUS-tc.sp) > 1e-3 {
				t.Errorf("Z %.3f, server fit %+v; want Z %.1f, T_fixed %.1f, T_per_req %.1f", cl.ZUS, cl.ServerFit, tc.z, tc.sf, tc.sp)
			}
			if want := map[bool]string{true: "cpu", false: "path"}[tc.cpu]; cl.ServerFitSource != want {
				t.Errorf("server fit of %q, want %q", cl.ServerFitSource, want)
			}
			if (cl.ClientFit != nil) != tc.wantClientFit || tc.wantClientFit && math.Abs(cl.ClientFit.TPerReqUS-tc.cp) > 1e-3 {
				t.Errorf("client fit %+v, want T_per_req %.1f (%v)", cl.ClientFit, tc.cp, tc.wantClientFit)
			}
			if tc.wantSideBySideLoops > 0 && min(cl.ServerLoops, cl.Processors) != tc.wantSideBySideLoops {
				t.Errorf("%d loops on %d processors, want %d side by side", cl.ServerLoops, cl.Processors, tc.wantSideBySideLoops)
			}
			if len(cl.Points) != len(clients) || cl.CalibratedAt != 1 {
				t.Fatalf("%d points calibrated at c%d, want %d at c1", len(cl.Points), cl.CalibratedAt, len(clients))
			}
			for _, p := range cl.Points {
				if math.Abs(p.Error) > 1e-3 {
					t.Errorf("c%d: predicted %.0f, measured %.0f", p.Clients, p.ThroughputPredictedPerS, p.ThroughputMeasuredPerS)
				}
			}
			w := strings.Join(warns, "\n")
			if got := strings.Contains(w, "passes outside the server's loop"); got != tc.wantZDominates {
				t.Errorf("Z share %.2f, warnings:\n%s\nwant the Z-dominates warning: %v", cl.ZShare, w, tc.wantZDominates)
			}
			if strings.Contains(w, "closed-loop model predicts") || strings.Contains(w, "the throughput fell") {
				t.Errorf("a prediction warning on exact points:\n%s", w)
			}
		})
	}
}

// TestFitClosedLoopMiss checks that a point the model misses by more than the tolerance is
// warned about, and so is a throughput that fell as clients were added; the calibration point
// is never judged.
func TestFitClosedLoopMiss(t *testing.T) {
	in := synthSweep(t, 5, 10, 0, 0, 30, 1, 2, []int{1, 2, 4, 8})
	in[2].ThroughputPerS *= 0.5 // c4 measured half the model's, below c2: its prediction is +100%
	cl, warns, err := fitClosedLoop(in, 2, loops.DefaultConfidence)
	if err != nil {
		t.Fatal(err)
	}
	w := strings.Join(warns, "\n")
	if strings.Count(w, "closed-loop model predicts") != 1 || !strings.Contains(w, "c4: the closed-loop model predicts") {
		t.Errorf("warnings:\n%s\nwant one miss, at c4", w)
	}
	// c4 at half the model is below c2's throughput: a fall the model cannot make
	if strings.Count(w, "the throughput fell") != 1 || !strings.Contains(w, "c4: the throughput fell to") || !strings.Contains(w, "at c2 (") {
		t.Errorf("warnings:\n%s\nwant one fall, c4 below c2", w)
	}
	if e := cl.Points[2].Error; math.Abs(e-1) > 1e-3 {
		t.Errorf("c4 error %.4f, want +1", e)
	}
	if _, _, err := fitClosedLoop([]closedLoopInput{{Clients: 1, ThroughputPerS: 1000, LoopThreads: 1,
		ServerByN: []loops.NCycles{{N: 1, Cycles: 10, BusyUS: 5}}}}, 2, loops.DefaultConfidence); err == nil {
		t.Error("no error with one N only")
	}
}

func TestWindows(t *testing.T) {
	ms := int64(1e6)
	trips := []roundTrip{
		// the client's set-up on a connection of its own, before the load
		{Start: 0, End: 1 * ms, Conn: 9}, {Start: 1 * ms, End: 2 * ms, Conn: 9},
	}
	// two clients: conn 1 from 10 to 110 ms, conn 2 from 20 to 100 ms, 10 ms round trips
	for s := int64(10); s < 110; s += 10 {
		trips = append(trips, roundTrip{Start: s * ms, End: (s + 10) * ms, Conn: 1})
	}
	for s := int64(20); s < 100; s += 10 {
		trips = append(trips, roundTrip{Start: s * ms, End: (s + 10) * ms, Conn: 2})
	}
	load := loadConns(trips, 2)
	if len(load) != 2 || !load[1] || !load[2] {
		t.Fatalf("load connections %v, want 1 and 2", load)
	}
	w, span := loadWindow(trips, load)
	// 18 round trips of 10 ms over 100 ms: L 1.8, 180/s, W 10 ms
	if w.RoundTrips != 18 || w.Seconds != 0.1 || w.InflightMean != 1.8 || w.ThroughputPerS != 180 || w.RTTMeanUS != 10000 || span != [2]int64{10 * ms, 110 * ms} {
		t.Errorf("load window %+v %v", w, span)
	}
	s, ok := steadyWindow(trips, load)
	// both active from 20 to 100 ms: 2 in flight all along, 16 round trips end in it (conn 1's
	// at 30..100, conn 2's at 30..100)
	if !ok || s.Seconds != 0.08 || s.InflightMean != 2 || s.RoundTrips != 16 || s.ThroughputPerS != 200 || s.RTTMeanUS != 10000 {
		t.Errorf("steady window %+v %v", s, ok)
	}
	if _, ok := steadyWindow(trips, map[uint64]bool{}); ok {
		t.Error("a steady window with no connection")
	}
	waits := map[uint32]*waitCalls{7: {calls: 36, waitNS: 40 * ms, first: 10 * ms, last: 110 * ms}}
	for i := range trips {
		trips[i].TID = 7
	}
	cl := clientLoop(trips, load, waits)
	if cl == nil || cl.TID != 7 || cl.Replies != 18 || cl.BusyPerReplyUS != round3(60e3/18) || cl.RepliesPerCycle != 0.5 || cl.Utilization != 0.6 {
		t.Errorf("client loop %+v", cl)
	}
	if clientLoop(trips, load, map[uint32]*waitCalls{}) != nil {
		t.Error("a client loop without wait calls")
	}
}

func TestProcessTimes(t *testing.T) {
	before, ok := processTimes([]uint32{uint32(os.Getpid())})
	if !ok {
		t.Skip("no /proc/PID/task/*/schedstat here")
	}
	x := 0
	for i := range 20_000_000 { // run a little
		x += i % 7
	}
	after, ok := processTimes([]uint32{uint32(os.Getpid())})
	d := timesSince(before, after)
	if !ok || d.onCPU <= 0 || d.runDelay < 0 || x < 0 {
		t.Errorf("this process ran %d ns and waited %d ns (ok %v), want some running", d.onCPU, d.runDelay, ok)
	}
	if _, ok := processTimes([]uint32{0x7fffffff}); ok {
		t.Error("times for a process that does not exist")
	}
	got := timesSince(map[string]cpuTimes{"1/1": {10, 5}, "1/2": {7, 7}}, map[string]cpuTimes{"1/1": {15, 9}, "1/3": {4, 1}})
	if got != (cpuTimes{onCPU: 9, runDelay: 5}) {
		t.Errorf("since %+v, want a thread's growth plus a new thread whole, {9 5}", got)
	}
}
