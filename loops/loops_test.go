package loops

import (
	"math"
	"strings"
	"testing"

	"github.com/perflab/perflab/trace"
)

// synth feeds b one thread's loop: for each n of ns, a wait call of waitNS, then n requests
// read (one recv each), processed, and n replies written, the busy part taking
// fixedNS + perReqNS·n.
func synth(b *Builder, pid, tid uint32, ns []int, waitNS, fixedNS, perReqNS int64) {
	ts := int64(1e9)
	for _, n := range ns {
		b.Event(&trace.Event{TS: ts, Dur: waitNS, PID: pid, TID: tid, Op: trace.OpEpollWait, Bytes: int64(min(n, 1))})
		ts += waitNS
		busy := fixedNS + perReqNS*int64(n)
		step := busy / int64(2*n+2)
		at := ts
		for i := 0; i < n; i++ {
			at += step
			ev := trace.Event{TS: at, PID: pid, TID: tid, Dir: trace.DirRecv, Op: trace.OpRead, Bytes: 20, Conn: 1}
			b.Event(&ev)
			b.Message(&Msg{PID: pid, TID: tid, Dir: trace.DirRecv, Request: true, End: at})
		}
		for i := 0; i < n; i++ {
			at += step
			ev := trace.Event{TS: at, Dur: step / 2, PID: pid, TID: tid, Dir: trace.DirSend, Op: trace.OpWrite, Bytes: 5, Conn: 1}
			b.Event(&ev)
			b.Message(&Msg{PID: pid, TID: tid, Dir: trace.DirSend, Reply: true, Answered: 1, End: at + step/2})
		}
		ts += busy
	}
	// the wait call that closes the last cycle
	b.Event(&trace.Event{TS: ts, Dur: waitNS, PID: pid, TID: tid, Op: trace.OpEpollWait})
}

func TestCyclesAndFit(t *testing.T) {
	var ns []int
	total := 0
	for i := 0; i < 400; i++ {
		n := 1 + i%8
		ns = append(ns, n)
		total += n
	}
	ns = append(ns, 0, 0) // two empty cycles (a timer)
	b := New()
	b.Begin(0)
	synth(b, 10, 11, ns, 10_000, 2_000, 3_000)
	// A thread of the same process that never waits: its socket calls are no loop.
	b.Event(&trace.Event{TS: 5e9, PID: 10, TID: 12, Dir: trace.DirRecv, Op: trace.OpRead, Bytes: 20, Conn: 2})
	b.Message(&Msg{PID: 10, TID: 12, Dir: trace.DirRecv, Request: true})
	r := b.Report(DefaultConfidence)
	if r == nil || len(r.Threads) != 1 {
		t.Fatalf("report %+v: want one loop thread", r)
	}
	th := r.Threads[0]
	if th.PID != 10 || th.TID != 11 || th.WaitCall != "epoll_wait" {
		t.Errorf("thread %d/%d %s, want 10/11 epoll_wait", th.PID, th.TID, th.WaitCall)
	}
	if th.Cycles != uint64(len(ns)) || th.EmptyCycles != 2 || th.Requests != uint64(total) || th.Replies != uint64(total) {
		t.Errorf("cycles %d (empty %d), requests %d, replies %d; want %d (2), %d, %d", th.Cycles, th.EmptyCycles, th.Requests, th.Replies, len(ns), total, total)
	}
	wantUtil := float64(400*2_000+3_000*total+2*2_000) / float64(400*2_000+3_000*total+2*2_000+len(ns)*10_000)
	if math.Abs(th.Utilization-wantUtil) > 1e-3 {
		t.Errorf("utilization %.4f, want %.4f", th.Utilization, wantUtil)
	}
	// synth writes a cycle's replies once its requests are read: 350 cycles of two or more.
	if th.MultiRequestCycles != 350 || th.RepliesAtCycleEnd != 1 {
		t.Errorf("%d multi-request cycles, %.3f of them with the replies at the end; want 350, 1", th.MultiRequestCycles, th.RepliesAtCycleEnd)
	}
	if len(th.ByN) != 9 || th.ByN[0].N != 0 || th.ByN[8].N != 8 || th.ByN[8].Cycles != 50 {
		t.Errorf("by N %+v: want N 0..8, 50 cycles of 8", th.ByN)
	}
	// The path ends with the last reply's send, 2n+½ of the cycle's 2n+2 steps (synth); a
	// cycle that sent nothing is all path.
	step := (2_000 + 3_000*8) / 18
	if g := th.ByN[8]; math.Abs(g.PathUS-float64(16*step+step/2)/1e3) > 0.01 || th.ByN[0].PathUS != th.ByN[0].BusyUS {
		t.Errorf("path %.3f µs of busy %.3f at N 8, want %.3f; at N 0 %.3f of %.3f", g.PathUS, g.BusyUS, float64(16*step+step/2)/1e3, th.ByN[0].PathUS, th.ByN[0].BusyUS)
	}
	f := th.Fit
	if f == nil {
		t.Fatalf("no fit; warnings %v", th.Warnings)
	}
	if math.Abs(f.TFixedUS-2) > 0.01 || math.Abs(f.TPerReqUS-3) > 0.001 || f.R2 < 0.999 {
		t.Errorf("fit T_fixed %.3f T_per_req %.4f R² %.4f, want 2, 3, 1", f.TFixedUS, f.TPerReqUS, f.R2)
	}
	if f.TPerReqCI[0] > 3 || f.TPerReqCI[1] < 3 || math.Abs(f.ThroughputMaxPerS-333333) > 200 {
		t.Errorf("T_per_req CI %v, limit %.0f; want 3 inside, 333333/s", f.TPerReqCI, f.ThroughputMaxPerS)
	}
	for _, rg := range th.Ranges {
		if math.Abs(rg.TPerReqUS-3) > 0.01 {
			t.Errorf("range %d-%d: T_per_req %.4f, want 3", rg.NFrom, rg.NTo, rg.TPerReqUS)
		}
	}
	if len(th.Warnings) != 0 {
		t.Errorf("warnings %v on a clean linear loop", th.Warnings)
	}
	// The phases: wait 10 µs every cycle; the four phases add up to the whole time.
	var share float64
	for _, p := range th.Phases {
		share += p.Share
		if p.Phase == "wait" && math.Abs(p.P50-10) > 0.1 {
			t.Errorf("wait p50 %.3f µs, want 10", p.P50)
		}
	}
	if math.Abs(share-1) > 0.01 {
		t.Errorf("phase shares add to %.3f, want 1", share)
	}
}

