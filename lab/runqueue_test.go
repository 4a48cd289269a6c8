package lab

import (
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestRunDelay: with more busy threads than CPUs, this process's threads wait for a CPU, and
// the kernel's count of it grows.
func TestRunDelay(t *testing.T) {
	before, ok := readThreads(os.Getpid())
	if !ok {
		t.Skip("no /proc/self/task/*/schedstat on this kernel")
	}
	// More busy threads than CPUs must wait for one; a round can end before the scheduler made
	// one wait (or its threads can be parked and replaced), so up to ten rounds are given.
	var waited int64
	for round := 0; round < 10 && waited <= 0; round++ {
		var wg sync.WaitGroup
		for i := 0; i < 2*runtime.NumCPU()+2; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				x := 0
				for j := 0; j < 30_000_000; j++ {
					x += j
				}
				_ = x
			}()
		}
		wg.Wait()
		after, ok := readThreads(os.Getpid())
		if !ok {
			t.Fatal("schedstat unreadable after the busy threads")
		}
		d := threadsSince(before, after)
		if d.onCPU <= 0 || d.switchIns <= 0 {
			t.Fatalf("this process ran %d ns in %d switch-ins since the start, want some", d.onCPU, d.switchIns)
		}
		waited = d.runDelay
	}
	if waited <= 0 {
		t.Errorf("run delay %d ns since the start: busy threads beyond the CPUs waited for none", waited)
	}
	if _, ok := readThreads(1 << 30); ok {
		t.Error("a process that does not exist has threads")
	}
}

// TestRunQueueRises: each point after the first says how much of the mean RTT's rise its run
// queue accounts for, and a point whose figures cannot be stood behind is warned, in the point
// and in the sweep's warnings.
func TestRunQueueRises(t *testing.T) {
	rq := func(c, s float64, sep bool) *RunQueue {
		return &RunQueue{ClientUSPerRT: c, ServerUSPerRT: s, USPerRT: c + s, Separate: sep, LoadWindow: true, ClientSwitchInsPerRT: c / 2, ServerSwitchInsPerRT: s}
	}
	for _, tc := range []struct {
		name      string
		rtt       [2]float64
		rq        [2]*RunQueue
		perCycle  float64
		share     float64
		line, why string // in the second point's sentence and warning ("": no warning)
	}{
		{"a quarter", [2]float64{20, 60}, [2]*RunQueue{rq(1, 1, true), rq(6, 6, true)}, 1, 0.25,
			"of the RTT rise from 1 to 4 clients (40 µs), run-queue delay accounts for 10 µs (25.0%) (per round trip, clients' process 1 → 6 µs in 0.5 → 3 switch-ins, server's 1 → 6 µs in 1 → 6)", ""},
		{"more than the rise", [2]float64{20, 30}, [2]*RunQueue{rq(1, 1, true), rq(10, 10, true)}, 1, 1.8,
			"accounts for 18 µs (180.0%)", "exceeds the RTT's"},
		{"a fall", [2]float64{20, 60}, [2]*RunQueue{rq(5, 5, true), rq(1, 1, true)}, 1, -0.2, "accounts for -8 µs", "it explains none of the rise"},
		{"no rise", [2]float64{20, 21}, [2]*RunQueue{rq(1, 1, true), rq(1, 2, true)}, 1, 1,
			"from 1 to 4 clients the mean RTT changed by 1 µs", "within the noise"},
		{"more than the RTT", [2]float64{20, 60}, [2]*RunQueue{rq(1, 1, true), rq(40, 30, true)}, 1, 1.7, "accounts for 68 µs", "exceed the mean RTT (60 µs)"},
		{"one process", [2]float64{20, 60}, [2]*RunQueue{rq(2, 0, false), rq(12, 0, false)}, 1, 0.25, "accounts for 10 µs (25.0%)", "not split by side"},
		{"batched", [2]float64{20, 60}, [2]*RunQueue{rq(1, 1, true), rq(6, 6, true)}, 3, 0.25, "(25.0%)", "the server's figure understates it"},
	} {
		res := &Result{Points: []Point{
			{Transport: "unix", Mode: "baseline", Depth: 1, Clients: 1, RTTUS: RTT{Mean: tc.rtt[0]}, RunQueue: tc.rq[0]},
			{Transport: "unix", Mode: "baseline", Depth: 1, Clients: 4, RTTUS: RTT{Mean: tc.rtt[1]}, RunQueue: tc.rq[1], RequestsPerCycle: tc.perCycle},
		}}
		s := &Series{points: []int{0, 1}}
		runQueueRises(res, s)
		p := &res.Points[1]
		if p.RunQueue.Rise == nil || p.RunQueue.Rise.FromClients != 1 || math.Abs(p.RunQueue.Rise.Share-tc.share) > 1e-9 {
			t.Errorf("%s: rise %+v, want share %v", tc.name, p.RunQueue.Rise, tc.share)
		}
		if res.Points[0].RunQueue.Rise != nil {
			t.Errorf("%s: the first point has a rise", tc.name)
		}
		notes := runQueueNote(res, s.points)
		// What the figure covers, each point's switch-ins and their delay, then the rise.
		if len(notes) != 3 || !strings.Contains(notes[2], tc.line) || !strings.Contains(notes[1], "4 clients: clients ") {
			t.Errorf("%s: notes %q, want the switch-ins and then %q", tc.name, notes, tc.line)
		}
		warned := slices.ContainsFunc(res.Warnings, func(w string) bool { return strings.HasPrefix(w, "unix/baseline/d1/c4: run queue: ") })
		switch {
		case tc.why == "" && (warned || p.RunQueue.Warning != ""):
			t.Errorf("%s: warned %q", tc.name, res.Warnings)
		case tc.why != "" && (!warned || !strings.Contains(p.RunQueue.Warning, tc.why)):
			t.Errorf("%s: warning %q (sweep %q), want %q", tc.name, p.RunQueue.Warning, res.Warnings, tc.why)
		}
	}
	// Without schedstat there is nothing to say.
	res := &Result{Points: []Point{{Clients: 1}, {Clients: 2}}}
	runQueueRises(res, &Series{points: []int{0, 1}})
	if notes := runQueueNote(res, []int{0, 1}); notes != nil || len(res.Warnings) != 0 {
		t.Errorf("without schedstat: %q, %q", notes, res.Warnings)
	}
}
