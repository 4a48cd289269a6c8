// Package collectors runs a recording: it drains a Source (perflab's eBPF probes, or any
// producer of trace records) into a trace.Writer whose header it stamps with the trace clock,
// counts the events and the lost-event totals per source, prints live progress, and writes the
// summary. Sources deliver finished records: the eBPF programs put each system call's start,
// end and data together in the kernel, so nothing here pairs enter and exit. venusd's
// in-process tracer writes its traces itself, with the same clock (trace.Monotonic).
package collectors
