package lab

import (
	"runtime"
	"strings"
	"sync"
	"testing"
)

// TestRunDelay: with more busy threads than CPUs, this process's threads wait for a CPU, and
// the kernel's count of it grows.
func TestRunDelay(t *testing.T) {
	before, ok := runDelays()
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
		if waited, ok = runDelaySince(before); !ok {
			t.Fatal("schedstat unreadable after the busy threads")
		}
	}
	if waited <= 0 {
		t.Errorf("run delay %d ns since the start: busy threads beyond the CPUs waited for none", waited)
	}
}

// TestRunQueueNote says what the figure covers and sets its rise against the mean RTT's, without
// calling the ratio the run queue's share.
func TestRunQueueNote(t *testing.T) {
	res := &Result{Points: []Point{
		{Clients: 1, RTTUS: RTT{Mean: 20}, RunQueueUS: 2},
		{Clients: 4, RTTUS: RTT{Mean: 60}, RunQueueUS: 12},
	}}
	note := runQueueNote(res, []int{0, 1})
	for _, want := range []string{"all of perflab's threads", "summed over the threads", "2 µs at 1 client, 12 µs at 4 clients",
		"rose by 10 µs while the mean RTT rose by 40 µs (25.0% of it)", "not the run queue's share", "--evidence sched"} {
		if !strings.Contains(note, want) {
			t.Errorf("note %q lacks %q", note, want)
		}
	}
	if strings.Contains(note, "accounts for") {
		t.Errorf("note %q claims a share it does not measure", note)
	}
	res.Points[1].RunQueueUS = 1
	if note := runQueueNote(res, []int{0, 1}); !strings.Contains(note, "changed by -1 µs while the mean RTT changed by 40 µs") {
		t.Errorf("note %q: a fall set against a rise gets no ratio", note)
	}
	res.Points[1].RunQueueUS = 12
	res.Points[1].RTTUS.Mean = 15
	if note := runQueueNote(res, []int{0, 1}); !strings.Contains(note, "changed by 10 µs while the mean RTT changed by -5 µs") {
		t.Errorf("note %q", note)
	}
	res.Points[0].RunQueueUS, res.Points[1].RunQueueUS = 0, 0
	if note := runQueueNote(res, []int{0, 1}); note != "" {
		t.Errorf("a note without schedstat: %q", note)
	}
}