// TestRepliesAtCycleEnd tells a loop that holds its replies to a cycle's end (redis: read
// every ready connection, then write) from one that answers each request as it reads it
// (memcached), and counts only the cycles of two requests or more that sent a reply.
func TestRepliesAtCycleEnd(t *testing.T) {
	for _, tc := range []struct {
		name string
		// the cycles, each a string of r (a request read) and w (a reply sent)
		cycles    []string
		multi     uint64
		atEndWant float64
	}{
		{"at the end", []string{"rrww", "rrrwww", "rw", "rrww"}, 3, 1},
		{"each as read", []string{"rwrw", "rwrwrw", "rw", "rwrw"}, 3, 0},
		{"mixed", []string{"rrww", "rwrw", "rrww", "rwrw", "rr"}, 4, 0.5},
		{"one request a cycle", []string{"rw", "rw", "rw"}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New()
			b.Begin(0)
			ts := int64(1e9)
			wait := func() {
				b.Event(&trace.Event{TS: ts, Dur: 1000, PID: 1, TID: 2, Op: trace.OpEpollWait})
				ts += 2000
			}
			// MinCycles cycles or more: the given ones, repeated.
			for k := 0; k < MinCycles; k++ {
				for _, c := range tc.cycles {
					wait()
					for _, op := range c {
						ev := trace.Event{TS: ts, Dur: 100, PID: 1, TID: 2, Dir: trace.DirRecv, Op: trace.OpRead, Bytes: 20, Conn: 1}
						m := Msg{PID: 1, TID: 2, Dir: trace.DirRecv, Request: true}
						if op == 'w' {
							ev.Dir, ev.Op, m.Dir, m.Request, m.Reply, m.Answered = trace.DirSend, trace.OpWrite, trace.DirSend, false, true, 1
						}
						b.Event(&ev)
						b.Message(&m)
						ts += 200
					}
				}
			}
			wait()
			r := b.Report(DefaultConfidence)
			if len(r.Threads) != 1 {
				t.Fatalf("%d loop threads, want 1", len(r.Threads))
			}
			th := r.Threads[0]
			if th.MultiRequestCycles != tc.multi*MinCycles || th.RepliesAtCycleEnd != tc.atEndWant {
				t.Errorf("%d multi-request cycles, replies at the end in %.3f; want %d, %.3f", th.MultiRequestCycles, th.RepliesAtCycleEnd, tc.multi*MinCycles, tc.atEndWant)
			}
		})
	}
}

