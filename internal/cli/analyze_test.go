package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/fixtures"
	"github.com/perflab/perflab/internal/testutil"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
	"github.com/perflab/perflab/venusd"
)

func runAnalyzeIn(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb}, append([]string{"analyze"}, args...))
	return code, out.String(), errb.String()
}

func analyzePingpong(t *testing.T) string {
	t.Helper()
	b, err := fixtures.FS.ReadFile("traces/pingpong.plt")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "pingpong.plt")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// RELIABILITY A9: bad input exits 2 with one line naming the file (and the offset); a damaged
// but readable trace exits 0 with a warning and a recovery block.
func TestAnalyzeBadInput(t *testing.T) {
	dir := t.TempDir()
	good := analyzePingpong(t)
	b, _ := os.ReadFile(good)
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	magic := write("magic.plt", append([]byte("NOTATRACE"), b[9:]...))
	empty := write("empty.plt", nil)
	hostile := write("hostile.plt", append(append([]byte{}, b[:64]...), bytes.Repeat([]byte{0xff}, 64)...))
	spec := write("spec.json", []byte(`{"name":"x","request":{"bytes":4,"size":{"offset":2,"size":8}}}`))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing file", []string{filepath.Join(dir, "nope.plt")}, "read " + filepath.Join(dir, "nope.plt") + ": no such file"},
		{"directory", []string{dir}, "read " + dir + ": is a directory"},
		{"wrong magic", []string{magic}, "read " + magic + ": offset 0:"},
		{"empty file", []string{empty}, "read " + empty + ":"},
		{"no trace", nil, "no trace given"},
		{"bad format", []string{"--format", "svg", good}, "--format \"svg\" unknown"},
		{"bad protocol", []string{"--protocol", "gopher", good}, "--protocol gopher: want one of auto, venus"},
		{"bad spec", []string{"--protocol-spec", spec, good}, "--protocol-spec"},
		{"missing spec", []string{"--protocol-spec", filepath.Join(dir, "none.json"), good}, "--protocol-spec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runAnalyzeIn(t, tc.args...)
			if code != ExitBadInput {
				t.Errorf("exit %d, want 2; stdout %q", code, out)
			}
			if strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "perflab analyze: ") || !strings.Contains(errs, tc.want) || strings.Contains(errs, "panic") {
				t.Errorf("stderr %q, want one line with %q", errs, tc.want)
			}
		})
	}
	// hostile lengths after a good header: either bad input (one line) or a recovered trace
	code, _, errs := runAnalyzeIn(t, "--format", "json", hostile)
	if (code != 0 && code != ExitBadInput) || strings.Contains(errs, "panic") {
		t.Errorf("hostile trace: exit %d, stderr %q", code, errs)
	}
}

