package trace

import "time"

// The time base of traces: every event's TS is CLOCK_MONOTONIC in ns on Linux, the clock of
// eBPF timestamps (bpf_ktime_get_ns), so that probe and in-process tracer events of one machine
// share a time base. It is read in one place, here.

var monoStart, monoStartBase = calibrateMonotonic()

// calibrateMonotonic pairs a Go time with a kernel monotonic reading of the same instant. It
// brackets the system call with two Go readings, keeps the tightest of several tries and takes
// its midpoint, so that Monotonic and the kernel's clock agree to within half a system call
// (well under a µs), not the few µs a single cold pair can be apart.
func calibrateMonotonic() (time.Time, int64) {
	var best time.Duration = -1
	var start time.Time
	var base int64
	for i := 0; i < 16; i++ {
		t0 := time.Now()
		c := kernelMonotonic()
		gap := time.Since(t0)
		if best < 0 || gap < best {
			best, start, base = gap, t0.Add(gap/2), c
		}
	}
	return start, base
}

// Monotonic returns the trace clock in ns: CLOCK_MONOTONIC on Linux, read through Go's
// monotonic clock from the calibration made at start (no system call).
func Monotonic() int64 { return monoStartBase + int64(time.Since(monoStart)) }

// StampStart sets m.Start (wall clock) and m.StartMono (trace clock, ns) to the same instant,
// so that event timestamps map to wall time.
func StampStart(m *Meta) {
	m.Start = time.Now()
	m.StartMono = monoStartBase + int64(m.Start.Sub(monoStart))
}
