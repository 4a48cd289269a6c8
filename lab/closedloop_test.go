package lab

import (
	"bufio"
	"context"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/perflab/perflab/loops"
	"github.com/perflab/perflab/models"
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
	d := threadsSince(before, after)
	if !ok || d.onCPU <= 0 || d.runDelay < 0 || x < 0 {
		t.Errorf("this process ran %d ns and waited %d ns (ok %v), want some running", d.onCPU, d.runDelay, ok)
	}
	if _, ok := processTimes([]uint32{0x7fffffff}); ok {
		t.Error("times for a process that does not exist")
	}
	got := threadsSince(map[string]threadSched{"1/1": {10, 5, 2}, "1/2": {7, 7, 1}}, map[string]threadSched{"1/1": {15, 9, 3}, "1/3": {4, 1, 1}})
	if got != (threadSched{onCPU: 9, runDelay: 5, switchIns: 2}) {
		t.Errorf("since %+v, want a thread's growth plus a new thread whole, {9 5 2}", got)
	}
}

// TestClosedLoopProcessors checks the processor station on a synthetic sweep of four loops on
// two processors whose throughput follows the lower of the loops' network and the processor
// network (D_cpu 80% of the one-client round on 2 processors): the model finds the processor
// network's delay, predicts every point, says which points the processors limit, and warns at
// a point moved by 30%, the calibration point included.
func TestClosedLoopProcessors(t *testing.T) {
	clients := []int{1, 2, 4, 8, 16}
	in := synthSweepCPU(t, 3, 16, 0, 0, 20, 4, 2, clients, true)
	cycle := 1e6 / in[0].ThroughputPerS
	d := 0.8 * cycle
	for i := range in {
		p := &in[i]
		r, err := models.MVA(models.ClosedLoop{Clients: p.Clients, DelayUS: cycle - d, DemandsUS: []float64{d}, Servers: []float64{2}})
		if err != nil {
			t.Fatal(err)
		}
		p.ThroughputPerS = math.Min(p.ThroughputPerS, r.ThroughputPerS)
		p.CPU = &WindowCPU{Processors: 2, AvailableProcessors: 2, OwnUS: d}
	}
	cl, warns, err := fitClosedLoop(in, 2, loops.DefaultConfidence)
	if err != nil {
		t.Fatal(err)
	}
	if cl.ProcessorNetwork != "mva" || math.Abs(cl.ProcessorZUS-(cycle-d)) > 0.01 || cl.ProcessorFit == nil || math.Abs(cl.ProcessorFit.TPerReqUS-d) > 1e-3 {
		t.Fatalf("processor network %q, delay %.3f µs, fit %+v; want mva, %.3f, T_per_req %.3f", cl.ProcessorNetwork, cl.ProcessorZUS, cl.ProcessorFit, cycle-d, d)
	}
	limited := 0
	for _, p := range cl.Points {
		if math.Abs(p.Error) > 1e-3 {
			t.Errorf("c%d: predicted %.0f, measured %.0f", p.Clients, p.ThroughputPredictedPerS, p.ThroughputMeasuredPerS)
		}
		if p.ThroughputPredictedPerS != math.Min(p.LoopsPerS, p.ProcessorsPerS) || p.AvailableProcessors != 2 {
			t.Errorf("c%d: %+v: the prediction is not the lower network's", p.Clients, p)
		}
		if p.LimitedBy == "processors" {
			limited++
		}
	}
	if last := cl.Points[len(cl.Points)-1]; limited == 0 || last.LimitedBy != "processors" || last.ProcessorsPerS > 2/d*1e6+1 {
		t.Errorf("%d points limited by the processors, the last %+v; want the largest ones, under 2/D_cpu", limited, last)
	}
	if w := strings.Join(warns, "\n"); strings.Contains(w, "closed-loop model predicts") {
		t.Errorf("a prediction warning on exact points:\n%s", w)
	}

	// Fewer processors left at the largest point than at the others: the model follows them.
	in[len(in)-1].CPU = &WindowCPU{Processors: 2, AvailableProcessors: 1, OwnUS: d}
	in[len(in)-1].ThroughputPerS *= 1.3
	cl, warns, err = fitClosedLoop(in, 2, loops.DefaultConfidence)
	if err != nil {
		t.Fatal(err)
	}
	last := cl.Points[len(cl.Points)-1]
	if last.AvailableProcessors != 1 || last.ProcessorsPerS > 1/d*1e6+1 {
		t.Errorf("one processor left: %+v, want at most %.0f/s", last, 1/d*1e6)
	}
	if w := strings.Join(warns, "\n"); !strings.Contains(w, "c16: the closed-loop model predicts") {
		t.Errorf("c16 missed by far, no warning:\n%s", w)
	}

	// Half a processor left at c2: the loops run at half speed there, and only there.
	loopsAt := map[int]float64{}
	for _, p := range cl.Points {
		loopsAt[p.Clients] = p.LoopsPerS
	}
	in[1].CPU = &WindowCPU{Processors: 2, AvailableProcessors: 0.5, OwnUS: d}
	cl, _, err = fitClosedLoop(in, 2, loops.DefaultConfidence)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range cl.Points {
		want := loopsAt[p.Clients]
		if p.Clients == 2 {
			want /= 2
		}
		if math.Abs(p.LoopsPerS-want) > 1 {
			t.Errorf("c%d: loops %.0f/s, want %.0f/s", p.Clients, p.LoopsPerS, want)
		}
	}

	// Points that disagree on D_cpu (each moved ±40% off the line): each point's own is used.
	for i := range in {
		in[i].CPU = &WindowCPU{Processors: 2, AvailableProcessors: 2, OwnUS: d * (1 + 0.4*float64(1-2*(i%2)))}
	}
	cl, _, err = fitClosedLoop(in, 2, loops.DefaultConfidence)
	if err != nil {
		t.Fatal(err)
	}
	if cl.ProcessorDemand != "point" || cl.ProcessorFit == nil || cl.ProcessorFit.R2 >= ProcessorFitR2 {
		t.Errorf("demand %q, fit %+v; want each point's own", cl.ProcessorDemand, cl.ProcessorFit)
	}
	for i, p := range cl.Points {
		if p.CPUUSPerReq != round3(in[i].CPU.OwnUS) {
			t.Errorf("c%d: D_cpu %.3f, the point's own %.3f", p.Clients, p.CPUUSPerReq, in[i].CPU.OwnUS)
		}
	}

	// D_cpu longer than the one-client round (work beside the requests' path): the bound alone.
	for i := range in {
		in[i].CPU = &WindowCPU{Processors: 2, AvailableProcessors: 2, OwnUS: 3 * cycle}
	}
	cl, warns, err = fitClosedLoop(in, 2, loops.DefaultConfidence)
	if err != nil {
		t.Fatal(err)
	}
	if cl.ProcessorNetwork != "bound" || cl.Points[0].ProcessorsPerS != math.Round(2/(3*cycle)*1e6) {
		t.Errorf("network %q, c1 %+v; want the bound 2/D_cpu", cl.ProcessorNetwork, cl.Points[0])
	}
	// The bound is under the calibration point's throughput: c1 is judged too, and warned.
	if w := strings.Join(warns, "\n"); cl.Points[0].LimitedBy != "processors" || !strings.Contains(w, "c1: the closed-loop model predicts") {
		t.Errorf("c1 %+v under the processors' bound, warnings:\n%s", cl.Points[0], w)
	}
}

