//go:build linux

package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/internal/ggmlpeer"
	"github.com/perflab/perflab/internal/testutil"
	"github.com/perflab/perflab/probes"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/venusd"
)

// The test binary doubles as perflab (analyzeMainEnv) and as a ggml-rpc client and server that
// talk over loopback TCP (ggmlPeerEnv = the number of tokens), so recording them needs no
// separate build.
const (
	analyzeMainEnv = "PERFLAB_CLI_ANALYZE_MAIN"
	ggmlPeerEnv    = "PERFLAB_CLI_GGML_PEER"
)

func init() {
	if os.Getenv(analyzeMainEnv) == "1" {
		os.Exit(Main(context.Background(), &Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}, os.Args[1:]))
	}
	if n := os.Getenv(ggmlPeerEnv); n != "" {
		tokens, _ := strconv.Atoi(n)
		if err := ggmlSession(tokens); err != nil {
			fmt.Fprintln(os.Stderr, "ggml peer:", err)
			os.Exit(3)
		}
		os.Exit(0)
	}
}

// ggmlSession runs a ggml-rpc server and a client session against it over loopback TCP.
func ggmlSession(tokens int) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &ggmlpeer.Server{Version: ggmlpeer.Version{Major: 5}}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return err
	}
	cl, err := ggmlpeer.Dial(c)
	if err == nil {
		err = cl.Workload(tokens)
	}
	c.Close()
	ln.Close()
	if serr := <-done; err == nil {
		err = serr
	}
	return err
}

func requireEBPF(t *testing.T) {
	t.Helper()
	perr := probes.CheckPrivileges()
	reason := ""
	if perr != nil {
		reason = perr.Error()
	}
	testutil.RequireBPF(t, perr == nil, reason)
}

// A venusd client recorded by perflab record with eBPF: frames and round trips rebuilt from the
// system calls equal the client's own counters, in every mode (coalesced frames included).
func TestAnalyzeRecordedVenusd(t *testing.T) {
	requireEBPF(t)
	addr := serveVenusd(t)
	for _, mode := range venusd.Modes {
		t.Run(mode.String(), func(t *testing.T) {
			// The per-token figures must match exactly. A recording whose token boundaries a
			// preempted thread blurred gets one more try; totals are exact on every try.
			for try := 1; ; try++ {
				msg := recordVenusdPerToken(t, addr, mode)
				if msg == "" {
					return
				}
				if try == 2 {
					t.Fatal(msg)
				}
				t.Logf("try %d: %s; recording again", try, msg)
			}
		})
	}
}

// recordVenusdPerToken records one venusd run in mode with eBPF, checks its totals against the
// client's counters, and returns what differs in the per-token figures ("" when they match).
func recordVenusdPerToken(t *testing.T, addr string, mode venusd.Mode) string {
	dir := t.TempDir()
	out, marks := filepath.Join(dir, "venus.plt"), filepath.Join(dir, "tracer.plt")
	rctx, rcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer rcancel()
	cmd := exec.CommandContext(rctx, os.Args[0], "record", "-o", out, "--payload-bytes", "256", "--",
		os.Args[0], "venus", "run", "--connect", addr, "--tokens", "6", "--logits-bytes", "16384",
		"--mode", mode.String(), "--no-verify", "--json", "--trace", marks)
	cmd.Env = append(os.Environ(), analyzeMainEnv+"=1")
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("record: %v\n%s", err, b)
	}
	stdout := string(b)
	i := strings.Index(stdout, `"schema": "perflab.venus.run/v1"`)
	if i < 0 {
		t.Fatalf("no venus run json in %q", stdout)
	}
	var res venusd.Result
	if err := json.NewDecoder(strings.NewReader(stdout[strings.LastIndex(stdout[:i], "{"):])).Decode(&res); err != nil {
		t.Fatal(err)
	}
	s, err := analyzers.Analyze(protocol.Files([]string{out}, nil), analyzers.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Totals.Send.Frames != uint64(res.Totals.FramesSent) || s.Totals.Recv.Frames != uint64(res.Totals.FramesRecv) ||
		s.RoundTrips.Count != uint64(res.Totals.RoundTrips) {
		t.Errorf("analyze: frames %d/%d, round trips %d; client: frames %d/%d, round trips %d",
			s.Totals.Send.Frames, s.Totals.Recv.Frames, s.RoundTrips.Count, res.Totals.FramesSent, res.Totals.FramesRecv, res.Totals.RoundTrips)
	}
	if s.Totals.Send.Calls != uint64(res.Totals.SendCalls) || s.Totals.Recv.Calls != uint64(res.Totals.RecvCalls) {
		t.Errorf("calls: analyze %d/%d, client %d/%d", s.Totals.Send.Calls, s.Totals.Recv.Calls, res.Totals.SendCalls, res.Totals.RecvCalls)
	}
	for _, w := range s.Warnings {
		t.Logf("warning: %s", w)
	}
	// With the tracer's token markers (its clock is calibrated against CLOCK_MONOTONIC,
	// the probes' clock), per-token figures from the system calls alone.
	m, err := analyzers.Analyze(protocol.Files([]string{out}, nil), analyzers.Options{Markers: marks})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Units) != 1 || m.Units[0].Count != uint64(res.Tokens) {
		t.Fatalf("units %+v", m.Units)
	}
	u := m.Units[0]
	if u.MessagesPerUnit != res.PerToken.Frames || u.RoundTripsPerUnit != res.PerToken.RoundTrips {
		return fmt.Sprintf("per token: analyze %v messages, %v round trips; client %v frames, %v round trips",
			u.MessagesPerUnit, u.RoundTripsPerUnit, res.PerToken.Frames, res.PerToken.RoundTrips)
	}
	return ""
}

