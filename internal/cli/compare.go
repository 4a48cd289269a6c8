package cli

import (
	"context"
	"strings"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/compare"
	"github.com/perflab/perflab/reports"
)

func init() {
	Register(&Command{
		Name:    "compare",
		Summary: "compare two runs: every headline metric before and after, with a p-value, a 95% CI and a verdict",
		Usage:   "[--format table|markdown|json|html] [-o FILE] [--alpha A] [--protocol P] BEFORE AFTER  (each a trace, an analyze json or a venus run json; a comma-separated list for several runs)",
		Run:     runCompare,
	})
}

func runCompare(ctx context.Context, env *Env, args []string) error {
	c := commands["compare"]
	fs := NewFlagSet(env, c)
	format := fs.String("format", "table", "output `format`: "+strings.Join(reports.CompareFormats, ", "))
	out := fs.String("o", "", "write the report to `FILE` instead of stdout")
	alpha := fs.Float64("alpha", compare.DefaultAlpha, "significance level of the verdicts")
	protocol := fs.String("protocol", "auto", "protocol decoder for traces: auto, venus, ggml-rpc, resp, raw")
	FloatRange(fs, "alpha", 0, 1, true)
	Choice(fs, "format", reports.CompareFormats...)
	Choice(fs, "protocol", protocolNames...)
	pos, err := ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return BadInput("want BEFORE and AFTER, got %d arguments", len(pos))
	}
	if !(*alpha > 0 && *alpha < 1) {
		return BadInput("-alpha must be in (0, 1), got %g", *alpha)
	}
	if !validFormat(*format, reports.CompareFormats) {
		return BadInput("-format must be one of %s, got %q", strings.Join(reports.CompareFormats, ", "), *format)
	}
	opt := analyzers.Options{Protocol: *protocol}
	before, _, err := loadSide(pos[0], opt)
	if err != nil {
		return err
	}
	after, _, err := loadSide(pos[1], opt)
	if err != nil {
		return err
	}
	cmp := compare.Compare(before, after, *alpha)
	return writeOutput(env, *out, func(w writer) error { return reports.Compare(w, cmp, *format) })
}

func validFormat(f string, list []string) bool {
	for _, x := range list {
		if x == f {
			return true
		}
	}
	return false
}

// loadSide reads the runs of a comma-separated list of files.
func loadSide(list string, opt analyzers.Options) ([]compare.Run, bool, error) {
	var runs []compare.Run
	relative := false
	for _, p := range strings.Split(list, ",") {
		if p == "" {
			continue
		}
		r, rel, err := compare.LoadRuns(traceInput(p), opt)
		if err != nil {
			return nil, false, BadInput("%v", err)
		}
		runs = append(runs, r...)
		relative = relative || rel
	}
	if len(runs) == 0 {
		return nil, false, BadInput("no input files in %q", list)
	}
	return runs, relative, nil
}