// TestWindowCPU checks the processor times over a load window: samples interpolated at its
// ends, the others' time taken off the processors, and no figure where the samples stop short.
func TestWindowCPU(t *testing.T) {
	// 2 processors, 1.5 busy (1 of it the point's own), sampled every 20 ms from 0 to 1 s.
	var s []cpuSample
	for at := int64(0); at <= 1e9; at += 20e6 {
		s = append(s, cpuSample{at: at, busy: at * 3 / 2, own: at, kids: at / 4, kidsRunDelay: at / 10})
	}
	w, ok := windowCPU(s, 105e6, 605e6, 10000, 2)
	if !ok {
		t.Fatal("window inside the samples: no figures")
	}
	// 0.5 s: 0.5 s own for 10,000 requests = 50 µs; 0.75 s busy = 75 µs; others 0.5 processor;
	// the client 12.5 µs, and its threads waited 5 µs per request for a processor.
	if w.OwnUS != 50 || w.MachineUS != 75 || w.AvailableProcessors != 1.5 || w.BusyShare != 0.75 || w.BoundPerS != 30000 || w.Samples != 25 ||
		w.ClientUS != 12.5 || w.ClientRunDelayUS != 5 {
		t.Errorf("%+v", w)
	}
	for _, win := range [][2]int64{{-1, 5e8}, {5e8, 2e9}, {5e8, 5e8}} {
		if _, ok := windowCPU(s, win[0], win[1], 100, 2); ok {
			t.Errorf("window %v beyond the samples: figures", win)
		}
	}
}

