package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// perflab is the binary under test, built once by TestMain.
var perflab string

// repoRoot is the module root (the parent of this package).
var repoRoot string

func TestMain(m *testing.M) {
	if spec := os.Getenv(mcLoopEnv); spec != "" { // re-executed as the memcached sweep's client
		if err := runMcLoop(spec); err != nil {
			fmt.Fprintln(os.Stderr, "memcached closed-loop client:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if addr := os.Getenv(memcachedClientEnv); addr != "" { // re-executed as TestMemcached's client
		if err := runMemcachedClient(addr); err != nil {
			fmt.Fprintln(os.Stderr, "memcached client:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if spec := os.Getenv(ggmlPeerEnv); spec != "" { // re-executed as a ggml-rpc peer of the two-host tests
		if err := runGGMLPeer(spec); err != nil {
			fmt.Fprintln(os.Stderr, "ggml peer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		code = 2
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	root, err := filepath.Abs("..")
	if err != nil {
		return 0, err
	}
	repoRoot = root
	dir, err := os.MkdirTemp("", "perflab-e2e-bin-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	perflab = filepath.Join(dir, "perflab")
	build := exec.Command("go", "build", "-o", perflab, "./cmd/perflab")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("build perflab: %v\n%s", err, out)
	}
	return m.Run(), nil
}

// result is one finished command.
type result struct {
	code           int
	stdout, stderr string
}

// perflabCmd runs the built perflab with args in dir and returns its exit code and output.
func perflabCmd(t *testing.T, dir string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, perflab, args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("perflab %s: %v", strings.Join(args, " "), err)
		}
		r.code = ee.ExitCode()
	}
	if strings.Contains(r.stderr, "panic:") || strings.Contains(r.stderr, "internal error") {
		t.Errorf("perflab %s panicked:\n%s", strings.Join(args, " "), r.stderr)
	}
	return r
}

// mustPerflab runs perflab and fails the test unless it exits 0.
func mustPerflab(t *testing.T, dir string, args ...string) result {
	t.Helper()
	r := perflabCmd(t, dir, args...)
	if r.code != 0 {
		t.Fatalf("perflab %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// startVenusd starts `perflab venus serve` on a Unix socket in dir and stops it (SIGTERM, then
// waits) when the test ends. It returns the address.
func startVenusd(t *testing.T, dir string) string {
	t.Helper()
	addr := "unix://" + filepath.Join(dir, "venus.sock")
	cmd := exec.Command(perflab, "venus", "serve", "--listen", addr)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var werr error
	go func() { werr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Errorf("venusd did not stop on SIGINT within 10 s")
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(filepath.Join(dir, "venus.sock")); err == nil {
			return addr
		}
		select {
		case <-done:
			t.Fatalf("venusd exited: %v\n%s", werr, errb.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("venusd did not listen within 10 s:\n%s", errb.String())
	return ""
}
