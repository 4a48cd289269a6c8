package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/testutil"
)

// gateCLI runs perflab in-process and returns its exit code, stdout and stderr.
func gateCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}, args)
	if strings.Contains(errb.String(), "internal error") || strings.Contains(errb.String(), "panic") {
		t.Fatalf("perflab %v panicked: %s", args, errb.String())
	}
	return code, out.String(), errb.String()
}

func TestGateCLI(t *testing.T) {
	td := "testdata/gate/"
	tests := []struct {
		name   string
		args   []string
		code   int
		golden string // stdout golden, when set
		stderr string // substring of stderr
	}{
		{"pass", []string{"gate", "--baseline", td + "base.jsonl", td + "same.jsonl"}, 0, "gate/pass.txt", ""},
		{"regression", []string{"gate", "--baseline", td + "base.jsonl", td + "slow.jsonl"}, 1, "gate/regression.txt", "REGRESSION"},
		{"markdown", []string{"gate", "--format", "markdown", "--baseline", td + "base.jsonl", td + "slow.jsonl"}, 1, "gate/regression.md", ""},
		{"json", []string{"gate", "--format", "json", "--config", td + "gate.conf", "--baseline", td + "base.jsonl", td + "slow.jsonl"}, 1, "gate/regression.json", ""},
		{"n=5 inconclusive passes loudly", []string{"gate", "--baseline", td + "base.jsonl", td + "five.jsonl"}, 0, "gate/inconclusive.txt", "WARNING: INCONCLUSIVE"},
		{"n=5 inconclusive can fail", []string{"gate", "--on-inconclusive", "fail", "--baseline", td + "base.jsonl", td + "five.jsonl"}, 1, "", "INCONCLUSIVE"},
		{"lost events", []string{"gate", "--baseline", td + "base.jsonl", td + "lost.jsonl"}, 2, "", "lost.jsonl#3: trace lost 12 events"},
		{"bad config", []string{"gate", "--config", td + "bad.conf", "--baseline", td + "base.jsonl", td + "same.jsonl"}, 2, "", "bad.conf:1: direction must be lower, higher or zero"},
		{"missing baseline flag", []string{"gate", td + "same.jsonl"}, 2, "", "--baseline is required"},
		{"unreadable current", []string{"gate", "--baseline", td + "base.jsonl", td + "nope.jsonl"}, 2, "", "nope.jsonl"},
		{"not a run", []string{"gate", "--baseline", td + "base.jsonl", td + "gate.conf"}, 2, "", "gate.conf"},
		{"runs below 6", []string{"gate", "--runs", "5", "--baseline", td + "base.jsonl", td + "same.jsonl"}, 2, "", "--runs 5: want 6 to 10000"},
		{"relative baseline without references", []string{"gate", "--baseline", td + "base.jsonl", "--relative-to", td + "base.jsonl", td + "same.jsonl"}, 2, "", "absolute runs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := gateCLI(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr: %s", code, tc.code, errs)
			}
			if tc.stderr != "" && !strings.Contains(errs, tc.stderr) {
				t.Errorf("stderr %q lacks %q", errs, tc.stderr)
			}
			if tc.golden != "" {
				testutil.Golden(t, tc.golden, []byte(out))
			}
			if code == 2 && strings.Count(strings.TrimSpace(errs), "\n") != 0 {
				t.Errorf("bad input must be one line, got %q", errs)
			}
			// E7: the same inputs give the same output.
			code2, out2, _ := gateCLI(t, tc.args...)
			if code2 != code || out2 != out {
				t.Error("a second run gave a different result")
			}
		})
	}
}

func TestGateUpdateAndRelative(t *testing.T) {
	td := "testdata/gate/"
	dir := t.TempDir()
	base := filepath.Join(dir, "baseline.json")
	// A ratio baseline: the "after" runs relative to reference runs measured alongside.
	code, _, errs := gateCLI(t, "gate", "--update", "--baseline", base, "--relative-to", td+"base.jsonl", td+"same.jsonl")
	if code != 0 || !strings.Contains(errs, "wrote") {
		t.Fatalf("--update: exit %d, %s", code, errs)
	}
	data, err := os.ReadFile(base)
	if err != nil || !strings.Contains(string(data), `"relative": true`) {
		t.Fatalf("baseline: %v %s", err, data)
	}
	junit := filepath.Join(dir, "gate.xml")
	code, out, errs := gateCLI(t, "gate", "--baseline", base, "--junit", junit, "--relative-to", td+"same.jsonl", td+"base.jsonl")
	if code != 0 || !strings.Contains(out, "ratios to reference runs") {
		t.Errorf("relative gate: exit %d\n%s\n%s", code, out, errs)
	}
	if x, err := os.ReadFile(junit); err != nil || !strings.Contains(string(x), `<testsuite name="perflab gate"`) {
		t.Errorf("junit: %v %s", err, x)
	}
	code, _, errs = gateCLI(t, "gate", "--baseline", base, td+"same.jsonl")
	if code != 2 || !strings.Contains(errs, "--relative-to") {
		t.Errorf("ratio baseline without references: exit %d %s", code, errs)
	}
}

