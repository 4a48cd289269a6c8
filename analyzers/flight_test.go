package analyzers

import (
	"testing"

	"github.com/perflab/perflab/fixtures"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// TestInFlightOutOfOrder: round trips of one process complete in any order. A client whose
// second connection's reply came before its first's had two requests in flight; a server that
// read three clients' requests in one loop turn and answered the last read first (as Redis
// does) had three in service. Counting only the round trips completed before each one gave
// one at a time in both.
func TestInFlightOutOfOrder(t *testing.T) {
	const us = int64(1000)
	get := "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
	for _, c := range []struct {
		name    string
		reqDir  trace.Dir
		order   []uint64 // the connections' replies, in the order they are sent
		of      string
		wantMax int
		atLeast bool
	}{
		{"client, two connections, the second answered first", trace.DirSend, []uint64{2, 1}, "round trips", 2, false},
		{"server, three clients answered last read first", trace.DirRecv, []uint64{3, 2, 1}, "service", 3, false},
		{"client, 50 connections", trace.DirSend, reversed(50), "round trips", 50, false},
		{"client, 70 connections: more than perflab counts", trace.DirSend, reversed(70), "round trips", maxInFlightN, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			repDir := trace.DirRecv
			if c.reqDir == trace.DirRecv {
				repDir = trace.DirSend
			}
			path := writeTrace(t, "f.plt", fixtures.Meta("ebpf", "test"), func(w *trace.Writer) error {
				ts := int64(1e6)
				for round := 0; round < 20; round++ {
					for conn := uint64(1); conn <= uint64(len(c.order)); conn++ {
						ev := trace.Event{TS: ts, Dur: us / 2, PID: 9, TID: 9, Conn: conn, Dir: c.reqDir, Op: trace.OpWrite,
							Source: trace.SourceEBPF, Bytes: int64(len(get)), Payload: []byte(get)}
						if err := w.WriteEvent(&ev); err != nil {
							return err
						}
						ts += us
					}
					for _, conn := range c.order {
						ts += 3 * us
						ev := trace.Event{TS: ts, Dur: us / 2, PID: 9, TID: 9, Conn: conn, Dir: repDir, Op: trace.OpWrite,
							Source: trace.SourceEBPF, Bytes: 5, Payload: []byte("+OK\r\n")}
						if err := w.WriteEvent(&ev); err != nil {
							return err
						}
					}
					ts += 50 * us
				}
				return nil
			})
			s, err := Analyze(protocol.Files([]string{path}, nil), Options{Protocol: "resp"})
			if err != nil {
				t.Fatal(err)
			}
			if s.InFlight == nil || s.InFlight.Of != c.of || s.InFlight.Max != c.wantMax || s.InFlight.MaxAtLeast != c.atLeast {
				t.Fatalf("in flight %+v, want of %q, at most %d (at least: %v)", s.InFlight, c.of, c.wantMax, c.atLeast)
			}
			if warned := hasWarningWith(s, "the peak in flight and the batch model's largest N are lower bounds"); warned != c.atLeast {
				t.Errorf("warned of the count's limit: %v, want %v (%q)", warned, c.atLeast, s.Warnings)
			}
			peak := 0.0
			for _, p := range s.InFlight.Series {
				peak = max(peak, p.Value)
			}
			if int(peak) != c.wantMax {
				t.Errorf("the series' peak is %v, want %d", peak, c.wantMax)
			}
		})
	}
}

// reversed returns the connections n down to 1.
func reversed(n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(n - i)
	}
	return out
}
