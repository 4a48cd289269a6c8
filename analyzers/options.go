package analyzers

import "github.com/perflab/perflab/protocol"

// DefaultConfidence is the confidence level of every interval the analyzers report (medians,
// fitted parameters): 0.95.
const DefaultConfidence = 0.95

// DefaultWindowCalls is the size of a per-window summary, in calls, as in Venus Plus's
// VENUS_TRACE_NET output ("summary at 100 calls").
const DefaultWindowCalls = 100

// Options selects how traces are decoded and analysed. The zero value means: detect the protocol,
// DefaultConfidence, DefaultWindowCalls.
type Options struct {
	// Protocol names a built-in decoder: "auto" (or ""), "venus", "ggml-rpc", "resp", "http",
	// "memcached", "raw".
	// It is ignored when Spec or SpecFile is set.
	Protocol string
	// SpecFile is a protocol spec (JSON, docs/protocol-spec.md) to load instead of a built-in.
	SpecFile string
	// Spec is an already loaded protocol spec; it wins over SpecFile and Protocol.
	Spec *protocol.Spec
	// Unit names the unit of work to count per ("token"); "" means: the "token" markers when the
	// trace has them, else the spec's unit command.
	Unit string
	// UnitCommands, when set, names (comma-separated) the commands each of which opens a unit
	// of work, instead of the spec's unit_commands (e.g. "vkQueueSubmit" for a trace without
	// token markers). A string keeps Options comparable.
	UnitCommands string
	// Markers, when set, is a trace whose markers (token, phase) apply to every trace analysed,
	// instead of their own:
	// an eBPF recording of a process that a tracer marked in a second file at the same time
	// (both use CLOCK_MONOTONIC).
	Markers string
	// Confidence is the level of confidence intervals, 0 < c < 1 (0 means DefaultConfidence).
	Confidence float64
	// WindowCalls is the size of the per-window summaries in calls (0 means DefaultWindowCalls).
	WindowCalls int
	// RecordMemory is how many bytes of per-message records analyze holds in memory before it
	// moves the older ones to an unlinked temporary file (in $TMPDIR) and reads them back at
	// each trace's end: 0 means DefaultRecordMemory, < 0 no limit. The results do not depend on it.
	RecordMemory int64
}

// ResolveSpec returns the protocol spec that o asks for: o.Spec, else the one in o.SpecFile,
// else the built-in o.Protocol; nil for "auto", which detects each connection's protocol.
func (o Options) ResolveSpec() (*protocol.Spec, error) {
	return protocol.Resolve(o.Protocol, o.SpecFile, o.Spec)
}

// Messages decodes the protocol messages of the traces ins as opt asks, in each trace's
// order, and calls fn for each (protocol.Messages); with no paths it only checks opt's protocol.
func Messages(ins []protocol.Input, opt Options, fn func(*protocol.Message) error) error {
	spec, err := opt.ResolveSpec()
	if err != nil {
		return err
	}
	return protocol.Messages(ins, spec, fn)
}

// Visit reads the traces ins once, in order, and hands v every record and every message
// decoded as opt asks (protocol.Visit).
func Visit(ins []protocol.Input, opt Options, v protocol.Visitor) error {
	spec, err := opt.ResolveSpec()
	if err != nil {
		return err
	}
	return protocol.Visit(ins, spec, v)
}
