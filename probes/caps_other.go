//go:build !linux

package probes

// CheckPrivileges returns ErrUnsupported: the probes run on Linux only.
func CheckPrivileges() error { return ErrUnsupported }
