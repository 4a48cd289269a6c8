package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/breakdown"
	"github.com/perflab/perflab/merge"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// twoHosts returns the client/network/server split of the first merged trace in s, or of the
// traces themselves when they are recordings of one system from several hosts (their
// connections match); nil otherwise. It adds its warnings to s's, and decodes the traces a
// second time.
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
	if len(paths) < 2 || len(paths) > maxHostTraces {
		return nil, nil
	}
	r, err := splitHosts(paths, opt)
	if r != nil {
		for _, w := range r.Warnings {
			s.Warnings = append(s.Warnings, "two hosts: "+w)
		}
	}
	return r, err
}

// maxHostTraces and maxHostBytes bound the traces that analyze tries to put on one timeline
// when they were not merged: merging reads them whole into memory.
const (
	maxHostTraces = 8
	maxHostBytes  = 256 << 20 // about 40 M events, some 4 GB once read whole
)

// connsMatch reports whether a connection of one trace at paths is one of another seen from
// its other end (merge.MatchConns), reading only their connection records: most analyses of
// several traces are of separate runs, which need not be read whole.
func connsMatch(paths []string) bool {
	files := make([]*trace.File, len(paths))
	for i, p := range paths {
		r, err := trace.Open(p)
		if err != nil {
			return false
		}
		f := &trace.File{}
		var rec trace.Record
		for r.Next(&rec) == nil {
			if rec.Kind == trace.KindConnection {
				f.Connections = append(f.Connections, rec.Conn)
			}
		}
		r.Close()
		files[i] = f
	}
	for i := range files {
		for j := i + 1; j < len(files); j++ {
			if len(merge.MatchConns(i, j, files[i], files[j])) > 0 {
				return true
			}
		}
	}
	return false
}

// splitHosts tries to merge traces recorded on different hosts (perflab merge's placement,
// in memory): when their connections match, it returns the split of the merged recording, with
// merge's warnings; when they do not (a before/after pair, say), nil.
func splitHosts(paths []string, opt analyzers.Options) (*breakdown.Report, error) {
	var total int64
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, nil // analyze has reported it already
		}
		total += fi.Size()
	}
	if total > maxHostBytes || !connsMatch(paths) {
		return nil, nil
	}
	inputs := make([]merge.Input, len(paths))
	for i, p := range paths {
		f, err := trace.ReadFile(p)
		if err != nil {
			return nil, nil
		}
		inputs[i] = merge.Input{Name: p, File: f}
	}
	res, err := merge.Place(inputs)
	if err != nil {
		return nil, nil // not recordings of one system from several hosts
	}
	dir, err := os.MkdirTemp("", "perflab-hosts-")
	if err != nil {
		return nil, fmt.Errorf("merge the traces: %w", err)
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, "merged.plt")
	if err := res.Write(func(m trace.Meta) (*trace.Writer, error) { return trace.Create(tmp, m, nil) }); err != nil {
		return nil, fmt.Errorf("merge the traces: %w", err)
	}
	r, err := splitMerged(traceInput(tmp), opt)
	if r != nil {
		r.Warnings = append(append([]string{"the traces were put on one timeline as perflab merge does (their clocks are in two_hosts.hosts)"}, res.Warnings...), r.Warnings...)
	}
	return r, err
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
