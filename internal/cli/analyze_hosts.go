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
	units := map[string]bool{}
	for _, n := range strings.Split(opt.UnitCommands, ",") {
		if n = strings.TrimSpace(n); n != "" {
			units[n] = true
		}
	}
	v := breakdown.NewVisitor(units)
	if err := analyzers.Visit(traceInputs([]string{path}), opt, v); err != nil {
		return nil, err
	}
	if v.Builder == nil {
		return nil, nil
	}
	return v.Builder.Report(opt.Unit), nil
}
