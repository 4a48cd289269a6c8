package breakdown

import (
	"testing"

	"github.com/perflab/perflab/trace"
)

const srv = 1 << 40 // the server input's connection base in these tests

// twoEnds returns a Builder with one TCP connection seen from a client (input 0) and a server
// (input 1) whose clock is known to ±2 µs.
func twoEnds() *Builder {
	b := New([]trace.Clock{{Input: "c.plt", Host: "client", Peer: -1}, {Input: "s.plt", Host: "server", ConnBase: srv, OffsetLoNS: -2000, OffsetHiNS: 2000}})
	b.Conn(trace.Connection{ID: 1, Family: trace.FamilyTCP, Local: "10.0.0.1:40000", Remote: "10.0.0.2:5556"})
	b.Conn(trace.Connection{ID: srv | 1, Family: trace.FamilyTCP, Local: "[::ffff:10.0.0.2]:5556", Remote: "10.0.0.1:40000"})
	return b
}

// exchange adds one round trip: the client sends a request over [q0, q1] µs, the server reads it
// over [s0, s1] and replies over [r0, r1], the client reads the reply over [c0, c1].
func exchange(b *Builder, name string, q0, q1, s0, s1, r0, r1, c0, c1 int64) {
	const us = 1000
	b.Message(Msg{Conn: 1, Send: true, TS: q0 * us, End: q1 * us, Size: 100, Name: name, Unit: name == "open"})
	b.Message(Msg{Conn: srv | 1, TS: s0 * us, End: s1 * us, Size: 100, Name: name})
	b.Message(Msg{Conn: srv | 1, Send: true, TS: r0 * us, End: r1 * us, Size: 20, Name: name, Reply: true, ReqTS: s0 * us})
	b.Message(Msg{Conn: 1, TS: c0 * us, End: c1 * us, Size: 20, Name: name, Reply: true, ReqTS: q0 * us})
}