// TestAnalyzeRecordedVenusdRTT records venusd runs with eBPF at record's default payload head
// (64 bytes) and, in the same run, with venusd's own tracer, whose round trips pair each reply
// with its request by id inside the client: the round-trip times analyze finds in the system
// calls agree with the tracer's (median within a factor of 1.5, p99 within 3), in the modes
// whose replies come coalesced or pipelined, where a reply's id can lie past the head. (Before
// such a reply was paired with the oldest request still waiting, the coalesce mode's median came
// out fifteen times the tracer's, and the pipeline mode's p99 two hundred times.)
func TestAnalyzeRecordedVenusdRTT(t *testing.T) {
	requireEBPF(t)
	addr := serveVenusd(t)
	for _, mode := range []string{"coalesce", "pipeline", "coalesce+pipeline"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			out, tr := filepath.Join(dir, "ebpf.plt"), filepath.Join(dir, "tracer.plt")
			rctx, rcancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer rcancel()
			cmd := exec.CommandContext(rctx, os.Args[0], "record", "-o", out, "--",
				os.Args[0], "venus", "run", "--connect", addr, "--tokens", "60", "--mode", mode,
				"--no-verify", "--json", "--trace", tr)
			cmd.Env = append(os.Environ(), analyzeMainEnv+"=1")
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("record: %v\n%s", err, b)
			}
			rtt := func(path string) analyzers.Latency {
				s, err := analyzers.Analyze(protocol.Files([]string{path}, nil), analyzers.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if s.RoundTrips.Count < 100 {
					t.Fatalf("%s: %d round trips", filepath.Base(path), s.RoundTrips.Count)
				}
				for _, w := range s.Warnings {
					t.Logf("%s: warning: %s", filepath.Base(path), w)
				}
				return s.RoundTrips.RTTUS
			}
			got, want := rtt(out), rtt(tr)
			t.Logf("RTT µs: eBPF p50 %.1f p99 %.1f; tracer p50 %.1f p99 %.1f", got.P50, got.P99, want.P50, want.P99)
			if r := got.P50 / want.P50; r < 1/1.5 || r > 1.5 {
				t.Errorf("median RTT %.1f µs from the system calls, %.1f µs by the tracer: %.2f times", got.P50, want.P50, r)
			}
			if r := got.P99 / want.P99; r < 1.0/3 || r > 3 {
				t.Errorf("p99 RTT %.1f µs from the system calls, %.1f µs by the tracer: %.2f times", got.P99, want.P99, r)
			}
		})
	}
}

// An unmodified ggml-rpc client and server, recorded by perflab record with eBPF, decode: every
// command named, replies paired, one round trip per decode step.
func TestAnalyzeRecordedGGMLRPC(t *testing.T) {
	requireEBPF(t)
	const tokens = 30
	out := filepath.Join(t.TempDir(), "ggml.plt")
	cmd := exec.Command(os.Args[0], "record", "-o", out, "--payload-bytes", "64", "--",
		"env", ggmlPeerEnv+"="+strconv.Itoa(tokens), analyzeMainEnv+"=0", os.Args[0])
	cmd.Env = append(os.Environ(), analyzeMainEnv+"=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("record: %v\n%s", err, b)
	}
	names := map[string]bool{}
	err := analyzers.Messages(protocol.Files([]string{out}, nil), analyzers.Options{}, func(m *protocol.Message) error {
		if m.Protocol == "ggml-rpc" && !m.IsReply {
			names[m.Name] = true
		}
		return nil
	})

	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"HELLO", "ALLOC_BUFFER", "SET_TENSOR", "GET_TENSOR", "GRAPH_COMPUTE", "GRAPH_RECOMPUTE",
		"MEMSET_TENSOR", "FREE_BUFFER", "DEVICE_COUNT", "COPY_TENSOR", "SET_TENSOR_HASH"} {
		if !names[n] {
			t.Errorf("%s not decoded (decoded: %v)", n, names)
		}
	}
	s, err := analyzers.Analyze(protocol.Files([]string{out}, nil), analyzers.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// the first step (GRAPH_COMPUTE, a new graph) is a shape apart; the steady state is the rest
	if len(s.Units) != 1 || s.Units[0].Count != tokens-1 || s.Units[0].Shape != "steady" || s.Units[0].RoundTripsPerUnit != 1 ||
		s.Units[0].MessagesPerUnit != 4 || s.Units[0].RequestsPerUnit != 3 {
		t.Errorf("units %+v, want %d steady tokens of 3 requests, 4 messages and 1 round trip", s.Units, tokens-1)
	}
	if s.RoundTrips.Unanswered != 0 || s.RoundTrips.ServiceUS == nil {
		t.Errorf("round trips %+v", s.RoundTrips)
	}
	for _, w := range s.Warnings {
		t.Logf("warning: %s", w)
	}
}
