//go:build !linux

package trace

import "time"

var processStart = time.Now()

// kernelMonotonic has no kernel clock to match on this platform (no eBPF timestamps): it counts
// ns from the process start.
func kernelMonotonic() int64 { return int64(time.Since(processStart)) }

// KernelRelease returns "" on this platform.
func KernelRelease() string { return "" }
