package venusd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

var shmSeq atomic.Int64

// listenAddr returns a fresh address of transport tr for one test.
func listenAddr(t testing.TB, tr string) string {
	switch tr {
	case "tcp":
		return "tcp://127.0.0.1:0"
	case "unix":
		return "unix://" + filepath.Join(t.TempDir(), "v.sock")
	case "shm":
		return fmt.Sprintf("shm:///perflab-test-%d-%d", os.Getpid(), shmSeq.Add(1))
	}
	t.Fatalf("unknown transport %s", tr)
	return ""
}

// startServer runs a server until the test ends.
func startServer(t testing.TB, cfg ServerConfig) *Server {
	t.Helper()
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return s
}

func noEnv(string) string { return "" }

// smallLLM is a quick profile for tests: few tokens, small vocabulary.
func smallLLM(tokens int) LLMConfig {
	c := DefaultLLMConfig()
	c.Tokens = tokens
	c.LogitsBytes = 16384
	return c
}

func TestModesTransportsSameChecksum(t *testing.T) {
	lc := smallLLM(3)
	ref, err := ReferenceChecksum(lc)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range []string{"tcp", "unix", "shm"} {
		s := startServer(t, ServerConfig{Listen: listenAddr(t, tr), Getenv: noEnv})
		for _, m := range Modes {
			t.Run(tr+"/"+m.String(), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				res, err := RunWorkload(ctx, ClientConfig{Connect: s.Addr(), Workload: "llm", Mode: m, LLM: lc, Getenv: noEnv})
				if err != nil {
					t.Fatal(err)
				}
				if res.Checksum != ref || !res.ChecksumOK {
					t.Errorf("checksum %s, reference %s", res.Checksum, ref)
				}
				t.Logf("frames/token %.1f rt/token %.1f sync/token %.1f", res.PerToken.Frames, res.PerToken.RoundTrips, res.PerToken.SyncWaits)
			})
		}
	}
}
