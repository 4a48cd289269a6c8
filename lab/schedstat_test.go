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

// TestRunQueueNote sets the run queue's rise against the mean RTT's.
func TestRunQueueNote(t *testing.T) {
	res := &Result{Points: []Point{
		{Clients: 1, RTTUS: RTT{Mean: 20}, RunQueueUS: 2},
		{Clients: 4, RTTUS: RTT{Mean: 60}, RunQueueUS: 12},
	}}
	note := runQueueNote(res, []int{0, 1})
	if !strings.Contains(note, "accounts for up to 25.0%") || !strings.Contains(note, "at 4 clients") {
		t.Errorf("note %q", note)
	}
	res.Points[1].RunQueueUS = 100
	if note := runQueueNote(res, []int{0, 1}); !strings.Contains(note, "rose more than the mean RTT") {
		t.Errorf("note %q", note)
	}
	res.Points[0].RunQueueUS, res.Points[1].RunQueueUS = 0, 0
	if note := runQueueNote(res, []int{0, 1}); note != "" {
		t.Errorf("a note without schedstat: %q", note)
	}
}
