package venusd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perflab/perflab/venusd/wire"
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
	serveUntilCleanup(t, s)
	return s
}

// serveUntilCleanup serves s until the test ends, and fails the test if Serve fails.
func serveUntilCleanup(t testing.TB, s Serving) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
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

// D8: 16 clients at once over every transport and mode, each on its own device: every result
// equals the in-process reference.
func TestD8ConcurrentClients(t *testing.T) {
	lc := smallLLM(2)
	lc.LogitsBytes = 4096
	lc.SubmitMinBytes, lc.SubmitMaxBytes = 8000, 12000
	ref, err := ReferenceChecksum(lc)
	if err != nil {
		t.Fatal(err)
	}
	servers := map[string]*Server{}
	for _, tr := range []string{"tcp", "unix", "shm"} {
		servers[tr] = startServer(t, ServerConfig{Listen: listenAddr(t, tr), Getenv: noEnv})
	}
	trs := []string{"tcp", "unix", "shm"}
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
			defer cancel()
			m := Modes[i%len(Modes)]
			res, err := RunWorkload(ctx, ClientConfig{Connect: servers[trs[i%3]].Addr(), Mode: m, Depth: 1 + i%5, LLM: lc, Getenv: noEnv, NoVerify: true})
			if err == nil && res.Checksum != ref {
				err = fmt.Errorf("client %d (%s, %s): checksum %s, reference %s", i, trs[i%3], m, res.Checksum, ref)
			}
			errs <- err
		}()
	}
	for i := 0; i < 16; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	for tr, s := range servers {
		waitIdle(t, s)
		if st := s.Stats(); st.LiveObjects != 0 {
			t.Errorf("%s: %d objects alive after every client left", tr, st.LiveObjects)
		}
	}
}

// Coalescing cuts frames per token by at least 4× (a deterministic count, not a timing), and
// pipelining keeps the frames but blocks on far fewer replies.
func TestCoalesceCutsFrames(t *testing.T) {
	s := startServer(t, ServerConfig{Listen: "tcp://127.0.0.1:0", Getenv: noEnv})
	per := map[Mode]PerToken{}
	for _, m := range Modes {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := RunWorkload(ctx, ClientConfig{Connect: s.Addr(), Mode: m, LLM: smallLLM(3), Getenv: noEnv, NoVerify: true})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		per[m] = res.PerToken
	}
	b, c := per[ModeBaseline], per[ModeCoalesce]
	if b.Frames < 4*c.Frames {
		t.Errorf("frames per token: baseline %.1f, coalesce %.1f: less than 4×", b.Frames, c.Frames)
	}
	if b.RoundTrips != b.Frames/2 || b.SyncWaits != b.RoundTrips {
		t.Errorf("baseline: %+v, want one blocking round trip per call", b)
	}
	if p := per[ModePipeline]; p.Frames != b.Frames || p.SyncWaits >= b.SyncWaits/4 {
		t.Errorf("pipeline %+v vs baseline %+v: want the same frames, far fewer blocking waits", p, b)
	}
	if cp := per[ModeCoalescePipeline]; cp.Frames != c.Frames || cp.SyncWaits >= c.SyncWaits {
		t.Errorf("coalesce+pipeline %+v vs coalesce %+v", cp, c)
	}
}

