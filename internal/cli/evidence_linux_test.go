//go:build linux

package cli

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/internal/ggmlpeer"
)

// evidenceTargetEnv makes the test binary a small real program that shows one pattern the
// evidence findings name: "nagle", "churn", "poll", "eagain", "wakeup" or "tokens".
const evidenceTargetEnv = "PERFLAB_CLI_EVIDENCE_TARGET"

func init() {
	if mode := os.Getenv(evidenceTargetEnv); mode != "" {
		if err := evidenceTarget(mode); err != nil {
			fmt.Fprintln(os.Stderr, "evidence target:", err)
			os.Exit(3)
		}
		os.Exit(0)
	}
}

// evidenceTarget runs a ggml-rpc server (internal/ggmlpeer) on loopback TCP and a client that
// shows mode's pattern.
func evidenceTarget(mode string) error {
	switch mode {
	case "eagain":
		return eagainTarget()
	case "wakeup":
		return wakeupTarget()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	srv := &ggmlpeer.Server{Version: ggmlpeer.Version{Major: 3}}
	go srv.Serve(ln)
	dial := func(nodelay bool) (*ggmlpeer.Client, net.Conn, error) {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return nil, nil, err
		}
		conn.(*net.TCPConn).SetNoDelay(nodelay)
		c, err := ggmlpeer.Dial(conn)
		if err != nil {
			conn.Close()
			return nil, nil, err
		}
		return c, conn, nil
	}
	switch mode {
	case "nagle":
		// Nagle on: the size and the payload wait for the ACK of the command byte, which the
		// server delays (it is reading, not answering).
		c, conn, err := dial(false)
		if err != nil {
			return err
		}
		defer conn.Close()
		return c.Workload(12)
	case "tokens":
		c, conn, err := dial(true)
		if err != nil {
			return err
		}
		defer conn.Close()
		return c.Workload(300)
	case "churn":
		// A connection per request, as a client without a pool does.
		for i := 0; i < 30; i++ {
			c, conn, err := dial(true)
			if err != nil {
				return err
			}
			if _, err := c.Call(ggmlpeer.CmdDeviceCount, nil); err != nil {
				return err
			}
			conn.Close()
		}
		return nil
	case "poll":
		// A status command asked again and again until the answer changes (it never does).
		c, conn, err := dial(true)
		if err != nil {
			return err
		}
		defer conn.Close()
		for i := 0; i < 400; i++ {
			if _, err := c.Call(ggmlpeer.CmdGetDeviceMemory, []byte{0, 0, 0, 0}); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unknown mode %q", mode)
}

// eagainTarget: a client on a non-blocking socket retries its read until the reply, which
// the server sends after working 200 µs, is there.
func eagainTarget() error {
	sp, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	if err := syscall.SetNonblock(sp[0], true); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 64)
		for i := 0; i < 50; i++ {
			if _, err := syscall.Read(sp[1], buf); err != nil {
				done <- err
				return
			}
			for t0 := time.Now(); time.Since(t0) < 200*time.Microsecond; {
			}
			if _, err := syscall.Write(sp[1], []byte("reply")); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	buf := make([]byte, 64)
	for i := 0; i < 50; i++ {
		if _, err := syscall.Write(sp[0], []byte("request")); err != nil {
			return err
		}
		for {
			_, err := syscall.Read(sp[0], buf)
			if err == nil {
				break
			}
			if err != syscall.EAGAIN {
				return err
			}
		}
	}
	return <-done
}

// recordEvidence records mode's program with every evidence part and analyzes the trace.
func recordEvidence(t *testing.T, mode string) *analyzers.Summary {
	t.Helper()
	requireRecord(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "ev.plt")
	cmd := perflab(t, filepath.Join(dir, "counts"), "record", "-o", out, "--evidence", "all", "--",
		"env", evidenceTargetEnv+"="+mode, "PERFLAB_CLI_RECORD_MAIN=0", os.Args[0])
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("record: %v\n%s", err, b)
	}
	code, stdout, stderr := runIn(t, "analyze", "--format", "json", out)
	if code != 0 {
		t.Fatalf("analyze: exit %d: %s", code, stderr)
	}
	var s analyzers.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatal(err)
	}
	if s.Evidence == nil {
		t.Fatalf("no evidence in %s", stdout)
	}
	return &s
}

func finding(s *analyzers.Summary, kind string) (string, bool) {
	for _, f := range s.Evidence.Findings {
		if f.Kind == kind {
			return f.Title + ": " + f.Evidence + "; " + f.Cost, true
		}
	}
	return "", false
}

