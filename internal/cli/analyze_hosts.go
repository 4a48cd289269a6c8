package cli

import (
	"strings"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/breakdown"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// twoHosts returns the client/network/server split of the first merged trace in s, nil when
// none was merged, and adds its warnings to s's. It decodes that trace a second time.
func twoHosts(paths []string, opt analyzers.Options, s *analyzers.Summary) (*breakdown.Report, error) {
	for i, m := range s.Meta {
		if len(m.Clocks) > 1 {
			r, err := splitMerged(traceInput(paths[i]), opt)
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

// mergedSplit returns the split of the trace in when it is a merged trace (its metadata
// has clocks of several hosts), else nil.
func mergedSplit(in protocol.Input, opt analyzers.Options) (*breakdown.Report, error) {
	f, err := in.Open()
	if err != nil {
		return nil, &protocol.ReadError{Path: in.Name, Err: err}
	}
	r, err := trace.NewReader(f)
	f.Close()
	if err != nil {
		return nil, &protocol.ReadError{Path: in.Name, Err: err}
	}
	if len(r.Meta().Clocks) < 2 {
		return nil, nil
	}
	return splitMerged(in, opt)
}

// splitMerged decodes the merged trace in and splits its round trips.
func splitMerged(in protocol.Input, opt analyzers.Options) (*breakdown.Report, error) {
	units := map[string]bool{}
	for _, n := range strings.Split(opt.UnitCommands, ",") {
		if n = strings.TrimSpace(n); n != "" {
			units[n] = true
		}
	}
	v := breakdown.NewVisitor(units)
	if err := analyzers.Visit([]protocol.Input{in}, opt, v); err != nil {
		return nil, err
	}
	if v.Builder == nil {
		return nil, nil
	}
	return v.Builder.Report(opt.Unit), nil
}
