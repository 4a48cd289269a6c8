package ggmlpeer

import (
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recConn records every Read and Write on a connection as a trace event, as the eBPF probes see
// system calls: the bytes moved and the first head bytes of them.
type recConn struct {
	net.Conn
	off  bool // record nothing (a side the trace does not see)
	mu   *sync.Mutex
	w    *trace.Writer
	id   uint64
	pid  uint32
	head int
	t0   time.Time
	err  error
}

func (c *recConn) record(dir trace.Dir, op trace.Op, start time.Time, b []byte, n int) {
	if n <= 0 || c.off {
		return
	}
	p := b[:n]
	if len(p) > c.head {
		p = p[:c.head]
	}
	ev := trace.Event{TS: int64(start.Sub(c.t0)) + 1e9, Dur: int64(time.Since(start)), PID: c.pid, TID: c.pid,
		Conn: c.id, Dir: dir, Op: op, Source: trace.SourceEBPF, Bytes: int64(n), Payload: p}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.w.WriteEvent(&ev); err != nil && c.err == nil {
		c.err = err
	}
}

func (c *recConn) Write(b []byte) (int, error) {
	start := time.Now()
	n, err := c.Conn.Write(b)
	c.record(trace.DirSend, trace.OpSendto, start, b, n)
	return n, err
}

func (c *recConn) Read(b []byte) (int, error) {
	start := time.Now()
	n, err := c.Conn.Read(b)
	c.record(trace.DirRecv, trace.OpRecvfrom, start, b, n)
	return n, err
}

// record runs the workload between a client and a server over loopback TCP, recording both
// sides' calls, and returns the trace's path.
func record(t *testing.T, v Version, tokens, head int) string {
	return recordSides(t, v, tokens, head, true, true)
}

// recordSides records the client's side, the server's, or both.
func recordSides(t *testing.T, v Version, tokens, head int, client, server bool) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ggml.plt")
	w, err := trace.Create(path, trace.Meta{Source: "ebpf", Protocol: "ggml-rpc", PayloadBytes: head}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	t0 := time.Now()
	srv := &Server{Version: v}
	done := make(chan error, 1)
	var sconn *recConn
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		sconn = &recConn{Conn: c, mu: &mu, w: w, id: 2, pid: 200, head: head, t0: t0, off: !server}
		done <- srv.ServeConn(sconn)
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cc := &recConn{Conn: nc, mu: &mu, w: w, id: 1, pid: 100, head: head, t0: t0, off: !client}
	cl, err := Dial(cc)
	if err != nil {
		t.Fatal(err)
	}
	if cl.Version != v {
		t.Fatalf("client learned version %v, server speaks %v", cl.Version, v)
	}
	if err := cl.Workload(tokens); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	if err := <-done; err != nil {
		t.Fatalf("server: %v", err)
	}
	ln.Close()
	for _, c := range []*trace.Connection{
		{ID: 1, Family: trace.FamilyTCP, Local: nc.LocalAddr().String(), Remote: nc.RemoteAddr().String(), PID: 100},
		{ID: 2, Family: trace.FamilyTCP, Local: nc.RemoteAddr().String(), Remote: nc.LocalAddr().String(), PID: 200},
	} {
		if err := w.WriteConnection(c); err != nil {
			t.Fatal(err)
		}
	}
	if cc.err != nil || sconn.err != nil {
		t.Fatal(cc.err, sconn.err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

var names = []string{"ALLOC_BUFFER", "GET_ALIGNMENT", "GET_MAX_SIZE", "BUFFER_GET_BASE", "FREE_BUFFER", "BUFFER_CLEAR",
	"SET_TENSOR", "SET_TENSOR_HASH", "GET_TENSOR", "COPY_TENSOR", "GRAPH_COMPUTE", "GET_DEVICE_MEMORY", "INIT_TENSOR",
	"GET_ALLOC_SIZE", "HELLO", "DEVICE_COUNT", "GRAPH_RECOMPUTE", "MEMSET_TENSOR"}

// A recorded session decodes completely: every command named on both sides, each reply
// paired with its request, and one round trip per decode step (only GET_TENSOR waits).
func TestDecodeRecordedSession(t *testing.T) {
	const tokens = 20
	for _, tc := range []struct {
		name    string
		v       Version
		rtToken float64
		msgTok  float64
	}{
		{"v5", Version{5, 0, 0}, 1, 4},
		{"v3", Version{3, 6, 0}, 1, 4},
		{"v2", Version{2, 0, 0}, 2, 5}, // GRAPH_RECOMPUTE still answered
		{"v1", Version{1, 0, 0}, 3, 6}, // SET_TENSOR too
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := record(t, tc.v, tokens, 64)
			seen := map[string]int{}
			replies, requests := 0, 0
			err := analyzers.Messages(protocol.Files([]string{path}, nil), analyzers.Options{}, func(m *protocol.Message) error {
				if m.Protocol != "ggml-rpc" {
					t.Errorf("connection %d decoded as %q", m.Conn, m.Protocol)
				}
				if m.Name == "" {
					t.Errorf("unnamed message %+v", *m)
				}
				if m.LostSync || m.Truncated {
					t.Errorf("message lost sync or truncated: %+v", *m)
				}
				if m.IsReply {
					replies++
					if m.RTT <= 0 {
						t.Errorf("reply without a round-trip time: %+v", *m)
					}
				} else {
					requests++
					if m.Conn == 1 {
						seen[m.Name]++
					}
				}
				return nil
			})

			if err != nil {
				t.Fatal(err)
			}
			for _, n := range names {
				if seen[n] == 0 {
					t.Errorf("command %s never decoded", n)
				}
			}
			s, err := analyzers.Analyze(protocol.Files([]string{path}, nil), analyzers.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Units) != 1 {
				t.Fatalf("units %+v", s.Units)
			}
			u := s.Units[0]
			// the first step (GRAPH_COMPUTE, a new graph) is a shape apart: the other 19 are the
			// steady state
			if u.Name != "token" || u.Count != tokens-1 || u.Shape != "steady" || u.RoundTripsPerUnit != tc.rtToken || u.MessagesPerUnit != tc.msgTok ||
				u.RequestsPerUnit != 3 || u.RepliesPerUnit != tc.rtToken {
				t.Errorf("unit %+v, want %d tokens with %v round trips and %v messages each", u, tokens-1, tc.rtToken, tc.msgTok)
			}
			// both sides are in the trace: the client's wait splits into the server's work and
			// the rest
			if u.ServerTimeUS <= 0 || u.ServerTimeUS > u.NetWaitUS || math.Abs(u.ServerTimeUS+u.NotServerUS-u.NetWaitUS) > 0.002 {
				t.Errorf("unit %+v: want the %v µs wait split into server time and the rest", u, u.NetWaitUS)
			}
			var all uint64
			for _, x := range s.UnitShapes {
				all += x.Count
			}
			if all != tokens {
				t.Errorf("unit shapes %+v, want %d steps in all", s.UnitShapes, tokens)
			}
			var names []string
			for _, p := range s.Phases {
				names = append(names, p.Name)
			}
			if len(s.Phases) < 2 || s.Phases[0].Name != "load" || s.Phases[0].Messages == 0 || !slices.Contains(names, "steady") {
				t.Errorf("phases %+v, want load and steady detected from the units", s.Phases)
			}
			if s.RoundTrips.Unanswered != 0 {
				t.Errorf("%d requests unanswered", s.RoundTrips.Unanswered)
			}
			if s.RoundTrips.ServiceUS == nil {
				t.Errorf("the server side is in the trace but no service time came out")
			}
			if len(s.Warnings) > 0 {
				t.Logf("warnings: %q", s.Warnings)
			}
		})
	}
}

// A trace of the server alone (an unmodified rpc-server under perflab record) still gives
// the messages and round trips per decode step, from the requests it receives.
func TestDecodeServerOnly(t *testing.T) {
	path := recordSides(t, Version{5, 0, 0}, 12, 64, false, true)
	s, err := analyzers.Analyze(protocol.Files([]string{path}, nil), analyzers.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// the first step opens with GRAPH_COMPUTE (a new graph), the other 11 with GRAPH_RECOMPUTE:
	// those are the steady state
	if len(s.Units) != 1 || s.Units[0].Count != 11 || s.Units[0].Shape != "steady" || s.Units[0].RoundTripsPerUnit != 1 ||
		s.Units[0].MessagesPerUnit != 4 || s.Units[0].RequestsPerUnit != 3 || s.Units[0].Side != "server" {
		t.Errorf("units %+v", s.Units)
	}
	var all uint64
	for _, u := range s.UnitShapes {
		all += u.Count
	}
	if all != 12 {
		t.Errorf("unit shapes %+v, want the 12 steps", s.UnitShapes)
	}
	if s.RoundTrips.ServiceUS == nil || s.RoundTrips.ServiceUS.N == 0 {
		t.Errorf("no service time: %+v", s.RoundTrips)
	}
}

func TestServerRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"not hello first", []byte{CmdGetTensor, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"huge size", []byte{CmdHello, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{"unknown command", []byte{200, 0, 0, 0, 0, 0, 0, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rw := &pipe{in: tc.in}
			if err := (&Server{Version: Version{5, 0, 0}}).ServeConn(rw); err == nil {
				t.Errorf("accepted %x", tc.in)
			}
		})
	}
}

type pipe struct {
	in  []byte
	out []byte
}

func (p *pipe) Read(b []byte) (int, error) {
	if len(p.in) == 0 {
		return 0, os.ErrClosed
	}
	n := copy(b, p.in)
	p.in = p.in[n:]
	return n, nil
}

func (p *pipe) Write(b []byte) (int, error) { p.out = append(p.out, b...); return len(b), nil }