// TestEvidenceFindings records small real programs (a ggml-rpc client and server over loopback
// TCP, a non-blocking socket pair) that each show one pattern, and checks that analyze names it.
func TestEvidenceFindings(t *testing.T) {
	cases := []struct {
		mode  string
		kinds []string
		check func(t *testing.T, s *analyzers.Summary)
	}{
		// ggml-rpc's client writes command, size and payload with three calls.
		{"tokens", []string{"split_writes"}, func(t *testing.T, s *analyzers.Summary) {
			e := s.Evidence
			if a := e.Attribution; a == nil || !a.SchedKnown || a.RoundTrips < 300 {
				t.Fatalf("attribution %+v", a)
			}
			if e.Sched == nil || e.Sched.Stretches == 0 {
				t.Errorf("no runnable stretches: %+v", e.Sched)
			}
			var woke float64
			for _, c := range e.Attribution.Causes {
				if c.Cause == "wakeup" || c.Cause == "runqueue" {
					woke += c.TotalUS
				}
			}
			if woke <= 0 {
				t.Errorf("no wake-up or run-queue time in %+v", e.Attribution.Causes)
			}
			if len(e.TCP) < 2 || e.Setup == nil || e.Setup.Connects < 1 || e.Setup.Accepted < 1 {
				t.Errorf("tcp %+v, setup %+v", e.TCP, e.Setup)
			}
			for _, f := range e.Findings {
				if f.Kind == "split_writes" && (f.Unit != "token" || f.CallsPerUnit < 5.9 || f.CallsPerUnit > 6.1) {
					t.Errorf("split writes: %v calls per %s, want 6 per token (3 requests of 3 calls)", f.CallsPerUnit, f.Unit)
				}
			}
		}},
		{"nagle", []string{"nagle_delayed_ack"}, nil},
		{"churn", []string{"reconnection_churn"}, func(t *testing.T, s *analyzers.Summary) {
			if st := s.Evidence.Setup; st == nil || st.Connects < 30 {
				t.Errorf("setup %+v, want 30 connects", st)
			}
			if n := len(s.Evidence.Lifetimes); n < 30 {
				t.Errorf("%d lifetimes, want 30 or more", n)
			}
		}},
		{"poll", []string{"polling_storm"}, nil},
		{"eagain", []string{"eagain_storm"}, nil},
		// The client's thread shares its CPU with a real-time spinner: its wake-ups wait on the
		// run queue behind it (woken on a busy CPU), counted per round trip.
		{"wakeup", []string{"wakeup_delay"}, func(t *testing.T, s *analyzers.Summary) {
			e := s.Evidence
			if a := e.Attribution; a == nil || !a.SchedKnown || a.RoundTrips < wakeupCalls {
				t.Fatalf("attribution %+v, want %d round trips with scheduler evidence", a, wakeupCalls)
			}
			if e.Sched == nil || e.Sched.WokenBusy < wakeupCalls/10 {
				t.Errorf("sched %+v: want at least %d wake-ups onto a busy CPU", e.Sched, wakeupCalls/10)
			}
			var rq float64
			for _, c := range e.Attribution.Causes {
				if c.Cause == "runqueue" {
					rq = c.TotalUS
				}
			}
			if rq <= 0 {
				t.Errorf("no run-queue time in %+v", e.Attribution.Causes)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			if c.mode == "wakeup" && !wakeupCPUsAllowed() {
				t.Skip("the wake-up target needs CPUs 0 and 1 (one for the client and its spinner, one for the rest), and this process may not run on both")
			}
			s := recordEvidence(t, c.mode)
			for _, k := range c.kinds {
				if f, ok := finding(s, k); !ok {
					t.Errorf("no %s finding: %+v", k, s.Evidence.Findings)
				} else {
					t.Log(f)
				}
			}
			if c.check != nil {
				c.check(t, s)
			}
		})
	}
}

// TestEvidenceOffRecordsNone: --evidence none records messages only.
func TestEvidenceOffRecordsNone(t *testing.T) {
	requireRecord(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "ev.plt")
	cmd := perflab(t, filepath.Join(dir, "counts"), "record", "-o", out, "--evidence", "none", "--",
		"env", evidenceTargetEnv+"=churn", "PERFLAB_CLI_RECORD_MAIN=0", os.Args[0])
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("record: %v\n%s", err, b)
	}
	code, stdout, _ := runIn(t, "analyze", "--format", "json", out)
	var s analyzers.Summary
	if code != 0 || json.Unmarshal([]byte(stdout), &s) != nil {
		t.Fatalf("analyze: exit %d", code)
	}
	if s.Evidence != nil && len(s.Evidence.Parts) > 0 {
		t.Errorf("evidence parts %v recorded with --evidence none", s.Evidence.Parts)
	}
	code, _, stderr := runIn(t, "record", "--evidence", "sched,disk", "--", "true")
	if code != 2 {
		t.Errorf("--evidence sched,disk: exit %d, want 2 (%s)", code, stderr)
	}
}
