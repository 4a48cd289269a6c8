package cli

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/compare"
	"github.com/perflab/perflab/models"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
	"github.com/perflab/perflab/venusd"
)

// modelVenusRun runs the llm workload; with tracePath set it records the client's trace there.
func modelVenusRun(t *testing.T, cfg venusd.ClientConfig, tracePath string) *venusd.Result {
	t.Helper()
	cfg.Getenv = func(string) string { return "" }
	cfg.NoVerify = true
	if tracePath != "" {
		w, err := trace.Create(tracePath, venusd.TraceMeta([]string{"perflab", "venus", "run", "--delay", cfg.Delay.String()}, 64), nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Trace = w
		defer func() {
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := venusd.RunWorkload(ctx, cfg)
	if err != nil {
		t.Fatalf("venus run %s: %v", cfg.Mode, err)
	}
	return res
}

// TestModelVenusValidation checks `perflab model` against venusd: from a traced baseline run,
// the predictions for coalesce, pipeline and both must be within ±20% of the measured tokens/s
// (medians over interleaved rounds: 7 at 0, 5 below a millisecond, where the pipelined modes
// vary most from round to round, 3 at 1 ms, 2 at 5 ms) and exact for messages per token, at link delays of 0,
// 100 µs, 500 µs, 1 ms and 5 ms each way. The ±20% is asserted with PERFLAB_PERF_ASSERT=1 (a timed assertion; the
// figures in docs/models.md come from such runs); otherwise the test asserts the exact counts
// and that every prediction over a delayed link beats the baseline.
func TestModelVenusValidation(t *testing.T) {
	if raceEnabled {
		t.Skip("race detector on: the venusd runs are timing measurements; run without -race")
	}
	if testing.Short() {
		t.Skip("short mode: venusd runs at up to 5 ms of link delay")
	}
	addr := gateVenusServer(t)
	dir := t.TempDir()
	llm := venusd.DefaultLLMConfig()
	llm.Tokens = 6
	modes := []venusd.Mode{venusd.ModeCoalesce, venusd.ModePipeline, venusd.ModeCoalescePipeline}
	var table []string
	for _, tc := range []struct {
		delay  time.Duration
		rounds int
	}{{0, 7}, {100 * time.Microsecond, 5}, {500 * time.Microsecond, 5}, {time.Millisecond, 3}, {5 * time.Millisecond, 2}} {
		pred := map[venusd.Mode][]float64{}
		meas := map[venusd.Mode][]float64{}
		predMsgs := map[venusd.Mode]float64{}
		measMsgs := map[venusd.Mode]float64{}
		var base []float64
		for r := 0; r < tc.rounds; r++ {
			cfg := venusd.ClientConfig{Connect: addr, Workload: "llm", LLM: llm, Delay: tc.delay}
			path := filepath.Join(dir, fmt.Sprintf("base-%v-%d.plt", tc.delay, r))
			res := modelVenusRun(t, cfg, path)
			base = append(base, res.TokensPerS)
			fit, err := compare.FitLoop(protocol.Files([]string{path}, nil)[0], analyzers.Options{}, 2*float64(tc.delay)/1e3, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := fit.Measured.MessagesPerToken; got != res.PerToken.Frames {
				t.Errorf("delay %v: baseline messages/token from the trace %g, venusd says %g", tc.delay, got, res.PerToken.Frames)
			}
			for _, m := range modes {
				preset, err := models.LookupMode(m.String())
				if err != nil {
					t.Fatal(err)
				}
				p := fit.Loop.Predict(preset.WhatIf())
				pred[m] = append(pred[m], p.TokensPerS)
				predMsgs[m] = p.MessagesPerToken
				cfg.Mode = m
				mr := modelVenusRun(t, cfg, "")
				meas[m] = append(meas[m], mr.TokensPerS)
				measMsgs[m] = mr.PerToken.Frames
			}
		}
		for _, m := range modes {
			p, q := gateMedian(pred[m]), gateMedian(meas[m])
			errp := p/q - 1
			table = append(table, fmt.Sprintf("| %v | %s | %.1f | %.1f | %.1f | %+.0f%% | %g | %g |",
				tc.delay, m, gateMedian(base), p, q, 100*errp, predMsgs[m], measMsgs[m]))
			// Timings are asserted only on request (PERFLAB_PERF_ASSERT=1, docs/models.md): the
			// machine is shared and noisy.
			if tc.delay > 0 && p <= gateMedian(base) {
				t.Errorf("delay %v, %s: predicted %.1f tokens/s, no faster than the baseline's %.1f", tc.delay, m, p, gateMedian(base))
			}
			if math.Abs(errp) > 0.20 && perfAssert() {
				t.Errorf("delay %v, %s: predicted %.1f tokens/s, measured %.1f (%+.0f%%), want within ±20%%", tc.delay, m, p, q, 100*errp)
			}
			if predMsgs[m] != measMsgs[m] {
				t.Errorf("delay %v, %s: predicted %g messages/token, measured %g", tc.delay, m, predMsgs[m], measMsgs[m])
			}
		}
	}
	t.Logf("\n| delay each way | mode | baseline tokens/s | predicted tokens/s | measured tokens/s | error | predicted msgs/token | measured msgs/token |\n|---|---|---|---|---|---|---|---|\n%s", strings.Join(table, "\n"))
}

// perfAssert reports whether timed assertions are wanted (PERFLAB_PERF_ASSERT=1): on a shared,
// noisy machine they belong to a deliberate validation run, not to every test run.
func perfAssert() bool { return os.Getenv("PERFLAB_PERF_ASSERT") == "1" }
