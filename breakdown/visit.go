package breakdown

import (
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// Visitor is a protocol.Visitor that feeds the first merged trace of a scan (its metadata has
// the clocks of several hosts) to a Builder; Builder is nil until one was seen.
type Visitor struct {
	Builder *Builder
	units   map[string]bool
	cur     int
	trace   int // index of the merged trace, -1 until one is seen
}

var _ protocol.Visitor = (*Visitor)(nil)

// NewVisitor returns a Visitor; unitCommands names the requests that open a unit of work (none:
// the protocol spec's).
func NewVisitor(unitCommands map[string]bool) *Visitor {
	return &Visitor{units: unitCommands, trace: -1}
}

// Begin starts trace i.
func (v *Visitor) Begin(i int, _ string, meta trace.Meta) {
	v.cur = i
	if v.trace < 0 && len(meta.Clocks) > 1 {
		v.trace, v.Builder = i, New(meta.Clocks)
	}
}

// Idle reports whether v takes nothing of the current trace (it is not the merged trace v
// feeds), so that a scan may skip handing it that trace's records and messages.
func (v *Visitor) Idle() bool { return v.Builder == nil || v.cur != v.trace }

// Record takes the merged trace's connections and markers.
func (v *Visitor) Record(rec *trace.Record) {
	if v.Builder == nil || v.cur != v.trace {
		return
	}
	switch rec.Kind {
	case trace.KindConnection:
		v.Builder.Conn(rec.Conn)
	case trace.KindMarker:
		v.Builder.Marker(rec.Marker)
	}
}

// Message takes one decoded message of the merged trace.
func (v *Visitor) Message(m *protocol.Message) {
	if v.Builder == nil || v.cur != v.trace {
		return
	}
	v.Builder.Message(Msg{Conn: m.Conn, Send: m.Dir == trace.DirSend, TS: m.TS, End: m.End, Size: m.Size,
		Name: m.Name, Reply: m.IsReply, ReqTS: m.ReqTS, Unit: m.OpensUnit(v.units), PID: m.PID, TID: m.TID})
}

// Answered is not needed: a reply's first request is the one split.
func (v *Visitor) Answered(*protocol.Message, protocol.Answered) {}

// End closes trace i.
func (v *Visitor) End(int, trace.Recovery) {}
