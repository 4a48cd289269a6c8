package venusd

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"testing"
	"time"

	"github.com/perflab/perflab/trace"
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
					if len(e.Payload) < HeaderSize || binary.LittleEndian.Uint32(e.Payload) != Magic {
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
