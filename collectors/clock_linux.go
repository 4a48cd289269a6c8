//go:build linux

package collectors

import (
	"syscall"
	"time"
	"unsafe"

	"github.com/perflab/perflab/trace"
)

const clockMonotonic = 1

// Monotonic returns CLOCK_MONOTONIC in ns: the clock of eBPF event timestamps
// (bpf_ktime_get_ns).
func Monotonic() int64 {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

// StampStart sets m.Start and m.StartMono to the same instant, so that event timestamps
// (monotonic ns) map to wall time.
func StampStart(m *trace.Meta) {
	before := Monotonic()
	m.Start = time.Now()
	after := Monotonic()
	m.StartMono = before + (after-before)/2
}
