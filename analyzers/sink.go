package analyzers

import (
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// sink hands the analyzer what a scan of traces yields (protocol.Sink), and then also, when it
// is set.
type sink struct {
	a    *analyzer
	also protocol.Visitor
	// idle is set while also takes nothing of the current trace (it said so: idler); also is
	// then handed only the trace's Begin and End
	idle bool
}

// idler is a Visitor that can tell, after a trace's Begin, that it takes none of that trace's
// records, messages and answered requests.
type idler interface {
	Idle() bool
}

func (s *sink) Begin(i int, path string, meta trace.Meta) {
	s.a.begin(i, path, meta)
	if s.also != nil {
		s.also.Begin(i, path, meta)
		v, ok := s.also.(idler)
		s.idle = ok && v.Idle()
	}
}

func (s *sink) Record(rec *trace.Record) {
	s.record(rec)
	if s.also != nil && !s.idle {
		s.also.Record(rec)
	}
}

// event hands the analyzer an event of the scan, and also as a record (in rec, which it
// overwrites) when also is set.
func (s *sink) event(ev *trace.Event, rec *trace.Record) {
	s.a.event(ev)
	if s.also != nil && !s.idle {
		rec.Kind, rec.Event = trace.KindEvent, *ev
		s.also.Record(rec)
	}
}

func (s *sink) record(rec *trace.Record) {
	switch rec.Kind {
	case trace.KindEvent:
		s.a.event(&rec.Event)
	case trace.KindConnection:
		s.a.connection(&rec.Conn)
	case trace.KindMarker:
		s.a.marker(&rec.Marker)
	case trace.KindLost:
		s.a.lostCount(&rec.Lost)
	}
}

func (s *sink) Message(m *protocol.Message) {
	s.a.message(m)
	if s.also != nil && !s.idle {
		s.also.Message(m)
	}
}

func (s *sink) Answered(m *protocol.Message, req protocol.Answered) {
	s.a.answered(m, req)
	if s.also != nil && !s.idle {
		s.also.Answered(m, req)
	}
}

func (s *sink) End(i int, rec trace.Recovery, d *protocol.Decoder) {
	s.a.end(i, rec, d)
	if s.also != nil {
		s.also.End(i, rec)
	}
}
