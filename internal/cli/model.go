package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/breakdown"
	"github.com/perflab/perflab/compare"
	"github.com/perflab/perflab/models"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/reports"
	"github.com/perflab/perflab/units"
)

func init() {
	Register(&Command{
		Name:    "model",
		Summary: "predict what coalescing, pipelining or another link would buy, from a baseline trace or a batch-model fit",
		Usage: "(--from TRACE | --fit T_FIXED,T_PER_REQ) [--mode baseline|coalesce|pipeline|coalesce+pipeline] [--coalesce K] [--pipeline D] " +
			"[--rtt D | --link NAME] [--bandwidth B] [--measured-rtt D] [--json]",
		Run: runModel,
	})
}

// maxModelK and maxModelD bound --coalesce and --pipeline: no token loop makes 65536 calls
// between two sync points, nor keeps that many frames in flight.
const (
	maxModelK = 1 << 16
	maxModelD = 1 << 16
)

// maxModelRTT bounds --rtt and --measured-rtt: a round trip of a minute is no link perflab
// models.
const maxModelRTT = time.Minute

func runModel(ctx context.Context, env *Env, args []string) error {
	c := commands["model"]
	fs := NewFlagSet(env, c)
	from := fs.String("from", "", "baseline `TRACE` of a token loop (every call one synchronous round trip)")
	fit := fs.String("fit", "", "batch model `T_FIXED,T_PER_REQ` (durations like 90us,10us, or µs) instead of a trace")
	mode := fs.String("mode", "", "venusd mode as a preset of K and D: baseline, coalesce, pipeline, coalesce+pipeline (default: all four)")
	coalesce := fs.Int("coalesce", -1, "K: most calls per frame (0: up to the sync point; 1: none)")
	pipeline := fs.Int("pipeline", -1, "D: most frames in flight (1: none)")
	rtt := fs.Duration("rtt", -1, "round-trip latency of the what-if link")
	link := fs.String("link", "", "what-if link preset: "+strings.Join(models.LinkNames(), ", "))
	bandwidth := fs.String("bandwidth", "", "bandwidth of the what-if link, bytes/s (15MB, 15MiB, 100Mbit, 2.5e6; 0 unlimited)")
	measured := fs.Duration("measured-rtt", -1, "link RTT during the baseline recording (default: 2 × venusd --delay from the trace's command line, else 0)")
	asJSON := fs.Bool("json", false, "print JSON (schema perflab.model/v1)")
	protocol := fs.String("protocol", "auto", "protocol decoder for the trace")
	IntRange(fs, "coalesce", 0, maxModelK)
	IntRange(fs, "pipeline", 1, maxModelD)
	DurationRange(fs, "rtt", 0, maxModelRTT)
	DurationRange(fs, "measured-rtt", 0, maxModelRTT)
	var modeNames []string
	for _, m := range models.Modes {
		modeNames = append(modeNames, m.Name)
	}
	Choice(fs, "mode", modeNames...)
	Choice(fs, "link", models.LinkNames()...)
	FlagCheck(fs, "bandwidth", func(s string) error { _, err := modelBandwidth(s); return err })
	FlagCheck(fs, "fit", func(s string) error { _, err := modelFit(s); return err })
	Choice(fs, "protocol", protocolNames...)
	pos, err := ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return BadInput("unexpected argument %q (give the trace with --from)", pos[0])
	}
	if (*from == "") == (*fit == "") {
		return BadInput("give exactly one of --from TRACE and --fit T_FIXED,T_PER_REQ")
	}
	wl, err := whatIfLink(*link, *rtt, *bandwidth)
	if err != nil {
		return err
	}
	scenarios, err := modelScenarios(*mode, *coalesce, *pipeline)
	if err != nil {
		return err
	}
	var rep *compare.ModelReport
	if *fit != "" {
		b, err := modelFit(*fit)
		if err != nil {
			return BadInput("-fit: %v", err)
		}
		rep = compare.PredictBatchWhatIf(b, scenarios, *coalesce, wl)
	} else if rep, err = modelFromTrace(*from, *protocol, *measured, scenarios, wl); err != nil {
		return err
	}
	format := "table"
	if *asJSON {
		format = "json"
	}
	return writeOutput(env, "", func(w writer) error { return reports.Model(w, rep, format) })
}

