package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/testutil"
	"github.com/perflab/perflab/trace"
)

func runVenusIn(ctx context.Context, env map[string]string, args ...string) (int, string, string) {
	var out, errb testutil.SyncBuffer
	code := Main(ctx, &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb,
		Getenv: func(k string) string { return env[k] }}, append([]string{"venus"}, args...))
	return code, out.String(), errb.String()
}

func TestVenusBadUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "subcommand"},
		{[]string{"fly"}, "unknown subcommand"},
		{[]string{"run"}, "--connect"},
		{[]string{"run", "--connect", "udp://x:1"}, "unknown transport"},
		{[]string{"run", "--connect", "shm:///a/b"}, "shm name"},
		{[]string{"run", "--connect", "tcp://127.0.0.1:1", "--mode", "fast"}, "unknown mode"},
		{[]string{"run", "--connect", "tcp://127.0.0.1:1", "--workload", "chess"}, "--workload chess: want one of llm, ping"},
		{[]string{"run", "--connect", "tcp://127.0.0.1:1", "--waits", "3"}, "divisor"},
		{[]string{"run", "--connect", "tcp://127.0.0.1:1", "--tokens", "0"}, "--tokens"},
		{[]string{"run", "--connect", "tcp://127.0.0.1:1", "--bandwidth", "fast"}, "bandwidth"},
		{[]string{"run", "--connect", "tcp://127.0.0.1:1", "--delay", "-1ms"}, "--delay -1ms: want a duration from 0 to 10s"},
		{[]string{"run", "--connect", "tcp://127.0.0.1:1", "--delay", "2562047h"}, "--delay"},
		{[]string{"run", "--connect", "tcp://127.0.0.1:1", "--jitter", "11s"}, "--jitter"},
		{[]string{"run", "--connect", "tcp://127.0.0.1:1", "--bandwidth", "1bit"}, "--bandwidth"},
		{[]string{"run", "--connect", "tcp://127.0.0.1:1", "--bandwidth", "2Tbit"}, "--bandwidth"},
		{[]string{"run", "--connect", "tcp://127.0.0.1:1", "--bandwidth", "NaNGbit"}, "--bandwidth"},
		{[]string{"run", "--connect", "tcp://127.0.0.1:1", "--bandwidth", "-5Mbit"}, "--bandwidth"},
		{[]string{"serve", "--idle-timeout", "-1s"}, "--idle-timeout -1s: want a duration from 1ms to 24h"},
		{[]string{"serve", "--idle-timeout", "100000h"}, "--idle-timeout"},
		{[]string{"serve", "--frame-timeout", "-5ms"}, "--frame-timeout"},
		{[]string{"serve", "--listen", "tcp://0.0.0.0:0"}, "--allow-remote"},
		{[]string{"serve", "--listen", "carrier-pigeon"}, "address"},
		{[]string{"serve", "--max-frame", "1"}, "--max-frame"},
	} {
		code, _, stderr := runVenusIn(context.Background(), nil, tc.args...)
		if code != ExitBadInput || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "panic") {
			t.Errorf("venus %v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
		if n := strings.Count(strings.TrimSpace(stderr), "\n"); n > 0 && !strings.Contains(stderr, "usage") {
			t.Errorf("venus %v: %d lines of error, want one: %q", tc.args, n+1, stderr)
		}
	}
	// Nothing listens there: a run that cannot connect fails with exit 1.
	code, _, stderr := runVenusIn(context.Background(), nil, "run", "--connect", "unix:///nonexistent/venus.sock", "--tokens", "1")
	if code != ExitFailed || !strings.Contains(stderr, "connect") {
		t.Errorf("run against nothing: exit %d, %q", code, stderr)
	}
}

// serveInBackground runs `perflab venus serve` in-process until the test ends (the context
// stands in for SIGINT/SIGTERM, which main turns into a cancelled context).
func serveInBackground(t *testing.T, listen string, extra ...string) (stop func() (int, string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stderr testutil.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, &Env{Stdin: strings.NewReader(""), Stdout: &stderr, Stderr: &stderr, Getenv: func(string) string { return "" }},
			append([]string{"venus", "serve", "--listen", listen}, extra...))
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stderr.String(), "listening on") {
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start: %s", stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	var once sync.Once
	var code int
	stop = func() (int, string) {
		once.Do(func() {
			cancel()
			select {
			case code = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("serve did not stop after cancellation")
			}
		})
		return code, stderr.String()
	}
	t.Cleanup(func() { stop() })
	return stop
}

