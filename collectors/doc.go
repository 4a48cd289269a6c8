// Package collectors drives event sources (eBPF probes, in-process tracers): it pairs enter and exit, stamps wall time, counts lost events, writes trace files and shows live progress.
package collectors
