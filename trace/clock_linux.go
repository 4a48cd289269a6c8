//go:build linux

package trace

import (
	"os"
	"strings"
	"syscall"
	"unsafe"
)

// kernelMonotonic reads CLOCK_MONOTONIC in ns with a system call (0 when it fails).
func kernelMonotonic() int64 {
	var ts syscall.Timespec
	const clockMonotonic = 1
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0
	}
	return ts.Nano()
}

// KernelRelease returns the running kernel's release (uname -r), or "" when unknown.
func KernelRelease() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
