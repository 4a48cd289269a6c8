//go:build !unix

package cli

// processExists reports whether pid names a live process. Only record and top ask, and they
// run on Linux only (Command.LinuxOnly), so elsewhere no process is known.
func processExists(pid uint32) bool { return false }
