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

// twoHosts returns the client/network/server split of the first merged trace in s (merged: what
// the analysis's pass gave it, a splitVisitor), or of the traces themselves when they are
// recordings of one system from several hosts (their connections match, by conns: the
// connection records of each trace, from the analysis's pass); nil otherwise. It adds its
// warnings to s's, and reads the traces a second time when they are recordings of several
// hosts (merging them needs them whole).
func twoHosts(paths []string, opt analyzers.Options, s *analyzers.Summary, conns []*trace.File, merged *breakdown.Visitor) (*breakdown.Report, error) {
	if merged.Builder != nil {
		r := splitReport(merged, opt)
		for _, w := range r.Warnings {
			s.Warnings = append(s.Warnings, "two hosts: "+w)
		}
		return r, nil
	}
	if len(paths) < 2 || len(paths) > maxHostTraces {
		return nil, nil
	}
	r, err := splitHosts(paths, opt, conns)
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

// connRecords keeps, from the analysis's pass over the traces (a protocol.Visitor), the
// connection records of each trace when keep is set: analyze needs them to tell whether its
// traces are recordings of one system from several hosts.
type connRecords struct {
	keep  bool
	files []*trace.File
}

func (c *connRecords) Begin(i int, _ string, _ trace.Meta) {
	if c.keep {
		c.files = append(c.files, &trace.File{})
	}
}

func (c *connRecords) Record(rec *trace.Record) {
	if c.keep && rec.Kind == trace.KindConnection && len(c.files) > 0 {
		f := c.files[len(c.files)-1]
		f.Connections = append(f.Connections, rec.Conn)
	}
}

func (c *connRecords) Message(*protocol.Message)                     {}
func (c *connRecords) Answered(*protocol.Message, protocol.Answered) {}
func (c *connRecords) End(int, trace.Recovery)                       {}

// connsMatch reports whether a connection of one trace is one of another seen from its other
// end (merge.MatchConns), by the traces' connection records (files): most analyses of several
// traces are of separate runs, which need not be read again.
func connsMatch(files []*trace.File) bool {
	if len(files) < 2 {
		return false
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
func splitHosts(paths []string, opt analyzers.Options, conns []*trace.File) (*breakdown.Report, error) {
	var total int64
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, nil // analyze has reported it already
		}
		total += fi.Size()
	}
	if total > maxHostBytes || !connsMatch(conns) {
		return nil, nil
	}
	inputs := make([]merge.Input, len(paths))
	for i, p := range paths {
		f, err := readTraceFile(p)
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

// splitVisitor returns the visitor that splits the round trips of the first merged trace of a
// pass (its metadata has clocks of several hosts), with opt's unit commands.
func splitVisitor(opt analyzers.Options) *breakdown.Visitor {
	units := map[string]bool{}
	for _, n := range strings.Split(opt.UnitCommands, ",") {
		if n = strings.TrimSpace(n); n != "" {
			units[n] = true
		}
	}
	return breakdown.NewVisitor(units)
}

// splitReport returns the split v made, nil when its pass held no merged trace.
func splitReport(v *breakdown.Visitor, opt analyzers.Options) *breakdown.Report {
	if v.Builder == nil {
		return nil
	}
	return v.Builder.Report(opt.Unit)
}

// splitMerged decodes the merged trace in and splits its round trips.
func splitMerged(in protocol.Input, opt analyzers.Options) (*breakdown.Report, error) {
	v := splitVisitor(opt)
	if err := analyzers.Visit([]protocol.Input{in}, opt, v); err != nil {
		return nil, err
	}
	return splitReport(v, opt), nil
}
