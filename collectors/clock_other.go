//go:build !linux

package collectors

import (
	"time"

	"github.com/perflab/perflab/trace"
)

var origin = time.Now()

// Monotonic returns a monotonic clock in ns (since the process started: this platform has no
// eBPF timestamps to match).
func Monotonic() int64 { return int64(time.Since(origin)) }

// StampStart sets m.Start and m.StartMono to the same instant.
func StampStart(m *trace.Meta) {
	m.Start = time.Now()
	m.StartMono = Monotonic()
}
