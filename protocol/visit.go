package protocol

import "github.com/perflab/perflab/trace"

// A Visitor receives what one streaming pass over traces yields, in file order: each record as
// the reader returns it, and the protocol messages the decoders rebuild from the events, each
// right after the event that completed it. Pointers passed to a Visitor are reused after the
// call returns: copy what is kept.
type Visitor interface {
	// Begin starts trace i (its index in the paths given) with its metadata.
	Begin(i int, path string, meta trace.Meta)
	// Record is one record of the trace: an event, a connection, a marker or a lost count.
	Record(rec *trace.Record)
	// Message is one decoded protocol message.
	Message(m *Message)
	// Answered reports, right after the reply m, one further request that m answers (a server
	// that batches several replies into one frame). The first request m answers is m itself
	// (m.ReqTS, m.Command).
	Answered(m *Message, req Answered)
	// End closes trace i with what its reader recovered.
	End(i int, rec trace.Recovery)
}

// Visit reads the traces ins once, in order, streaming, and hands v every record and
// every message decoded with spec (nil: detect each connection's protocol). Memory grows with the connections and the requests awaiting a reply,
// not with the length of the traces. A trace that cannot be read gives a *ReadError naming
// the file (and the offset, for a bad format); the traces before it have been visited.
func Visit(ins []Input, spec *Spec, v Visitor) error {
	return Scan(ins, spec, visitSink{v})
}

// OpensUnit reports whether m is a request that opens a unit of work by its protocol's spec
// (the spec's unit_commands), or by names, when names is not empty (Options.UnitCommands,
// comma-separated names already split).
func (m *Message) OpensUnit(names map[string]bool) bool {
	if m.IsReply {
		return false
	}
	if len(names) > 0 {
		return names[m.Name]
	}
	return m.spec != nil && m.spec.OpensUnit(m.Command)
}

// UnitName returns the name of the unit of work that m's spec counts ("token"), "unit" when
// the spec names unit commands without a unit name, and "" when m has no spec.
func (m *Message) UnitName() string {
	if m.spec == nil {
		return ""
	}
	return m.spec.UnitName
}

// visitSink adapts a Visitor to the scan's Sink.
type visitSink struct{ Visitor }

func (s visitSink) End(i int, rec trace.Recovery, _ *Decoder) { s.Visitor.End(i, rec) }

// Tee returns a Visitor that hands each call to every one of vs, in order.
func Tee(vs ...Visitor) Visitor { return tee(vs) }

type tee []Visitor

func (t tee) Begin(i int, path string, meta trace.Meta) {
	for _, v := range t {
		v.Begin(i, path, meta)
	}
}

func (t tee) Record(rec *trace.Record) {
	for _, v := range t {
		v.Record(rec)
	}
}

func (t tee) Message(m *Message) {
	for _, v := range t {
		v.Message(m)
	}
}

func (t tee) Answered(m *Message, req Answered) {
	for _, v := range t {
		v.Answered(m, req)
	}
}

func (t tee) End(i int, rec trace.Recovery) {
	for _, v := range t {
		v.End(i, rec)
	}
}
