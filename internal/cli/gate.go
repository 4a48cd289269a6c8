package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/compare"
	"github.com/perflab/perflab/reports"
)

func init() {
	Register(&Command{
		Name:    "gate",
		Summary: "gate CI on performance: compare current runs with a baseline; exit 0 pass, 1 regression, 2 bad input",
		Usage: "--baseline FILE [--config FILE] [--relative-to REF,...] [--runs N] [--format table|markdown|json] [-o FILE] " +
			"[--junit FILE] [--on-inconclusive pass|fail] [--update] CURRENT...  (traces, analyze json, venus run json or JSON lines of runs)",
		Run: runGate,
	})
}

// maxGateRuns bounds --runs: a gate needing more runs per side than anyone records could
// never reach a verdict, and would pass every time as inconclusive.
const maxGateRuns = 10000

// writer is where a report goes.
type writer = io.Writer

// writeOutput renders to the file path, or to stdout when path is "".
func writeOutput(env *Env, path string, render func(writer) error) error {
	if path == "" {
		if err := render(env.Stdout); err != nil {
			return BadInput("%v", err)
		}
		return nil
	}
	var buf bytes.Buffer
	if err := render(&buf); err != nil {
		return BadInput("%v", err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return BadInput("write %s: %v", path, err)
	}
	return nil
}

func runGate(ctx context.Context, env *Env, args []string) error {
	c := commands["gate"]
	fs := NewFlagSet(env, c)
	baseline := fs.String("baseline", "", "baseline `FILE`: a gate baseline (written by --update) or runs, comma-separated")
	config := fs.String("config", "", "rules `FILE` (default: p50 and p99 round trip, messages per token, tokens/s, no lost events)")
	relTo := fs.String("relative-to", "", "reference runs measured alongside CURRENT (comma-separated, paired in order): gate current/reference ratios")
	runs := fs.Int("runs", compare.DefaultMinSamples, "runs per side needed for a verdict (at least 6)")
	format := fs.String("format", "table", "output `format`: "+strings.Join(reports.GateFormats, ", "))
	out := fs.String("o", "", "write the report to `FILE` instead of stdout")
	junit := fs.String("junit", "", "also write a JUnit XML report to `FILE`")
	onInc := fs.String("on-inconclusive", "", "what an inconclusive gate does: pass (default, with a warning) or fail")
	update := fs.Bool("update", false, "write CURRENT (as ratios with --relative-to) to the --baseline file instead of gating")
	protocol := fs.String("protocol", "auto", "protocol decoder for traces: auto, venus, ggml-rpc, resp, raw")
	IntRange(fs, "runs", compare.DefaultMinSamples, maxGateRuns)
	Choice(fs, "format", reports.GateFormats...)
	Choice(fs, "on-inconclusive", "pass", "fail")
	Choice(fs, "protocol", protocolNames...)
	pos, err := ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if *baseline == "" {
		return BadInput("--baseline is required")
	}
	if len(pos) == 0 {
		return BadInput("want at least one CURRENT file")
	}
	if *runs < compare.DefaultMinSamples || *runs > maxGateRuns {
		// Below 6 runs per side no Mann-Whitney test can reach p < 0.0079.
		return FlagError("runs", *runs, "%d to %d", compare.DefaultMinSamples, maxGateRuns)
	}
	if !validFormat(*format, reports.GateFormats) {
		return BadInput("-format must be one of %s, got %q", strings.Join(reports.GateFormats, ", "), *format)
	}
	cfg, err := gateRules(*config, *runs, *onInc)
	if err != nil {
		return err
	}
	opt := analyzers.Options{Protocol: *protocol}
	cur, err := loadGateCurrent(pos, *relTo, opt, cfg)
	if err != nil {
		return err
	}
	if *update {
		return writeGateBaseline(env, *baseline, cur, *relTo != "")
	}
	relative := *relTo != ""
	base, err := loadGateBaseline(*baseline, relative, opt, cfg)
	if err != nil {
		return err
	}
	res := compare.Gate(base, cur, cfg)
	res.Relative = relative
	if err := writeOutput(env, *out, func(w writer) error { return reports.Gate(w, res, *format) }); err != nil {
		return err
	}
	if *junit != "" {
		if err := writeOutput(env, *junit, func(w writer) error { return reports.GateJUnit(w, res) }); err != nil {
			return err
		}
	}
	return gateVerdictExit(env, res, cfg)
}

// gateRules returns the gate's rules: those of the config file (the defaults when config is empty),
// needing at least runs runs per side, with onInc ("", pass or fail) overriding what an inconclusive
// gate does.
func gateRules(config string, runs int, onInc string) (*compare.GateConfig, error) {
	cfg := compare.DefaultGateConfig()
	if config != "" {
		f, err := os.Open(config)
		if err != nil {
			return nil, BadInput("open %s: %v", config, err)
		}
		cfg, err = compare.ParseGateConfig(f, config)
		f.Close()
		if err != nil {
			return nil, BadInput("%v", err)
		}
	}
	if runs > cfg.MinSamples {
		cfg.MinSamples = runs
	}
	switch onInc {
	case "":
	case "pass", "fail":
		cfg.OnInconclusive = onInc
	default:
		return nil, BadInput("-on-inconclusive must be pass or fail, got %q", onInc)
	}
	return cfg, nil
}

// loadGateCurrent loads the CURRENT runs of pos and, when relTo lists reference runs, turns them into
// current/reference ratios; both sides must satisfy cfg's input checks.
func loadGateCurrent(pos []string, relTo string, opt analyzers.Options, cfg *compare.GateConfig) ([]compare.Run, error) {
	cur, _, err := loadSide(strings.Join(pos, ","), opt)
	if err != nil {
		return nil, err
	}
	if relTo != "" {
		refs, _, err := loadSide(relTo, opt)
		if err != nil {
			return nil, err
		}
		if err := compare.CheckInputs(refs, cfg); err != nil {
			return nil, BadInput("%v", err)
		}
		if cur, err = compare.Ratios(cur, refs); err != nil {
			return nil, BadInput("--relative-to: %v", err)
		}
	}
	if err := compare.CheckInputs(cur, cfg); err != nil {
		return nil, BadInput("%v", err)
	}
	return cur, nil
}

// loadGateBaseline loads the baseline runs, which must be ratios exactly when relative is set and
// satisfy cfg's input checks.
func loadGateBaseline(baseline string, relative bool, opt analyzers.Options, cfg *compare.GateConfig) ([]compare.Run, error) {
	base, rel, err := loadSide(baseline, opt)
	if err != nil {
		return nil, err
	}
	if rel != relative {
		if rel {
			return nil, BadInput("%s holds ratios to reference runs: give the reference runs with --relative-to", baseline)
		}
		return nil, BadInput("--relative-to gives ratios but %s holds absolute runs", baseline)
	}
	if err := compare.CheckInputs(base, cfg); err != nil {
		return nil, BadInput("baseline: %v", err)
	}
	return base, nil
}

// writeGateBaseline writes cur (ratios when relative) to the baseline file instead of gating.
func writeGateBaseline(env *Env, baseline string, cur []compare.Run, relative bool) error {
	data, err := compare.MarshalBaseline(cur, relative)
	if err != nil {
		return BadInput("%v", err)
	}
	if err := os.WriteFile(baseline, data, 0o644); err != nil {
		return BadInput("write %s: %v", baseline, err)
	}
	fmt.Fprintf(env.Stderr, "perflab gate: wrote %s with %d runs\n", baseline, len(cur))
	return nil
}

// gateVerdictExit reports the verdict of res on stderr and returns the exit it calls for: failure on
// a regression, and on an inconclusive gate when cfg says so.
func gateVerdictExit(env *Env, res *compare.GateResult, cfg *compare.GateConfig) error {
	switch res.Verdict {
	case "regression":
		fmt.Fprintf(env.Stderr, "perflab gate: REGRESSION\n")
		return Exit(ExitFailed)
	case "inconclusive":
		fmt.Fprintf(env.Stderr, "perflab gate: WARNING: INCONCLUSIVE — %s\n", inconclusiveWhy(res))
		if cfg.OnInconclusive == "fail" {
			return Exit(ExitFailed)
		}
		fmt.Fprintf(env.Stderr, "perflab gate: WARNING: passing anyway (--on-inconclusive pass); this gate did not check those rules\n")
	}
	return nil
}

func inconclusiveWhy(r *compare.GateResult) string {
	var parts []string
	for _, rr := range r.Rules {
		if rr.Verdict == "inconclusive" {
			parts = append(parts, rr.Metric+": "+rr.Detail)
		}
	}
	return strings.Join(parts, "; ")
}