func TestVenusServeRunJSON(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "v.sock")
	stop := serveInBackground(t, "unix://"+sock)
	tracePath := filepath.Join(dir, "run.plt")
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	code, stdout, stderr := runVenusIn(ctx, nil, "run", "--connect", "unix://"+sock, "--tokens", "3", "--logits-bytes", "16384",
		"--mode", "coalesce+pipeline", "--json", "--trace", tracePath)
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("run --json: %v\n%s", err, stdout)
	}
	if got["schema"] != "perflab.venus.run/v1" || got["mode"] != "coalesce+pipeline" || got["transport"] != "unix" || got["tokens"] != 3.0 {
		t.Errorf("json head: %v", got)
	}
	for _, k := range []string{"tokens_per_s", "load_s", "checksum"} {
		if _, ok := got[k]; !ok {
			t.Errorf("json lacks %s", k)
		}
	}
	totals, _ := got["totals"].(map[string]any)
	for _, k := range []string{"frames_sent", "frames_recv", "send_calls", "recv_calls", "bytes_sent", "bytes_recv", "send_avg_us", "send_max_us", "recv_avg_us", "recv_max_us"} {
		if _, ok := totals[k]; !ok {
			t.Errorf("json lacks totals.%s", k)
		}
	}
	per, _ := got["per_token"].(map[string]any)
	for _, k := range []string{"frames", "round_trips", "bytes_sent", "bytes_recv"} {
		if _, ok := per[k]; !ok {
			t.Errorf("json lacks per_token.%s", k)
		}
	}
	f, err := trace.ReadFile(tracePath)
	if err != nil {
		t.Fatal(err)
	}
	sent := 0
	for _, e := range f.Events {
		if e.Op == trace.OpFrameSend {
			sent++
		}
	}
	if fmt.Sprint(float64(sent)) != fmt.Sprint(totals["frames_sent"]) {
		t.Errorf("trace has %d frames sent, json says %v", sent, totals["frames_sent"])
	}

	// Auto-invalidate off: the output is wrong and the run exits 1, with the JSON still printed.
	code, stdout, stderr = runVenusIn(ctx, map[string]string{"VENUS_INVALIDATE_ON_WAIT": "0"}, "run", "--connect", "unix://"+sock,
		"--tokens", "2", "--logits-bytes", "16384", "--json")
	if code != ExitFailed || !strings.Contains(stderr, "checksum") || !strings.Contains(stdout, `"checksum_ok": false`) {
		t.Errorf("invalidate off: exit %d, stderr %q, stdout %q", code, stderr, stdout)
	}
	// The ping workload.
	code, stdout, stderr = runVenusIn(ctx, nil, "run", "--connect", "unix://"+sock, "--workload", "ping", "--requests", "200", "--mode", "pipeline", "--depth", "4")
	if code != 0 || !strings.Contains(stdout, "rtt min") {
		t.Errorf("ping: exit %d: %s %s", code, stdout, stderr)
	}
	code, serr := stop()
	if code != 0 || !strings.Contains(serr, "stopped") {
		t.Errorf("serve after cancellation: exit %d: %s", code, serr)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket left behind: %v", err)
	}
}

func TestVenusNetSummary(t *testing.T) {
	addr := fmt.Sprintf("shm:///perflab-cli-%d", os.Getpid())
	serveInBackground(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code, _, stderr := runVenusIn(ctx, map[string]string{"VENUS_TRACE_NET": "1"}, "run", "--connect", addr, "--workload", "ping", "--requests", "250", "--warmup", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if n := strings.Count(stderr, "[Net] send summary: calls="); n != 2 {
		t.Errorf("%d send summaries for 252 frames, want 2:\n%s", n, stderr)
	}
	if !strings.Contains(stderr, "[Net] recv summary: calls=200 avg_us=") || !strings.Contains(stderr, "max_us=") {
		t.Errorf("summary format:\n%s", stderr)
	}
}

// TestVenusServeBatchLoop runs the llm workload against `venus serve --loop batch`: the batch
// loop must give the same checksum as the in-process reference in a pipelined mode.
func TestVenusServeBatchLoop(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "b.sock")
	stop := serveInBackground(t, "unix://"+sock, "--loop", "batch")
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	code, stdout, stderr := runVenusIn(ctx, nil, "run", "--connect", "unix://"+sock, "--tokens", "3", "--logits-bytes", "16384",
		"--mode", "coalesce+pipeline", "--json")
	if code != 0 {
		t.Fatalf("run against the batch loop: exit %d: %s", code, stderr)
	}
	var got struct {
		ChecksumOK bool   `json:"checksum_ok"`
		Checksum   string `json:"checksum"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatal(err)
	}
	if !got.ChecksumOK || got.Checksum == "" {
		t.Errorf("batch loop: checksum %q ok=%v", got.Checksum, got.ChecksumOK)
	}
	if code, serr := stop(); code != 0 {
		t.Errorf("serve --loop batch: exit %d: %s", code, serr)
	}
}