func TestSplit(t *testing.T) {
	b := twoEnds()
	// The server waits in its read: the request arrived when the read ended (50 µs after it was
	// sent); the client waits for the reply likewise (45 µs). The reply goes out slowly.
	exchange(b, "open", 1000, 1010, 500, 1060, 1100, 2050, 1012, 2095)
	// The client sends the next request while the server is still busy sending that reply; the
	// server comes to read it 90 µs after it was sent: it waited there since the fastest
	// one-way delay (50 µs), 40 µs of queue.
	exchange(b, "get", 2000, 2010, 2100, 2102, 2110, 2120, 2096, 2170)
	// The client is busy sending another request when the reply comes, and reads it late:
	// the 80 µs it lay there after the fastest one-way delay back (45 µs) are the client's.
	exchange(b, "get", 3000, 3010, 2900, 3060, 3070, 3080, 3200, 3205)
	const us = 1000
	b.Message(Msg{Conn: 1, Send: true, TS: 3100 * us, End: 3150 * us, Size: 100, Name: "put"})
	b.Message(Msg{Conn: srv | 1, TS: 3160 * us, End: 3170 * us, Size: 100, Name: "put"})
	// A connection recorded at one end only counts its messages once, splits nothing.
	b.Conn(trace.Connection{ID: 2, Family: trace.FamilyTCP, Local: "10.0.0.1:40001", Remote: "10.0.0.9:80"})
	b.Message(Msg{Conn: 2, Send: true, TS: 1, End: 2, Size: 10})
	r := b.Report("")

	want := []Parts{
		{RTT: 1095, Client: 10, NetOut: 50, Queue: 0, Service: 990, NetBack: 45},
		{RTT: 170, Client: 10, NetOut: 50, Queue: 40, Service: 20, NetBack: 50},
		{RTT: 205, Client: 10 + 80, NetOut: 50, Queue: 0, Service: 20, NetBack: 45},
	}
	got := map[float64]Parts{}
	for _, tr := range r.Slowest {
		got[tr.Parts.RTT] = tr.Parts
	}
	for _, w := range want {
		if g := got[w.RTT]; g != w {
			t.Errorf("round trip of %v µs: got %+v, want %+v", w.RTT, g, w)
		}
		if s := w.Client + w.NetOut + w.Queue + w.Service + w.NetBack; s != w.RTT {
			t.Fatalf("test case does not sum: %v", w)
		}
	}
	if r.Messages != 8 || r.BothEnds != 7 || r.RoundTrips != 3 || r.Unmatched != 0 {
		t.Errorf("messages %d (both ends %d), round trips %d (unmatched %d); want 8 (7), 3 (0)", r.Messages, r.BothEnds, r.RoundTrips, r.Unmatched)
	}
	if len(r.Commands) != 2 || r.Commands[1].Name != "get" || r.Commands[1].Count != 2 || r.Commands[1].Mean.RTT != 187.5 {
		t.Errorf("commands: %+v", r.Commands)
	}
	if len(r.Units) != 1 || r.Units[0].Count != 1 || r.Units[0].RoundTripsPerUnit != 3 || r.Units[0].PerUnit.RTT != 1470 {
		t.Errorf("units: %+v", r.Units)
	}
	if r.NetRTT != (Quantiles{P10: 95, P50: 95, P90: 100}) {
		t.Errorf("network RTT %+v, want 95, 95, 100", r.NetRTT)
	}
	if len(r.SlowestUnits) != 1 || len(r.SlowestUnits[0].Trips) != 3 || r.SlowestUnits[0].EndNS-r.SlowestUnits[0].StartNS != 2205e3 {
		t.Errorf("slowest units: %+v", r.SlowestUnits)
	}
	if r.ClockUS != 2 {
		t.Errorf("clock uncertainty %v µs, want 2", r.ClockUS)
	}
	if sh := r.NetworkShare(); sh < 0.197 || sh > 0.198 {
		t.Errorf("network share %v, want 290/1470", sh)
	}
}

func TestUnmatched(t *testing.T) {
	b := twoEnds()
	// The server's recording lacks the second request: the client's second round trip has no
	// server end.
	exchange(b, "a", 1000, 1010, 500, 1060, 1100, 1105, 1012, 1150)
	const us = 1000
	b.Message(Msg{Conn: 1, Send: true, TS: 2000 * us, End: 2010 * us, Size: 100, Name: "b"})
	b.Message(Msg{Conn: 1, TS: 2012 * us, End: 2150 * us, Size: 20, Name: "b", Reply: true, ReqTS: 2000 * us})
	r := b.Report("")
	if r.RoundTrips != 1 || r.Unmatched != 1 || len(r.Warnings) == 0 {
		t.Errorf("round trips %d, unmatched %d, warnings %q; want 1, 1, a warning", r.RoundTrips, r.Unmatched, r.Warnings)
	}
}

func TestNothingToSplit(t *testing.T) {
	b := New([]trace.Clock{{Input: "a", Peer: -1}, {Input: "b", ConnBase: srv}})
	r := b.Report("")
	if r.RoundTrips != 0 || len(r.Warnings) != 1 {
		t.Errorf("got %+v, want no round trips and one warning", r)
	}
}

// TestVisitorIdle: a Visitor is idle on every trace but the first merged one, the one it feeds.
func TestVisitorIdle(t *testing.T) {
	merged := trace.Meta{Clocks: []trace.Clock{{}, {}}}
	v := NewVisitor(nil)
	for i, c := range []struct {
		meta trace.Meta
		idle bool
	}{{trace.Meta{}, true}, {merged, false}, {merged, true}, {trace.Meta{}, true}} {
		v.Begin(i, "t.plt", c.meta)
		if v.Idle() != c.idle {
			t.Errorf("trace %d: Idle %v, want %v", i, v.Idle(), c.idle)
		}
	}
}
