package analyzers

import (
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// sink hands the analyzer what a scan of traces yields (protocol.Sink).
type sink struct{ a *analyzer }

func (s sink) Begin(i int, path string, meta trace.Meta) { s.a.begin(i, path, meta) }

func (s sink) Record(rec *trace.Record) {
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

func (s sink) Message(m *protocol.Message)                         { s.a.message(m) }
func (s sink) Answered(m *protocol.Message, req protocol.Answered) { s.a.answered(m, req) }
func (s sink) End(i int, rec trace.Recovery, d *protocol.Decoder)  { s.a.end(i, rec, d) }
