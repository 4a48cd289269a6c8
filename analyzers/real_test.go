package analyzers

import (
	"bufio"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// The traces under fixtures/real were recorded from real programs (llama.cpp's RPC server and
// client, Venus Plus on lavapipe); their ground truth was counted without perflab's decoders
// (fixtures/real/README.md). These tests hold perflab's figures to it.

const realDir = "../fixtures/real"

// readTSV reads a tab-separated file with a header line into rows of named columns.
func readTSV(t *testing.T, path string) []map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	head := strings.Split(lines[0], "\t")
	var rows []map[string]string
	for _, l := range lines[1:] {
		f := strings.Split(l, "\t")
		r := map[string]string{}
		for i, h := range head {
			if i < len(f) {
				r[h] = f[i]
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// rawServiceTimes recomputes a single-threaded server's service times from the raw events of
// its trace, without perflab's decoders: on each connection, the sends that follow receives
// are a reply; its service time runs from the end of the last receive before it to the start
// of its first send. Failed calls and end-of-file reads are left out.
func rawServiceTimes(t *testing.T, path string) []int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := trace.NewReader(bufio.NewReader(f))
	if err != nil {
		t.Fatal(err)
	}
	type st struct {
		lastRecvEnd int64
		inReply     bool
	}
	conns := map[uint64]*st{}
	var out []int64
	var rec trace.Record
	for {
		err := r.Next(&rec)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ev := &rec.Event
		if rec.Kind != trace.KindEvent || ev.Errno != 0 || ev.Bytes <= 0 {
			continue
		}
		c := conns[ev.Conn]
		if c == nil {
			c = &st{}
			conns[ev.Conn] = c
		}
		switch ev.Dir {
		case trace.DirRecv:
			c.lastRecvEnd, c.inReply = ev.TS+ev.Dur, false
		case trace.DirSend:
			if !c.inReply && c.lastRecvEnd != 0 {
				out = append(out, ev.TS-c.lastRecvEnd)
			}
			c.inReply = true
		}
	}
	return out
}

// checkService holds the summary's service times to those recomputed from the raw events.
func checkService(t *testing.T, s *Summary, path string) {
	t.Helper()
	raw := rawServiceTimes(t, path)
	var sum, mx int64
	for _, v := range raw {
		sum += v
		mx = max(mx, v)
	}
	l := s.RoundTrips.ServiceUS
	if l == nil {
		t.Fatalf("no service time; want %d samples from the raw events", len(raw))
	}
	if l.N != uint64(len(raw)) || l.Max != us(float64(mx)) || math.Abs(l.Mean-us(float64(sum)/float64(len(raw)))) > 0.0015 {
		t.Errorf("service time n %d max %v mean %v µs; the raw events give n %d max %v mean %v µs",
			l.N, l.Max, l.Mean, len(raw), us(float64(mx)), us(float64(sum)/float64(len(raw))))
	}
}

func TestRealLlamaCpp(t *testing.T) {
	for _, variant := range []string{"default", "fitoff"} {
		reqs := readTSV(t, filepath.Join(realDir, "llamacpp", "server-"+variant+".requests.tsv"))
		byCmd := map[string]uint64{}
		var answered uint64
		steps := 0
		for _, r := range reqs {
			byCmd[r["name"]]++
			if r["response_payload_bytes"] != "-" {
				answered++
			}
			if r["name"] == "GRAPH_COMPUTE" || r["name"] == "GRAPH_RECOMPUTE" {
				steps++
			}
		}
		// the load phase: every request on the short connections, plus the main connection's
		// requests before the run of SET_TENSOR that directly precedes the first GRAPH_COMPUTE
		mainConn := reqs[len(reqs)-1]["conn"]
		var load, loadRTs uint64
		var main []map[string]string
		for _, r := range reqs {
			if r["conn"] != mainConn {
				load++
				if r["response_payload_bytes"] != "-" {
					loadRTs++
				}
			} else {
				main = append(main, r)
			}
		}
		firstCompute := 0
		for firstCompute < len(main) && main[firstCompute]["name"] != "GRAPH_COMPUTE" {
			firstCompute++
		}
		runStart := firstCompute
		for runStart > 0 && main[runStart-1]["name"] == "SET_TENSOR" {
			runStart--
		}
		for _, r := range main[:runStart] {
			load++
			if r["response_payload_bytes"] != "-" {
				loadRTs++
			}
		}

		for _, side := range []string{"client", "server"} {
			t.Run(side+"-"+variant, func(t *testing.T) {
				path := filepath.Join(realDir, "llamacpp", side+"-"+variant+".plt")
				s, err := Analyze(protocol.Files([]string{path}, nil), Options{})
				if err != nil {
					t.Fatal(err)
				}
				if s.Protocol != "ggml-rpc" {
					t.Fatalf("protocol %q, want ggml-rpc", s.Protocol)
				}
				// one round-trip count, the ground truth's, whichever side was traced
				rt := s.RoundTrips
				if rt.Count != answered || rt.Unpaired != 0 || rt.Unanswered != 0 {
					t.Errorf("round trips %d (client %d, served %d, unpaired %d, unanswered %d), want %d",
						rt.Count, rt.Client, rt.Served, rt.Unpaired, rt.Unanswered, answered)
				}
				if side == "client" && rt.Client != answered || side == "server" && rt.Served != answered {
					t.Errorf("%s: client %d, served %d round trips, want %d on the %s side", side, rt.Client, rt.Served, answered, side)
				}
				for _, p := range s.Processes {
					if p.RoundTrips != answered {
						t.Errorf("process %d: %d round trips, want %d", p.PID, p.RoundTrips, answered)
					}
				}
				got := map[string]uint64{}
				for _, c := range s.Commands {
					if c.Kind == "request" {
						got[c.Name] += c.Count
					}
				}
				for name, n := range byCmd {
					if got[name] != n {
						t.Errorf("%s: %d requests, want %d", name, got[name], n)
					}
				}
				// the steady state: 8 requests (SET_TENSOR ×6, GRAPH_RECOMPUTE, GET_TENSOR) and
				// one round trip per token, 10 tokens
				if len(s.Units) != 1 {
					t.Fatalf("units %+v, want one", s.Units)
				}
				u := s.Units[0]
				sent, recv := 3260.0, 128008.0
				if side == "server" {
					sent, recv = recv, sent
				}
				if u.Name != "token" || u.Shape != "steady" || u.Count != 10 || u.RequestsPerUnit != 8 || u.RepliesPerUnit != 1 ||
					u.RoundTripsPerUnit != 1 || u.BytesSentPerUnit != sent || u.BytesRecvPerUnit != recv ||
					u.Sequence != "SET_TENSOR×6 GRAPH_RECOMPUTE GET_TENSOR" {
					t.Errorf("steady state %+v, want 10 tokens of 8 requests, 1 round trip, %v B sent, %v B received", u, sent, recv)
				}
				var all uint64
				for _, x := range s.UnitShapes {
					all += x.Count
				}
				if all != uint64(steps) {
					t.Errorf("%d units in all shapes, want the %d compute steps", all, steps)
				}
				if len(s.Phases) == 0 || s.Phases[0].Name != "load" || s.Phases[0].Messages != load+loadRTs {
					t.Errorf("phases %+v, want load first with %d requests + %d replies", s.Phases, load, loadRTs)
				}
				if len(s.Windows) != 0 {
					t.Errorf("Venus-style windows on a ggml-rpc trace: %+v", s.Windows)
				}
				if side == "server" {
					checkService(t, s, path)
					if u.ServerTimeUS <= 0 || u.ServerTimeUS >= u.UnitTimeUS {
						t.Errorf("server time %v µs of a %v µs token", u.ServerTimeUS, u.UnitTimeUS)
					}
				}
			})
		}
	}
}

func TestRealVenusPlus(t *testing.T) {
	for _, phase := range []string{"2", "9"} {
		frames := readTSV(t, filepath.Join(realDir, "venusplus", "server-phase"+phase+".frames.tsv"))
		var answered uint64
		byID := map[uint64]uint64{} // replies by the first u32 of their request
		for _, f := range frames {
			if f["reply_payload_bytes"] == "-" {
				continue
			}
			answered++
			id, err := strconv.ParseUint(strings.TrimPrefix(f["first_u32"], "0x"), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			byID[id]++
		}
		for _, side := range []string{"client", "server"} {
			t.Run(side+"-phase"+phase, func(t *testing.T) {
				path := filepath.Join(realDir, "venusplus", side+"-phase"+phase+".plt")
				s, err := Analyze(protocol.Files([]string{path}, nil), Options{})
				if err != nil {
					t.Fatal(err)
				}
				rt := s.RoundTrips
				if rt.Count != answered || rt.Unpaired != 0 {
					t.Errorf("round trips %d, unpaired %d; want every one of the %d replies paired", rt.Count, rt.Unpaired, answered)
				}
				// every reply is named by the request it answers
				got := map[uint64]uint64{}
				for _, c := range s.Commands {
					if c.Kind == "reply" {
						got[c.ID] += c.Count
					}
				}
				for id, n := range byID {
					if got[id] != n {
						t.Errorf("replies to command %#x: %d, want %d", id, got[id], n)
					}
				}
				if len(got) != len(byID) {
					t.Errorf("replies named after %d commands, want %d: %v", len(got), len(byID), got)
				}
				// VENUS_TRACE_NET counts messages per direction: phase 9's 116 replies make one
				// window of 100 on the side that receives them, its 118 requests one on the other
				dirs := map[string]int{}
				for _, w := range s.Windows {
					if w.Dir != "rtt" {
						dirs[w.Dir]++
						if w.Calls != 100 {
							t.Errorf("window at %d messages, want 100", w.Calls)
						}
					}
				}
				if phase == "9" && (dirs["send"] != 1 || dirs["recv"] != 1) || phase == "2" && len(dirs) != 0 {
					t.Errorf("windows %+v: want one per direction in phase 9, none in phase 2", s.Windows)
				}
				if side == "server" {
					checkService(t, s, path)
				}
			})
		}
	}
}

// Several traces at once: every per-trace row names its trace, and each trace's round trips
// are the same as when it is analysed alone.
func TestRealSeveralTraces(t *testing.T) {
	client := filepath.Join(realDir, "llamacpp", "client-default.plt")
	server := filepath.Join(realDir, "llamacpp", "server-default.plt")
	s, err := Analyze(protocol.Files([]string{client, server}, nil), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range s.Connections {
		if c.Trace == "" {
			t.Fatalf("connection %d has no trace", c.ID)
		}
	}
	byTrace := map[string]uint64{}
	for _, p := range s.Processes {
		if p.Trace == "" {
			t.Fatalf("process %d has no trace", p.PID)
		}
		byTrace[p.Trace] += p.RoundTrips
	}
	if byTrace["client-default.plt"] != 163 || byTrace["server-default.plt"] != 163 || s.RoundTrips.Client != 163 || s.RoundTrips.Served != 163 {
		t.Errorf("round trips by trace %v, client %d, served %d; want 163 each", byTrace, s.RoundTrips.Client, s.RoundTrips.Served)
	}
	for _, u := range append(append([]UnitStats{}, s.Units...), s.UnitShapes...) {
		if u.Trace == "" {
			t.Errorf("unit row %+v has no trace", u)
		}
	}
	for _, p := range s.Phases {
		if p.Trace == "" {
			t.Errorf("phase %+v has no trace", p)
		}
	}
	if len(s.Units) != 2 || s.Units[0].Trace == s.Units[1].Trace {
		t.Errorf("units %+v, want one steady state per trace", s.Units)
	}
	// The client's requests in flight and Little's law are over the client's trace only: the
	// server's, from another run, has no client round trip to dilute them with.
	alone, err := Analyze(protocol.Files([]string{client}, nil), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.InFlight == nil || alone.InFlight == nil || s.InFlight.Mean != alone.InFlight.Mean || len(s.LittlesLaw) != 1 ||
		len(alone.LittlesLaw) != 1 || s.LittlesLaw[0].ThroughputPerS != alone.LittlesLaw[0].ThroughputPerS {
		t.Errorf("client and server: in flight %+v, Little %+v; the client alone: %+v, %+v", s.InFlight, s.LittlesLaw, alone.InFlight, alone.LittlesLaw)
	}
	// A command sent by the client only is in the client's trace only: its rate is over that
	// trace's span.
	for _, c := range s.Commands {
		if c.Name == "SET_TENSOR" && c.Direction == "send" && c.SpanS != alone.Duration {
			t.Errorf("SET_TENSOR sent: span %v s, want the client trace's %v s", c.SpanS, alone.Duration)
		}
	}
}

// --unit-command picks the commands that open a unit; the unit keeps the protocol's name.
func TestRealUnitCommandKeepsName(t *testing.T) {
	s, err := Analyze(protocol.Files([]string{filepath.Join(realDir, "llamacpp", "client-fitoff.plt")}, nil), Options{UnitCommands: "GRAPH_RECOMPUTE"})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Units) != 1 || s.Units[0].Name != "token" || s.Units[0].RequestsPerUnit != 8 || s.Units[0].RoundTripsPerUnit != 1 {
		t.Errorf("units %+v, want tokens of 8 requests and 1 round trip", s.Units)
	}
}
