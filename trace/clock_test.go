package trace

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMonotonicMatchesKernelClock checks that the trace clock agrees with the kernel's
// (CLOCK_MONOTONIC on Linux, the clock of eBPF timestamps): a kernel reading bracketed by two
// Monotonic readings falls between them, give or take 2 µs, in at least one of 100 tries.
func TestMonotonicMatchesKernelClock(t *testing.T) {
	for i := 0; i < 100; i++ {
		a := Monotonic()
		c := kernelMonotonic()
		b := Monotonic()
		if c >= a-2000 && c <= b+2000 {
			return
		}
	}
	a, c := Monotonic(), kernelMonotonic()
	t.Errorf("Monotonic %d and the kernel clock %d disagree by %v", a, c, time.Duration(c-a))
}

// TestStampStart checks that Start and StartMono describe the same instant: Monotonic read
// after StampStart is at least StartMono and no further from it than the wall clock has moved.
func TestStampStart(t *testing.T) {
	var m Meta
	StampStart(&m)
	mono := Monotonic()
	wall := time.Since(m.Start)
	if d := mono - m.StartMono; d < 0 || time.Duration(d) > wall+time.Millisecond {
		t.Errorf("StartMono is %v before Monotonic, the wall clock moved %v", time.Duration(d), wall)
	}
}

func TestKernelRelease(t *testing.T) {
	if r := KernelRelease(); runtime.GOOS == "linux" && (r == "" || strings.ContainsAny(r, " \n")) {
		t.Errorf("kernel release %q", r)
	}
}