func TestCompareCLI(t *testing.T) {
	td := "testdata/gate/"
	code, out, errs := gateCLI(t, "compare", td+"base.jsonl", td+"slow.jsonl")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	testutil.Golden(t, "gate/compare.txt", []byte(out))
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"compare", td + "base.jsonl"}, "want BEFORE and AFTER"},
		{[]string{"compare", "--format", "xml", td + "base.jsonl", td + "slow.jsonl"}, "--format xml: want one of"},
		{[]string{"compare", td + "base.jsonl", td + "missing.plt"}, "missing.plt"},
	} {
		code, _, errs := gateCLI(t, tc.args...)
		if code != 2 || !strings.Contains(errs, tc.msg) {
			t.Errorf("%v: exit %d %q, want 2 and %q", tc.args, code, errs, tc.msg)
		}
	}
}

func TestModelCLI(t *testing.T) {
	code, out, errs := gateCLI(t, "model", "--fit", "90us,10us", "--json")
	if code != 0 || !strings.Contains(out, `"schema": "perflab.model/v1"`) || !strings.Contains(out, `"predicted"`) {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"model"}, "exactly one of --from"},
		{[]string{"model", "--fit", "abc"}, "want T_FIXED,T_PER_REQ"},
		{[]string{"model", "--fit", "1,1", "--mode", "turbo"}, "--mode turbo: want one of"},
		{[]string{"model", "--fit", "1,1", "--link", "carrier-pigeon"}, "--link carrier-pigeon: want one of"},
		{[]string{"model", "--fit", "1,1", "--bandwidth", "fast"}, "want bytes per second"},
		{[]string{"model", "--from", "testdata/gate/base.jsonl"}, "base.jsonl"},
	} {
		code, _, errs := gateCLI(t, tc.args...)
		if code != 2 || !strings.Contains(errs, tc.msg) {
			t.Errorf("%v: exit %d %q, want 2 and %q", tc.args, code, errs, tc.msg)
		}
	}
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }

// TestModelAndCompareTraces runs model and compare on recorded venusd traces (4 tokens of the
// llm workload over a 1 ms link each way, baseline and coalesce): the outputs are golden, and
// the same trace always gives the same output.
func TestModelAndCompareTraces(t *testing.T) {
	base, co := "testdata/model/baseline-1ms.plt", "testdata/model/coalesce-1ms.plt"
	for _, tc := range []struct {
		golden string
		args   []string
	}{
		{"model/model.txt", []string{"model", "--from", base}},
		{"model/model.json", []string{"model", "--from", base, "--json"}},
		{"model/model-webrtc.txt", []string{"model", "--from", base, "--mode", "coalesce+pipeline", "--link", "webrtc-wifi"}},
		{"model/model-k4d2.txt", []string{"model", "--from", base, "--coalesce", "4", "--pipeline", "2", "--rtt", "10ms", "--bandwidth", "100MB/s"}},
		{"model/compare.txt", []string{"compare", base, co}},
		{"model/compare.md", []string{"compare", "--format", "markdown", base, co}},
	} {
		code, out, errs := gateCLI(t, tc.args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.args, code, errs)
		}
		testutil.Golden(t, tc.golden, []byte(out))
		if _, again, _ := gateCLI(t, tc.args...); again != out {
			t.Errorf("%v: a second run differs", tc.args)
		}
	}
	// A coalesced trace is no baseline: its async calls have no replies.
	code, _, errs := gateCLI(t, "model", "--from", co)
	if code != 2 || !strings.Contains(errs, "is it a baseline") {
		t.Errorf("model on a coalesced trace: exit %d %q", code, errs)
	}
	// E5: a cut trace is refused by the gate.
	data, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.plt")
	if err := os.WriteFile(cut, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs = gateCLI(t, "gate", "--baseline", base, cut)
	if code != 2 || !strings.Contains(errs, "cut.plt: damaged trace") {
		t.Errorf("gate on a cut trace: exit %d %q", code, errs)
	}
}
