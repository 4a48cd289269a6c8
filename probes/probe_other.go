//go:build !linux || !amd64

package probes

import (
	"context"

	"github.com/perflab/perflab/trace"
)

// Probe is a socket probe; on this platform it cannot be opened.
type Probe struct{}

// Open returns ErrUnsupported: the probes are built for Linux on x86-64 only.
func Open(cfg Config) (*Probe, error) { return nil, ErrUnsupported }

// Probes returns nil.
func (p *Probe) Probes() []string { return nil }

// AddPID returns ErrUnsupported.
func (p *Probe) AddPID(pid uint32) error { return ErrUnsupported }

// RemovePID returns ErrUnsupported.
func (p *Probe) RemovePID(pid uint32) error { return ErrUnsupported }

// FollowChildren returns ErrUnsupported.
func (p *Probe) FollowChildren(pid uint32) (func() error, error) { return nil, ErrUnsupported }

// Targets returns ErrUnsupported.
func (p *Probe) Targets() ([]uint32, error) { return nil, ErrUnsupported }

// Counts returns ErrUnsupported.
func (p *Probe) Counts() (Counts, error) { return Counts{}, ErrUnsupported }

// Run returns ErrUnsupported.
func (p *Probe) Run(ctx context.Context, emit func(*trace.Record) error) error {
	return ErrUnsupported
}

// Stats returns nil.
func (p *Probe) Stats() map[string]int64 { return nil }

// Close does nothing.
func (p *Probe) Close() error { return nil }

// ProgramExists returns false.
func ProgramExists(id uint32) bool { return false }

// LinkExists returns false.
func LinkExists(id uint32) bool { return false }

// AttachTLS returns ErrUnsupported.
func (p *Probe) AttachTLS(path string) (bool, error) { return false, ErrUnsupported }

// StartUprobes returns ErrUnsupported.
func (p *Probe) StartUprobes(pids []uint32, command string) error { return ErrUnsupported }
