package analyzers

import (
	"strings"
	"testing"

	"github.com/perflab/perflab/fixtures"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// rawExchange writes one exchange of an unknown protocol: a request in two calls, a reply in
// three, as the client (send then recv) or the server (recv then send) sees it. t is the
// request's start, ns; it returns the end of the exchange.
func rawExchange(w *trace.Writer, server bool, conn uint64, tid uint32, t int64) (int64, error) {
	req, rep := trace.DirSend, trace.DirRecv
	if server {
		req, rep = trace.DirRecv, trace.DirSend
	}
	evs := []trace.Event{
		{TS: t, Dur: 2000, Dir: req, Bytes: 10, Payload: []byte("HEAD 1\r\n\r\n")},
		{TS: t + 3000, Dur: 2000, Dir: req, Bytes: 30, Payload: []byte("body")},
		{TS: t + 40000, Dur: 1000, Dir: rep, Bytes: 100, Payload: []byte("OK")},
		{TS: t + 42000, Dur: 1000, Dir: rep, Bytes: 100, Payload: []byte("more")},
		{TS: t + 44000, Dur: 1000, Dir: rep, Bytes: 100, Payload: []byte("end")},
	}
	for k := range evs {
		e := &evs[k]
		e.PID, e.TID, e.Conn, e.Source, e.Op = 7, tid, conn, trace.SourceEBPF, trace.OpRead
		if e.Dir == trace.DirSend {
			e.Op = trace.OpWrite
		}
		if err := w.WriteEvent(e); err != nil {
			return 0, err
		}
	}
	return t + 45000, nil
}

// Unknown protocols: a burst of sends followed by a burst of receives is one exchange, on a
// client's trace and a server's, with its RTT, time to first byte and service time.
func TestRawExchanges(t *testing.T) {
	for _, server := range []bool{false, true} {
		path := writeTrace(t, "raw.plt", fixtures.Meta("ebpf", "raw"), func(w *trace.Writer) error {
			ts := int64(1e9)
			for k := 0; k < 10; k++ {
				end, err := rawExchange(w, server, 1, 7, ts)
				if err != nil {
					return err
				}
				ts = end + 100000
			}
			return nil
		})
		s, err := Analyze(protocol.Files([]string{path}, nil), Options{})
		if err != nil {
			t.Fatal(err)
		}
		rt := s.RoundTrips
		if s.Protocol != "raw" || rt.Count != 10 || s.Totals.Send.Frames+s.Totals.Recv.Frames != 20 {
			t.Fatalf("server %v: protocol %q, %d round trips, %d+%d messages; want raw, 10, 10+10", server, s.Protocol, rt.Count, s.Totals.Send.Frames, s.Totals.Recv.Frames)
		}
		if server {
			// request's last byte in (t+5 µs) → reply's first byte out (t+40 µs) and last (t+45 µs)
			if rt.Served != 10 || rt.ServiceUS == nil || rt.ServiceUS.P50 != 35 || rt.ServiceToLastUS.P50 != 40 {
				t.Errorf("server: %+v, want 10 served in 35 µs (40 to the last byte)", rt)
			}
		} else if rt.Client != 10 || rt.RTTUS.P50 != 45 || rt.FirstByteUS == nil || rt.FirstByteUS.P50 != 41 {
			t.Errorf("client: %+v, want RTT 45 µs, first byte after 41 µs", rt)
		}
		if !hasWarning(s, "unknown protocol") {
			t.Errorf("no warning about the unknown protocol: %q", s.Warnings)
		}
		if s.ModesOf == "" || s.HistogramOf == "syscall" {
			t.Errorf("populations of %q, histogram of %q: want round trips", s.ModesOf, s.HistogramOf)
		}
	}
}

// Full-duplex traffic (a reader thread blocked in recv while a writer sends) allows no
// exchange inference: a warning replaces the round trips.
func TestRawFullDuplex(t *testing.T) {
	path := writeTrace(t, "duplex.plt", fixtures.Meta("ebpf", "raw"), func(w *trace.Writer) error {
		ts := int64(1e9)
		for k := 0; k < 10; k++ {
			evs := []trace.Event{
				{TS: ts, Dur: 50000, Dir: trace.DirRecv, TID: 8, Bytes: 64},       // the reader waits
				{TS: ts + 1000, Dur: 2000, Dir: trace.DirSend, TID: 7, Bytes: 64}, // the writer sends meanwhile
			}
			for j := range evs {
				e := &evs[j]
				e.PID, e.Conn, e.Source, e.Payload = 7, 1, trace.SourceEBPF, []byte("xx")
				if err := w.WriteEvent(e); err != nil {
					return err
				}
			}
			ts += 100000
		}
		return nil
	})
	s, err := Analyze(protocol.Files([]string{path}, nil), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.RoundTrips.Count != 0 || !hasWarning(s, "full-duplex") {
		t.Errorf("%d round trips, warnings %q; want none and a full-duplex warning", s.RoundTrips.Count, s.Warnings)
	}
}

func hasWarning(s *Summary, sub string) bool {
	for _, w := range s.Warnings {
		if strings.Contains(w, sub) {
			return true
		}
	}
	return false
}

// A server that traces itself (venus serve --trace) gets its service time: from the request
// frame's end to the reply frame's start, never the wait before the request.
func TestTracerServerService(t *testing.T) {
	path := writeTrace(t, "srv.plt", fixtures.Meta("tracer", "venus"), func(w *trace.Writer) error {
		ts := int64(1e9)
		for k := uint64(1); k <= 20; k++ {
			evs := []trace.Event{
				{TS: ts, Dur: 90000, Dir: trace.DirRecv, Op: trace.OpFrameRecv, Bytes: 40}, // waits 90 µs for the request
				{TS: ts + 95000, Dur: 2000, Dir: trace.DirSend, Op: trace.OpFrameSend, Bytes: 28},
			}
			for j := range evs {
				e := &evs[j]
				e.PID, e.Conn, e.Source, e.ReqID, e.Command = 7, 1, trace.SourceTracer, k, 21
				if err := w.WriteEvent(e); err != nil {
					return err
				}
			}
			ts += 200000
		}
		return nil
	})
	s, err := Analyze(protocol.Files([]string{path}, nil), Options{})
	if err != nil {
		t.Fatal(err)
	}
	rt := s.RoundTrips
	if rt.Served != 20 || rt.Count != 20 || rt.ServiceUS == nil || rt.ServiceUS.P50 != 5 || rt.ServiceToLastUS.P50 != 7 {
		t.Errorf("round trips %+v, want 20 served in 5 µs (7 to the last byte)", rt)
	}
}

// TestNetlinkNoRoundTrips: a netlink socket (glibc's getaddrinfo asks the kernel for the
// host's addresses before h2load or curl connects) is not a network: its query and answer
// count in the totals but are no round trip, and it is not called a connection of unknown
// protocol.
func TestNetlinkNoRoundTrips(t *testing.T) {
	path := writeTrace(t, "nl.plt", fixtures.Meta("ebpf", "test"), func(w *trace.Writer) error {
		if err := w.WriteConnection(&trace.Connection{ID: 1, Family: trace.FamilyNetlink, PID: 9}); err != nil {
			return err
		}
		if err := w.WriteConnection(&trace.Connection{ID: 2, Family: trace.FamilyTCP, PID: 9, Local: "127.0.0.1:1", Remote: "127.0.0.1:6379"}); err != nil {
			return err
		}
		ts, err := writeCalls(w, 1, 64, int64(1e6), ">"+strings.Repeat("\x00", 20), "<"+strings.Repeat("\x01", 416))
		if err != nil {
			return err
		}
		ping := "*1\r\n$4\r\nPING\r\n"
		_, err = writeCalls(w, 2, 64, ts, ">"+ping, "<+PONG\r\n", ">"+ping, "<+PONG\r\n")
		return err
	})
	s, err := Analyze(protocol.Files([]string{path}, nil), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.RoundTrips.Count != 2 || s.Totals.Send.Bytes != 20+2*14 {
		t.Errorf("round trips %d (want the 2 PINGs), bytes sent %d (want the netlink query's too)", s.RoundTrips.Count, s.Totals.Send.Bytes)
	}
	if !hasWarningWith(s, "1 netlink socket (") || hasWarningWith(s, "connections of unknown protocol") {
		t.Errorf("warnings %q", s.Warnings)
	}
	if len(s.Connections) == 0 || s.Connections[0].Family != "netlink" {
		t.Errorf("connections %+v", s.Connections)
	}
}
