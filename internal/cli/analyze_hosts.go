package cli

import (
	"strings"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/breakdown"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// hostsVisitor feeds the first merged trace among the analysed ones (its metadata has clocks)
// to a breakdown.Builder.
type hostsVisitor struct {
	b     *breakdown.Builder
	cur   int
	trace int // index of the merged trace, -1 until one is seen
	units map[string]bool
}

func (v *hostsVisitor) Begin(i int, _ string, meta trace.Meta) {
	v.cur = i
	if v.trace < 0 && len(meta.Clocks) > 1 {
		v.trace, v.b = i, breakdown.New(meta.Clocks)
	}
}

func (v *hostsVisitor) Record(rec *trace.Record) {
	if v.b == nil || v.cur != v.trace {
		return
	}
	switch rec.Kind {
	case trace.KindConnection:
		v.b.Conn(rec.Conn)
	case trace.KindMarker:
		v.b.Marker(rec.Marker)
	}
}

func (v *hostsVisitor) Message(m *protocol.Message) {
	if v.b == nil || v.cur != v.trace {
		return
	}
	v.b.Message(breakdown.Msg{Conn: m.Conn, Send: m.Dir == trace.DirSend, TS: m.TS, End: m.End, Size: m.Size,
		Name: m.Name, Reply: m.IsReply, ReqTS: m.ReqTS, Unit: m.OpensUnit(v.units)})
}

func (v *hostsVisitor) Answered(*protocol.Message, protocol.Answered) {}
func (v *hostsVisitor) End(int, trace.Recovery)                       {}

// twoHosts returns the client/network/server split of the first merged trace in s, nil when
// none was merged, and adds its warnings to s's. It decodes that trace a second time.
func twoHosts(paths []string, opt analyzers.Options, s *analyzers.Summary) (*breakdown.Report, error) {
	for i, m := range s.Meta {
		if len(m.Clocks) > 1 {
			r, err := splitMerged(paths[i], opt)
			if r != nil {
				for _, w := range r.Warnings {
					s.Warnings = append(s.Warnings, "two hosts: "+w)
				}
			}
			return r, err
		}
	}
	return nil, nil
}

// mergedSplit returns the split of the trace at path when it is a merged trace (its metadata
// has clocks of several hosts), else nil.
func mergedSplit(path string, opt analyzers.Options) (*breakdown.Report, error) {
	r, err := trace.Open(path)
	if err != nil {
		return nil, &protocol.ReadError{Path: path, Err: err}
	}
	meta := r.Meta()
	r.Close()
	if len(meta.Clocks) < 2 {
		return nil, nil
	}
	return splitMerged(path, opt)
}

// splitMerged decodes the merged trace at path and splits its round trips.
func splitMerged(path string, opt analyzers.Options) (*breakdown.Report, error) {
	v := &hostsVisitor{trace: -1, units: map[string]bool{}}
	for _, n := range strings.Split(opt.UnitCommands, ",") {
		if n = strings.TrimSpace(n); n != "" {
			v.units[n] = true
		}
	}
	if err := analyzers.Visit(traceInputs([]string{path}), opt, v); err != nil {
		return nil, err
	}
	if v.b == nil {
		return nil, nil
	}
	return v.b.Report(opt.Unit), nil
}
