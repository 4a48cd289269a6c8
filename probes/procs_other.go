//go:build !linux

package probes

// Descendants returns nil: processes are only followed on Linux.
func Descendants(roots []uint32) []uint32 { return nil }
