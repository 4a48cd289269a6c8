//go:build unix

package cli

import (
	"errors"
	"syscall"
)

// processExists reports whether pid names a live process.
func processExists(pid uint32) bool {
	err := syscall.Kill(int(pid), 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
