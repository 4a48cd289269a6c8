package venusd

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/perflab/perflab/trace"
	"github.com/perflab/perflab/venusd/transport"
	"github.com/perflab/perflab/venusd/wire"
)

// TestTraceMatchesCounters writes a client trace in every transport and checks that the trace
// read back has exactly as many frames per direction as the client's own counters, the shm
// traffic included, with token and phase markers.
func TestTraceMatchesCounters(t *testing.T) {
	for _, tr := range []string{"tcp", "unix", "shm"} {
		t.Run(tr, func(t *testing.T) {
			s := startServer(t, ServerConfig{Listen: listenAddr(t, tr), Getenv: noEnv})
			path := filepath.Join(t.TempDir(), "venus.plt")
			w, err := trace.Create(path, TraceMeta([]string{"test"}, 64), nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			lc := smallLLM(4)
			res, err := RunWorkload(ctx, ClientConfig{Connect: s.Addr(), Mode: ModeCoalescePipeline, LLM: lc, Trace: w, Getenv: noEnv, NoVerify: true})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			f, err := trace.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var sent, recv, rtts int64
			var sentBytes int64
			sendReq, recvReq := map[uint64]bool{}, map[uint64]bool{}
			for _, e := range f.Events {
				switch e.Op {
				case trace.OpFrameSend:
					sendReq[e.ReqID] = true
					sent++
					sentBytes += e.Bytes
					if len(e.Payload) < wire.HeaderSize || binary.LittleEndian.Uint32(e.Payload) != wire.Magic {
						t.Fatalf("frame event without a VPLS header in its payload: % x", e.Payload)
					}
				case trace.OpFrameRecv:
					recvReq[e.ReqID] = true
					recv++
				case trace.OpRoundTrip:
					rtts++
				}
			}
			// Every round trip pairs a request frame and a reply frame by their request id.
			for _, e := range f.Events {
				if e.Op == trace.OpRoundTrip && (!sendReq[e.ReqID] || !recvReq[e.ReqID]) {
					t.Fatalf("round trip of request %d has no request or reply frame with that id", e.ReqID)
				}
			}
			if sent != res.Totals.FramesSent || recv != res.Totals.FramesRecv || sentBytes != res.Totals.BytesSent {
				t.Errorf("trace has %d frames sent (%d bytes), %d received; client counted %d (%d bytes), %d",
					sent, sentBytes, recv, res.Totals.FramesSent, res.Totals.BytesSent, res.Totals.FramesRecv)
			}
			if rtts != res.Totals.RoundTrips {
				t.Errorf("trace has %d round trips, client counted %d", rtts, res.Totals.RoundTrips)
			}
			if len(f.Connections) != 1 || f.Connections[0].Family.String() != tr {
				t.Errorf("connections %+v, want one of family %s", f.Connections, tr)
			}
			tokens, phases := 0, map[string]bool{}
			for _, m := range f.Markers {
				switch m.Name {
				case "token":
					if m.Value != int64(tokens) || m.Dur <= 0 {
						t.Errorf("token marker %+v, want value %d with a duration", m, tokens)
					}
					tokens++
				case "phase":
					phases[m.Text] = true
				}
			}
			if tokens != lc.Tokens || !phases["load"] || !phases["generate"] {
				t.Errorf("markers: %d tokens, phases %v; want %d tokens, load and generate", tokens, phases, lc.Tokens)
			}
		})
	}
}

// The server traces too: its frames mirror the client's.
func TestServerTrace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server.plt")
	w, err := trace.Create(path, TraceMeta([]string{"server"}, 64), nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(ServerConfig{Listen: listenAddr(t, "shm"), Getenv: noEnv, Trace: w})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	res, err := RunWorkload(rctx, ClientConfig{Connect: s.Addr(), Mode: ModeCoalesce, LLM: smallLLM(2), Getenv: noEnv, NoVerify: true})
	rcancel()
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := trace.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var sent, recv, recvBytes int64
	for _, e := range f.Events {
		switch e.Op {
		case trace.OpFrameSend:
			sent++
		case trace.OpFrameRecv:
			recv++
			recvBytes += e.Bytes
		}
	}
	if sent != res.Totals.FramesRecv || recv != res.Totals.FramesSent || recvBytes != res.Totals.BytesSent {
		t.Errorf("server traced %d sent, %d received (%d bytes); client counted %d received, %d sent (%d bytes)",
			sent, recv, recvBytes, res.Totals.FramesRecv, res.Totals.FramesSent, res.Totals.BytesSent)
	}
	if len(f.Connections) != 1 || f.Connections[0].Family != trace.FamilySHM {
		t.Errorf("server connections %+v", f.Connections)
	}
}

// VENUS_SOCKET_BUFFER_BYTES sizes the socket buffers on both sides; a bad value is refused.
func TestSocketBufferVariable(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "VENUS_SOCKET_BUFFER_BYTES" {
				return v
			}
			return ""
		}
	}
	if _, err := NewServer(ServerConfig{Listen: "tcp://127.0.0.1:0", Getenv: env("big")}); err == nil {
		t.Error("server accepted VENUS_SOCKET_BUFFER_BYTES=big")
	}
	if _, err := RunWorkload(context.Background(), ClientConfig{Connect: "tcp://127.0.0.1:1", Getenv: env("0")}); err == nil || !strings.Contains(err.Error(), "VENUS_SOCKET_BUFFER_BYTES") {
		t.Errorf("client with VENUS_SOCKET_BUFFER_BYTES=0: %v", err)
	}
	n, err := transport.SocketBuffer(0, env("1MiB"))
	if err != nil || n != 1<<20 {
		t.Errorf("1MiB: %d, %v", n, err)
	}
	if n, _ := transport.SocketBuffer(0, env("")); n != DefaultSocketBufferBytes {
		t.Errorf("default %d", n)
	}
	// A server takes a good value; the sockets it gives are checked in transport's tests.
	pingOnce(t, startServer(t, ServerConfig{Listen: "tcp://127.0.0.1:0", Getenv: env("256KiB")}).Addr())
}