func TestWarnings(t *testing.T) {
	for _, tc := range []struct {
		name string
		ns   []int
		want string
		fit  bool
	}{
		{"constant N", repeat(1, 100), "N barely varies", false},
		{"almost constant N", append(repeat(2, 500), 1), "N barely varies", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New()
			b.Begin(0)
			synth(b, 1, 1, tc.ns, 10_000, 2_000, 3_000)
			r := b.Report(DefaultConfidence)
			if r == nil {
				t.Fatal("no loop found")
			}
			th := r.Threads[0]
			if (th.Fit != nil) != tc.fit {
				t.Errorf("fit %+v, want a fit: %v", th.Fit, tc.fit)
			}
			if !strings.Contains(strings.Join(th.Warnings, "; "), tc.want) {
				t.Errorf("warnings %q, want %q", th.Warnings, tc.want)
			}
		})
	}
}

func TestPoorFit(t *testing.T) {
	f, _, err := FitPoints([]Point{{1, 10, 1}, {2, 2, 1}, {3, 12, 1}, {4, 1, 1}}, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(f.Check(), "; "); !strings.Contains(w, "poor") {
		t.Errorf("check %q: want a poor-fit warning", w)
	}
	if _, _, err := FitPoints([]Point{{2, 10, 1}, {2, 11, 1}}, 0.95); err != ErrNoSpread {
		t.Errorf("one N: err %v, want ErrNoSpread", err)
	}
}

func TestNoWaitsNoLoops(t *testing.T) {
	b := New()
	b.Begin(0)
	for i := 0; i < 100; i++ {
		b.Event(&trace.Event{TS: int64(i) * 1000, PID: 1, TID: 1, Dir: trace.DirRecv, Op: trace.OpRead, Bytes: 10})
		b.Message(&Msg{PID: 1, TID: 1, Dir: trace.DirRecv, Request: true})
	}
	if r := b.Report(DefaultConfidence); r != nil {
		t.Errorf("report %+v from a trace without wait calls", r)
	}
}

func repeat(n, k int) []int {
	out := make([]int, k)
	for i := range out {
		out[i] = n
	}
	return out
}

// TestLastCycleAnswered: a trace that ends while the loop waits again (its closing wait call
// never returned) still counts the last cycle when it answered every request, and not when a
// request is unanswered.
func TestLastCycleAnswered(t *testing.T) {
	for _, answered := range []bool{true, false} {
		b := New()
		b.Begin(0)
		ns := repeat(2, 20)
		synth(b, 1, 1, ns, 10_000, 2_000, 3_000)
		// one more cycle, its closing wait never recorded
		ts := int64(9e9)
		b.Event(&trace.Event{TS: ts, Dur: 1000, PID: 1, TID: 1, Op: trace.OpEpollWait, Bytes: 1})
		b.Event(&trace.Event{TS: ts + 2000, PID: 1, TID: 1, Dir: trace.DirRecv, Op: trace.OpRead, Bytes: 20})
		b.Message(&Msg{PID: 1, TID: 1, Dir: trace.DirRecv, Request: true})
		if answered {
			b.Event(&trace.Event{TS: ts + 4000, Dur: 500, PID: 1, TID: 1, Dir: trace.DirSend, Op: trace.OpWrite, Bytes: 5})
			b.Message(&Msg{PID: 1, TID: 1, Dir: trace.DirSend, Reply: true, Answered: 1})
		}
		th := b.Report(DefaultConfidence).Threads[0]
		want := uint64(2*len(ns) + 1)
		if !answered {
			want--
		}
		if th.Requests != want {
			t.Errorf("answered %v: %d requests counted, want %d", answered, th.Requests, want)
		}
	}
}
