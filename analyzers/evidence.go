package analyzers

import (
	"strings"

	"github.com/perflab/perflab/evidence"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// evidenceMessage hands the evidence analysis a client's request (how many calls wrote it, for
// polling) or a client's paired reply (to attribute its round trip's time).
func (a *analyzer) evidenceMessage(m *protocol.Message) {
	switch {
	case m.Dir == trace.DirSend && !m.IsReply:
		a.ev.Request(&evidence.Request{Conn: m.Conn, PID: m.PID, Command: m.Name, Size: m.Size, Calls: m.Calls, TS: m.TS, End: m.End, WantsReply: m.WantsReply, Digest: m.Digest})
	case m.Dir == trace.DirRecv && m.IsReply && m.RTT > 0:
		a.ev.RoundTrip(&evidence.RoundTrip{Conn: m.Conn, PID: m.PID, TID: m.TID, Command: m.Name, ReqTS: m.ReqTS,
			ReqEnd: m.ReqEnd, End: m.End, Size: m.Size, Status: m.Status, Blocks: m.Blocks})
	}
}

// finishEvidence sets Summary.Evidence when the traces hold kernel evidence or the evidence
// finds something; findings are costed per the first unit of work, if any.
func (a *analyzer) finishEvidence() {
	s := a.s
	// Requests in flight counted low (pipelined past the heads) would call pipelined round trips
	// serial: the evidence is not given them.
	if s.InFlight != nil && s.InFlight.Of != "service" && !s.CountsLowerBound() {
		a.ev.SetInFlight(s.InFlight.Mean)
	}
	// The unit in its steady state when there is one, else the first.
	var u evidence.Unit
	for _, x := range s.Units {
		if x.Count > 0 && x.Side != "server" && (u.Count == 0 || x.Shape == "steady") {
			u = evidence.Unit{Name: x.Name, Count: x.Count, RequestsPerUnit: x.RequestsPerUnit, RoundTripsPerUnit: x.RoundTripsPerUnit}
		}
	}
	u.Modelled = a.markerUnitsSeen && a.classesCalls()
	r := a.ev.Result(u)
	if len(r.Parts) == 0 && len(r.Findings) == 0 {
		return
	}
	s.Evidence = r
}

// classesCalls reports whether the protocol the calls were decoded with (the one given, else
// any that auto detection chose) classes them as submits and sync points, as perflab model
// needs.
func (a *analyzer) classesCalls() bool {
	classes := func(sp *protocol.Spec) bool {
		return sp != nil && len(sp.SubmitCommands)+len(sp.SyncCommands) > 0
	}
	if a.opt.Spec != nil {
		return classes(a.opt.Spec)
	}
	for _, name := range strings.Split(a.s.Protocol, ",") {
		if sp, err := protocol.BuiltinSpec(name); err == nil && classes(sp) {
			return true
		}
	}
	return false
}
