package venusd

import (
	"os"

	"github.com/perflab/perflab/trace"
)

// Monotonic returns the tracer's clock: the trace clock (CLOCK_MONOTONIC in ns, the clock of
// eBPF timestamps), with no system call.
func Monotonic() int64 { return trace.Monotonic() }

// TraceMeta returns a trace.Meta for a venusd tracer recording: Start and StartMono describe
// the same instant, Source is "tracer", Protocol "venus".
func TraceMeta(command []string, payloadBytes int) trace.Meta {
	host, _ := os.Hostname()
	m := trace.Meta{
		Host: host, Kernel: trace.KernelRelease(),
		Command: command, PIDs: []uint32{uint32(os.Getpid())}, Source: "tracer",
		PayloadBytes: payloadBytes, Protocol: "venus",
	}
	trace.StampStart(&m)
	return m
}