// whatIfLink returns the what-if link of the --link preset, with --rtt (when not negative) and
// --bandwidth overriding its parts, or nil when none of them is given.
func whatIfLink(link string, rtt time.Duration, bandwidth string) (*models.Link, error) {
	var wl *models.Link
	if link != "" {
		l, err := models.LookupLink(link)
		if err != nil {
			return nil, BadInput("-link: %v", err)
		}
		wl = &l
	}
	if rtt >= 0 {
		if wl == nil {
			wl = &models.Link{Name: "what-if"}
		}
		wl.RTTUS = float64(rtt) / 1e3
	}
	if bandwidth != "" {
		bw, err := modelBandwidth(bandwidth)
		if err != nil {
			return nil, BadInput("-bandwidth: %v", err)
		}
		if wl == nil {
			wl = &models.Link{Name: "what-if", RTTUS: -1}
		}
		wl.BandwidthBps = bw
	}
	return wl, nil
}

// modelFromTrace fits the token loop of the trace from (decoded with proto) and predicts
// scenarios on the what-if link wl, in one pass over the trace (which also splits a merged
// trace's round trips); measured is the link RTT during the recording, negative when not given.
func modelFromTrace(from, proto string, measured time.Duration, scenarios []compare.Scenario, wl *models.Link) (*compare.ModelReport, error) {
	m := -1.0
	if measured >= 0 {
		m = float64(measured) / 1e3
	}
	opt := analyzers.Options{Protocol: proto}
	lv, merged := compare.NewLoopVisitor(from, opt), splitVisitor(opt)
	if err := analyzers.Visit(traceInputs([]string{from}), opt, protocol.Tee(lv, merged)); err != nil {
		return nil, BadInput("%v", err)
	}
	split := splitReport(merged, opt)
	if split != nil && m < 0 && split.RoundTrips > 0 {
		m = split.NetRTT.P50 // the link as measured at both hosts: only this part changes
	}
	lf, err := lv.Fit(m, 0)
	if err != nil {
		return nil, BadInput("%v", err)
	}
	if split != nil && measured < 0 && split.RoundTrips > 0 {
		lf.Notes = append([]string{networkNote(split)}, lf.Notes...)
	}
	return compare.PredictLoopOn(from, lf, scenarios, wl), nil
}

// networkNote says what the model took from a merged trace's split.
func networkNote(r *breakdown.Report) string {
	return fmt.Sprintf("link: measured at both hosts (merged trace): network out + back per round trip median %.1f µs [p10 %.1f, p90 %.1f], %.0f%% of the mean round trip (the clock offset moves time between out and back, not their sum); a what-if link replaces this part only",
		r.NetRTT.P50, r.NetRTT.P10, r.NetRTT.P90, 100*r.NetworkShare())
}

// modelScenarios returns the what-ifs the flags ask for (compare.Scenarios), checking
// --pipeline here too: 0 is no pipeline depth.
func modelScenarios(mode string, k, d int) ([]compare.Scenario, error) {
	if d == 0 || d > maxModelD {
		return nil, FlagError("pipeline", d, "1 to %d", maxModelD)
	}
	sc, err := compare.Scenarios(mode, k, d)
	if err != nil {
		return nil, BadInput("-mode: %v", err)
	}
	return sc, nil
}

// modelFit reads "T_FIXED,T_PER_REQ": two durations, or two numbers in µs.
func modelFit(s string) (models.Batch, error) {
	a, b, ok := strings.Cut(s, ",")
	if !ok {
		return models.Batch{}, fmt.Errorf("want T_FIXED,T_PER_REQ: two durations like 90us,10us")
	}
	f, err1 := modelUS(a)
	p, err2 := modelUS(b)
	if err1 != nil || err2 != nil || f < 0 || p < 0 || (f == 0 && p == 0) {
		return models.Batch{}, fmt.Errorf("want two non-negative durations (90us,10us) or µs, not both 0")
	}
	return models.Batch{TFixedUS: f, TPerReqUS: p}, nil
}

func modelUS(s string) (float64, error) {
	s = strings.TrimSpace(s)
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		return v, nil
	}
	d, err := time.ParseDuration(strings.ReplaceAll(s, "µs", "us"))
	if err != nil {
		return 0, err
	}
	return float64(d) / 1e3, nil
}

// modelBandwidth reads --bandwidth (units.ParseRate: "15MB/s", "15M", "100Mbit", "2.5e6") in
// bytes per second, from 0 (unlimited) to 1e15.
func modelBandwidth(s string) (float64, error) {
	v, err := units.ParseRate(s)
	if err != nil || v > 1e15 {
		return 0, fmt.Errorf("want bytes per second from 0 to 1e15, like 15MB/s, 15MiB/s or 100Mbit")
	}
	return v, nil
}