func TestAnalyzeDamagedTrace(t *testing.T) {
	good := analyzePingpong(t)
	b, _ := os.ReadFile(good)
	cut := filepath.Join(t.TempDir(), "cut.plt")
	if err := os.WriteFile(cut, b[:len(b)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runAnalyzeIn(t, "--format", "json", cut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(errs, "warning") || !strings.Contains(errs, "damaged") {
		t.Errorf("no warning on stderr: %q", errs)
	}
	var s map[string]any
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	if _, ok := s["recovery"]; !ok {
		t.Errorf("json has no recovery block")
	}
}

// Every format renders the fixture; table, markdown and json against golden files.
func TestAnalyzeFormats(t *testing.T) {
	path := analyzePingpong(t)
	for _, f := range []string{"table", "markdown", "json", "html", "pprof", "perfetto"} {
		t.Run(f, func(t *testing.T) {
			code, out, errs := runAnalyzeIn(t, "--format", f, path)
			if code != 0 || errs != "" {
				t.Fatalf("exit %d, stderr %q", code, errs)
			}
			if len(out) == 0 {
				t.Fatal("no output")
			}
			switch f {
			case "table", "markdown", "json":
				testutil.Golden(t, "analyze/pingpong."+f, []byte(out))
			}
		})
	}
	// -o writes the file, stdout stays empty
	o := filepath.Join(t.TempDir(), "r.json")
	code, out, errs := runAnalyzeIn(t, path, "--format", "json", "-o", o)
	if code != 0 || out != "" || errs != "" {
		t.Fatalf("-o: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if b, err := os.ReadFile(o); err != nil || !bytes.Contains(b, []byte(`"schema": "perflab.analyze/v1"`)) {
		t.Errorf("-o file: %v %.80q", err, b)
	}
}

// Recorded venusd traces (committed: perflab venus run --tokens 4 --trace, baseline and
// coalesce+pipeline) give the same reports in every format.
func TestAnalyzeVenusdGolden(t *testing.T) {
	for _, name := range []string{"venusd-baseline", "venusd-coalesce-pipeline"} {
		for _, f := range []string{"table", "markdown", "json"} {
			t.Run(name+"."+f, func(t *testing.T) {
				code, out, errs := runAnalyzeIn(t, "--format", f, filepath.Join("testdata", "analyze", name+".plt"))
				if code != 0 || errs != "" {
					t.Fatalf("exit %d, stderr %q", code, errs)
				}
				testutil.Golden(t, "analyze/"+name+"."+f, []byte(out))
			})
		}
		// the client's own result of that run: per-token counters equal analyze's
		t.Run(name+".per_token", func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", "analyze", name+".run.json"))
			if err != nil {
				t.Fatal(err)
			}
			var res venusd.Result
			if err := json.Unmarshal(b, &res); err != nil {
				t.Fatal(err)
			}
			s, err := analyzers.Analyze(protocol.Files([]string{filepath.Join("testdata", "analyze", name+".plt")}, nil), analyzers.Options{})
			if err != nil {
				t.Fatal(err)
			}
			u := s.Units[0]
			if u.MessagesPerUnit != res.PerToken.Frames || u.RoundTripsPerUnit != res.PerToken.RoundTrips ||
				u.BytesSentPerUnit != res.PerToken.BytesSent || u.BytesRecvPerUnit != res.PerToken.BytesRecv {
				t.Errorf("analyze per token %+v; client %+v", u, res.PerToken)
			}
		})
	}
}

// serveVenusd starts a venusd server on a loopback port for the test and returns its address;
// the server stops, and an error of its Serve fails the test, when the test ends.
func serveVenusd(t *testing.T) string {
	t.Helper()
	srv, err := venusd.NewServer(venusd.ServerConfig{Listen: "tcp://127.0.0.1:0", Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return srv.Addr()
}

// On venusd's own traces, messages and round trips per token equal the client's counters, in
// every mode.
func TestAnalyzeVenusdPerToken(t *testing.T) {
	addr := serveVenusd(t)
	for _, mode := range venusd.Modes {
		t.Run(mode.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "venus.plt")
			w, err := trace.Create(path, venusd.TraceMeta([]string{"test"}, 64), nil)
			if err != nil {
				t.Fatal(err)
			}
			lc := venusd.DefaultLLMConfig()
			lc.Tokens, lc.LogitsBytes = 8, 16384
			rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer rcancel()
			res, err := venusd.RunWorkload(rctx, venusd.ClientConfig{Connect: addr, Workload: "llm", Mode: mode, LLM: lc,
				Trace: w, NoVerify: true, Getenv: func(string) string { return "" }})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			s, err := analyzers.Analyze(protocol.Files([]string{path}, nil), analyzers.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Units) != 1 || s.Units[0].Name != "token" || s.Units[0].Count != uint64(res.Tokens) {
				t.Fatalf("units %+v, client ran %d tokens", s.Units, res.Tokens)
			}
			u := s.Units[0]
			r3 := func(v float64) float64 { return math.Round(v*1e3) / 1e3 }
			if u.MessagesPerUnit != r3(res.PerToken.Frames) || u.RoundTripsPerUnit != r3(res.PerToken.RoundTrips) {
				t.Errorf("per token: analyze %v messages, %v round trips; client %v frames, %v round trips",
					u.MessagesPerUnit, u.RoundTripsPerUnit, res.PerToken.Frames, res.PerToken.RoundTrips)
			}
			if s.Totals.Send.Frames != uint64(res.Totals.FramesSent) || s.Totals.Recv.Frames != uint64(res.Totals.FramesRecv) {
				t.Errorf("frames: analyze %d/%d, client %d/%d", s.Totals.Send.Frames, s.Totals.Recv.Frames, res.Totals.FramesSent, res.Totals.FramesRecv)
			}
			if s.RoundTrips.Count != uint64(res.Totals.RoundTrips) {
				t.Errorf("round trips: analyze %d, client %d", s.RoundTrips.Count, res.Totals.RoundTrips)
			}
			if s.RoundTrips.Unanswered != 0 {
				t.Errorf("%d requests unanswered", s.RoundTrips.Unanswered)
			}
			for _, f := range []string{"table", "markdown", "json", "html"} {
				if code, _, errs := runAnalyzeIn(t, "--format", f, path); code != 0 {
					t.Errorf("format %s: exit %d: %s", f, code, errs)
				}
			}
		})
	}
}