func TestProcParsers(t *testing.T) {
	busy, ok := parseStatBusy([]byte("cpu  100 2 50 1000 7 3 4 5 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n"))
	if !ok || busy != (100+2+50+3+4+5)*int64(clockTick) {
		t.Errorf("busy %d %v", busy, ok)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8", "cpu 1 2 3 4 5 6 7 x", "cpu 1 2 3"} {
		if _, ok := parseStatBusy([]byte(bad)); ok {
			t.Errorf("%q: parsed", bad)
		}
	}
	// A command name with spaces and parentheses: the fields count from its last ')'.
	line := "4242 (a b) c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 37 12 0 0 20 0 3 0 100 0 0"
	if v, ok := parsePIDStat([]byte(line)); !ok || v != 49*int64(clockTick) {
		t.Errorf("utime+stime %d %v, want 49 ticks", v, ok)
	}
	for _, bad := range []string{"", "4242 comm S 1", "4242 (x) S 1 2 3 4 5 6 7 8 9 10 x 1"} {
		if _, ok := parsePIDStat([]byte(bad)); ok {
			t.Errorf("%q: parsed", bad)
		}
	}
}

func FuzzProcStat(f *testing.F) {
	f.Add([]byte("cpu  2904052 6813 1680089 1486843 4835 0 117698 15083 0 0\n"))
	f.Add([]byte("12101 (redis-server) S 1 12101 12101 0 -1 4194624 300 0 0 0 61 102 0 0 20 0 5 0 3122 0 0"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if v, ok := parseStatBusy(b); ok && v < 0 {
			t.Errorf("negative busy time %d", v)
		}
		if v, ok := parsePIDStat(b); ok && v < 0 {
			t.Errorf("negative process time %d", v)
		}
	})
}

// TestMachineSampler samples while a child process burns processor time: the samples run
// forward in time and never back in busy time, and the child's time is counted as the point's
// own (a descendant of this process). The child stays alive, blocked on its stdin, until the
// last sample is taken, so that the count is exact to the kernel's accounting tick.
func TestMachineSampler(t *testing.T) {
	if _, err := os.Stat("/proc/stat"); err != nil {
		t.Skip("no /proc/stat: ", err)
	}
	s := startMachineSampler(context.Background(), nil)
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; echo burnt; read x; exit 0")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	samples := s.finish()
	stdin.Close()
	if werr := cmd.Wait(); err != nil || werr != nil || line != "burnt\n" {
		t.Fatalf("child: %q %v %v", line, err, werr)
	}
	child := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if len(samples) < 2 {
		t.Fatalf("%d samples", len(samples))
	}
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1], samples[i]
		if b.at <= a.at || b.busy < a.busy || b.own < a.own || b.kidsRunDelay < a.kidsRunDelay {
			t.Fatalf("sample %d %+v after %+v: back in time or in busy time", i, b, a)
		}
	}
	// /proc/PID/stat counts in ticks, the child's rusage in ns: two ticks apart at most.
	first, last := samples[0], samples[len(samples)-1]
	if rose := time.Duration(last.own - first.own); rose < child-2*clockTick {
		t.Errorf("own time rose %v over the samples; the child alone ran %v", rose, child)
	}
}

// TestClientLoopCPU checks that the client's loop is fitted on its processor time when every
// point has it: a busy time stretched by waits for a processor (50 µs more per cycle) is not
// taken, and the sweep is predicted as without the stretch.
func TestClientLoopCPU(t *testing.T) {
	const cf, cp = 2.0, 20.0
	in := synthSweepCPU(t, 5, 10, cf, cp, 30, 1, 2, []int{1, 2, 4, 8, 16}, true)
	for i := range in {
		c := in[i].Client
		c.BusyUS += 50
		in[i].CPU = &WindowCPU{Processors: 2, AvailableProcessors: 2, OwnUS: 1, ClientUS: (cf + cp*c.RepliesPerCycle) / c.RepliesPerCycle}
	}
	cl, _, err := fitClosedLoop(in, 2, loops.DefaultConfidence)
	if err != nil {
		t.Fatal(err)
	}
	if cl.ClientFitSource != "cpu" || math.Abs(cl.ClientFit.TFixedUS-cf) > 1e-3 || math.Abs(cl.ClientFit.TPerReqUS-cp) > 1e-3 {
		t.Errorf("client fit of %q: %+v; want cpu, T_fixed %.0f, T_per_req %.0f", cl.ClientFitSource, cl.ClientFit, cf, cp)
	}
	for _, p := range cl.Points {
		if math.Abs(p.Error) > 1e-3 || p.LimitedBy != "loops" {
			t.Errorf("c%d: predicted %.0f (%s), measured %.0f", p.Clients, p.ThroughputPredictedPerS, p.LimitedBy, p.ThroughputMeasuredPerS)
		}
	}
	// One point without the client's processor time: the busy time, for every point.
	in[2].CPU.ClientUS = 0
	if cl, _, _ = fitClosedLoop(in, 2, loops.DefaultConfidence); cl.ClientFitSource != "busy" {
		t.Errorf("client fit of %q with a point lacking its processor time, want busy", cl.ClientFitSource)
	}
}