// The auto-invalidate variables are the client's: off, or a handle list or cap that leaves the
// logits out, and the output is wrong (seed 001's "output becomes corrupted").
func TestInvalidateVariables(t *testing.T) {
	s := startServer(t, ServerConfig{Listen: "tcp://127.0.0.1:0", Getenv: noEnv})
	cases := []struct {
		env      map[string]string
		ok       bool
		eligible int
	}{
		{map[string]string{}, true, 3},
		{map[string]string{"VENUS_INVALIDATE_ON_WAIT": "0"}, false, 0},
		{map[string]string{"VENUS_INVALIDATE_HANDLES": "0x9,0x19"}, false, 2},
		{map[string]string{"VENUS_INVALIDATE_HANDLES": "0x9, 0x11,0x19"}, true, 3},
		{map[string]string{"VENUS_INVALIDATE_MAX_BYTES": "4KiB"}, false, 1},
		{map[string]string{"VENUS_INVALIDATE_MAX_BYTES": "256KiB", "VENUS_INVALIDATE_ON_WAIT": "1"}, true, 3},
	}
	for _, tc := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := RunWorkload(ctx, ClientConfig{Connect: s.Addr(), Mode: ModeCoalesce, LLM: smallLLM(3),
			Getenv: func(k string) string { return tc.env[k] }})
		cancel()
		if tc.ok != (err == nil) || res == nil || res.ChecksumOK != tc.ok {
			t.Errorf("%v: err %v, result ok %v; want ok=%v", tc.env, err, res != nil && res.ChecksumOK, tc.ok)
			continue
		}
		if !tc.ok && !errors.Is(err, ErrChecksum) {
			t.Errorf("%v: %v does not wrap ErrChecksum", tc.env, err)
		}
		if res.Invalidate.Eligible != tc.eligible {
			t.Errorf("%v: %d mappings read back, want %d", tc.env, res.Invalidate.Eligible, tc.eligible)
		}
	}
	_, err := RunWorkload(context.Background(), ClientConfig{Connect: s.Addr(), LLM: smallLLM(1),
		Getenv: func(k string) string { return map[string]string{"VENUS_INVALIDATE_MAX_BYTES": "lots"}[k] }})
	if err == nil || !strings.Contains(err.Error(), "VENUS_INVALIDATE_MAX_BYTES") {
		t.Errorf("bad VENUS_INVALIDATE_MAX_BYTES: %v", err)
	}
}

// The emulated link delays frames but changes nothing else.
func TestDelayedLinkSameResult(t *testing.T) {
	s := startServer(t, ServerConfig{Listen: "tcp://127.0.0.1:0", Getenv: noEnv})
	for _, m := range Modes {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := RunWorkload(ctx, ClientConfig{Connect: s.Addr(), Mode: m, LLM: smallLLM(2), Delay: 200 * time.Microsecond,
			Jitter: 100 * time.Microsecond, Bandwidth: 1e9, Getenv: noEnv})
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		// A lower bound only: each blocking round trip crosses the link twice.
		if min := 2 * 200 * time.Microsecond * time.Duration(res.PerToken.SyncWaits*float64(res.Tokens)); res.GenerateS < min.Seconds() {
			t.Errorf("%s: %d tokens in %.4fs, faster than the emulated link allows", m, res.Tokens, res.GenerateS)
		}
	}
}

// An error of a call that was not awaited surfaces at the next sync point, in every mode; in
// baseline it is returned by the call itself.
func TestDeferredErrors(t *testing.T) {
	s := startServer(t, ServerConfig{Listen: "tcp://127.0.0.1:0", Getenv: noEnv})
	for _, m := range Modes {
		t.Run(m.String(), func(t *testing.T) {
			cfg := ClientConfig{Connect: s.Addr(), Mode: m, Getenv: noEnv}
			c, _, err := dialClient(context.Background(), &cfg, noEnv)
			if err != nil {
				t.Fatal(err)
			}
			defer c.close()
			e := c.start(wire.CmdTransferMemoryData, kindAsync) // memory 0x77 does not exist
			e.U64(0x77)
			e.U64(0)
			e.U64(4)
			e.Bytes([]byte{1, 2, 3, 4})
			_, asyncErr := c.done(kindAsync)
			e = c.start(wire.CmdPing, kindSync)
			e.U32(4)
			_, syncErr := c.done(kindSync)
			var ve *wire.VkError
			switch {
			case m == ModeBaseline:
				if !errors.As(asyncErr, &ve) || ve.Deferred || ve.Result != wire.VkErrorValidationFailed {
					t.Errorf("baseline: the call returned %v", asyncErr)
				}
			default:
				if asyncErr != nil {
					t.Errorf("the call itself returned %v", asyncErr)
				}
				if !errors.As(syncErr, &ve) || !ve.Deferred || ve.Cmd != wire.CmdTransferMemoryData || ve.Result != wire.VkErrorValidationFailed {
					t.Errorf("sync point returned %v, want the deferred vnTransferMemoryData error", syncErr)
				}
			}
		})
	}
}
