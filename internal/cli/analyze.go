package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/export"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/reports"
)

// analyzeFormat renders one output format of analyze: from the Summary, or (pprof, perfetto)
// from the traces themselves.
type analyzeFormat struct {
	summary func(w io.Writer, s *analyzers.Summary) error
	traces  func(w io.Writer, ins []protocol.Input, opt analyzers.Options) error
}

var analyzeFormats = map[string]analyzeFormat{
	"table":    {summary: reports.Table},
	"markdown": {summary: reports.Markdown},
	"json":     {summary: reports.JSON},
	"html":     {summary: reports.HTML},
	"pprof":    {traces: export.Pprof},
	"perfetto": {traces: export.Perfetto},
}

// protocolNames are the values of --protocol.
var protocolNames = append([]string{"auto"}, protocol.Builtins()...)

func formatNames() string {
	var names []string
	for n := range analyzeFormats {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, "|")
}

func init() {
	c := &Command{
		Name:    "analyze",
		Summary: "decode, pair and explain the messages of one or more traces",
		Usage:   "[--format table|markdown|json|html|pprof|perfetto] [-o FILE] [--protocol auto|venus|venus-mesa|ggml-rpc|resp|http|memcached|raw] [--protocol-spec FILE] [--unit NAME] [--unit-command NAME,...] [--markers FILE] [--record-memory MIB] TRACE...",
	}
	c.Run = func(ctx context.Context, env *Env, args []string) error { return runAnalyze(env, c, args) }
	Register(c)
}

func runAnalyze(env *Env, c *Command, args []string) error {
	fs := NewFlagSet(env, c)
	format := fs.String("format", "table", "output `format`: "+formatNames())
	out := fs.String("o", "", "write the report to `FILE` instead of stdout")
	proto := fs.String("protocol", "auto", "protocol `decoder`: auto, venus (venusd), venus-mesa (real Venus), ggml-rpc, resp, http, memcached or raw")
	spec := fs.String("protocol-spec", "", "load the protocol from a spec `FILE` (JSON, docs/protocol-spec.md) instead")
	unit := fs.String("unit", "", "marker `NAME` of the unit of work (default: token markers, else the protocol's unit command)")
	markers := fs.String("markers", "", "take the token and phase markers from the trace `FILE` (a tracer's, recorded alongside) instead of the traces' own")
	unitCmd := fs.String("unit-command", "", "command `NAME[,NAME...]` each of which opens a unit of work, for traces without unit markers")
	recMem := fs.Int64("record-memory", analyzers.DefaultRecordMemory>>20, "hold at most `MIB` MiB of per-message records in memory, the older ones in a temporary file in $TMPDIR (0: no limit); the results do not depend on it")
	Choice(fs, "protocol", protocolNames...)
	paths, err := ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return BadInput("no trace given (usage: perflab analyze %s)", c.Usage)
	}
	f, ok := analyzeFormats[*format]
	if !ok {
		return BadInput("--format %q unknown (want %s)", *format, formatNames())
	}
	if f.summary == nil && f.traces == nil {
		return BadInput("--format %s is not available in this build", *format)
	}
	opt, err := analyzeOptions(*proto, *spec, *unit, *unitCmd, *markers)
	if err != nil {
		return err
	}
	switch {
	case *recMem < 0 || *recMem > 1<<40:
		return BadInput("--record-memory %d: want 0 (no limit) to %d MiB", *recMem, int64(1)<<40)
	case *recMem == 0:
		opt.RecordMemory = -1
	default:
		opt.RecordMemory = *recMem << 20
	}
	var s *analyzers.Summary
	if f.summary != nil {
		if s, err = analyzeSummary(env, paths, opt); err != nil {
			return err
		}
	}
	return writeAnalyzeReport(env, f, *out, *format, s, paths, opt)
}

// analyzeOptions builds the analysis options from the flags, loading the --protocol-spec file or
// checking that the --protocol name is known.
func analyzeOptions(proto, spec, unit, unitCmd, markers string) (analyzers.Options, error) {
	opt := analyzers.Options{Protocol: proto, Unit: unit, UnitCommands: unitCmd, Markers: markers}
	if spec != "" {
		s, err := protocol.LoadSpec(spec)
		if err != nil {
			return opt, BadInput("--protocol-spec: %v", err)
		}
		opt.Spec = s
	} else if proto != "auto" && proto != "" {
		if _, err := protocol.BuiltinSpec(proto); err != nil {
			return opt, BadInput("--protocol: %v", err)
		}
	}
	return opt, nil
}

// analyzeSummary analyzes the traces of paths into a summary (with the two-host split when they
// are a client's and a server's) and repeats the damaged-trace warnings on stderr.
func analyzeSummary(env *Env, paths []string, opt analyzers.Options) (*analyzers.Summary, error) {
	conns := &connRecords{keep: len(paths) >= 2 && len(paths) <= maxHostTraces}
	merged := splitVisitor(opt)
	var also protocol.Visitor = merged
	if conns.keep { // else conns takes nothing: not called on every record and message
		also = protocol.Tee(conns, merged)
	}
	s, err := analyzers.AnalyzeVisit(traceInputs(paths), opt, also)
	if err != nil {
		return nil, analyzeError(err)
	}
	if s.TwoHosts, err = twoHosts(paths, opt, s, conns.files, merged); err != nil {
		return nil, analyzeError(err)
	}
	if h := s.TwoHosts; h != nil && s.Evidence != nil && h.RoundTrips > 0 {
		s.Evidence.SplitWaiting(h.Mean.NetOut+h.Mean.NetBack, h.Mean.Queue+h.Mean.Service)
	}
	for _, w := range s.Warnings {
		if s.Recovery != nil && strings.Contains(w, "damaged or cut") {
			fmt.Fprintf(env.Stderr, "perflab analyze: warning: %s\n", w)
		}
	}
	return s, nil
}

// writeAnalyzeReport writes the report in format f (from s, or from the traces of paths for the
// trace formats) to the file out, or to stdout when out is empty; a half-written file is removed.
func writeAnalyzeReport(env *Env, f analyzeFormat, out, format string, s *analyzers.Summary, paths []string, opt analyzers.Options) error {
	var w io.Writer = env.Stdout
	var file *os.File
	var err error
	if out != "" {
		file, err = os.Create(out)
		if err != nil {
			return BadInput("create %s: %v", out, errors.Unwrap(err))
		}
		w = file
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	if f.summary != nil {
		err = f.summary(bw, s)
	} else {
		err = f.traces(bw, traceInputs(paths), opt)
	}
	if err == nil {
		err = bw.Flush()
	}
	if file != nil {
		if cerr := file.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			os.Remove(out) // no half-written report
		}
	}
	if err != nil {
		var re *protocol.ReadError
		if errors.As(err, &re) {
			return analyzeError(err)
		}
		return BadInput("write %s report: %v", format, err)
	}
	return nil
}

func analyzeError(err error) error {
	var re *protocol.ReadError
	if errors.As(err, &re) {
		return BadInput("%v", re)
	}
	return BadInput("%v", err)
}
