package evidence

import (
	"math"
	"strings"
	"testing"

	"github.com/perflab/perflab/trace"
)

func runnable(tid uint32, from, dur int64, flags uint8) *trace.Event {
	return &trace.Event{TS: from, Dur: dur, PID: 1, TID: tid, Op: trace.OpRunnable, Source: trace.SourceEBPF,
		Payload: trace.AppendSchedInfo(nil, trace.SchedInfo{Flags: flags})}
}

func tcpEv(op trace.Op, conn uint64, ts int64, ti trace.TCPInfo) *trace.Event {
	return &trace.Event{TS: ts, PID: 1, Conn: conn, Op: op, Source: trace.SourceEBPF, Payload: trace.AppendTCPInfo(nil, ti)}
}

func cause(cs []Cause, name string) Cause {
	for _, c := range cs {
		if c.Cause == name {
			return c
		}
	}
	return Cause{}
}

// TestAttribution splits round trips whose thread was woken on an idle CPU, behind another
// thread, not at all, and one that waited for a retransmission.
func TestAttribution(t *testing.T) {
	const us = int64(1000)
	cases := []struct {
		name   string
		events []*trace.Event
		rt     RoundTrip
		want   map[string]float64 // mean µs by cause
	}{
		{"idle CPU", []*trace.Event{runnable(7, 50*us, 30*us, trace.SchedIdle)},
			RoundTrip{Conn: 1, TID: 7, Command: "get", ReqTS: 0, ReqEnd: 10 * us, End: 90 * us},
			map[string]float64{CauseSend: 10, CauseWaiting: 40, CauseWakeup: 30, CauseRunQueue: 0, CauseRead: 10}},
		{"busy CPU and a preemption", []*trace.Event{runnable(7, 50*us, 20*us, 0), runnable(7, 75*us, 5*us, trace.SchedPreempted)},
			RoundTrip{Conn: 1, TID: 7, Command: "get", ReqTS: 0, ReqEnd: 10 * us, End: 90 * us},
			map[string]float64{CauseSend: 10, CauseWaiting: 40, CauseRunQueue: 25, CauseRead: 15}},
		{"no wake-up", nil,
			RoundTrip{Conn: 1, TID: 7, Command: "get", ReqTS: 0, ReqEnd: 10 * us, End: 90 * us},
			map[string]float64{CauseSend: 10, CauseWaiting: 80}},
		{"retransmission", []*trace.Event{tcpEv(trace.OpTCPRetransmit, 1, 60*us, trace.TCPInfo{State: trace.TCPEstablished}), runnable(7, 70*us, 10*us, trace.SchedIdle)},
			RoundTrip{Conn: 1, TID: 7, Command: "get", ReqTS: 0, ReqEnd: 10 * us, End: 90 * us},
			map[string]float64{CauseSend: 10, CauseRetransmit: 50, CauseWaiting: 10, CauseWakeup: 10, CauseRead: 10}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := New()
			a.Begin(0)
			for _, e := range c.events {
				a.Event(e)
			}
			a.RoundTrip(&c.rt)
			r := a.Result(Unit{})
			if r.Attribution == nil || r.Attribution.RoundTrips != 1 {
				t.Fatalf("attribution %+v", r.Attribution)
			}
			for _, name := range Causes {
				if got := cause(r.Attribution.Causes, name).MeanUS; math.Abs(got-c.want[name]) > 0.05 {
					t.Errorf("%s: %.1f µs, want %.1f", name, got, c.want[name])
				}
			}
			if len(r.Attribution.Commands) != 1 || r.Attribution.Commands[0].Command != "get" {
				t.Errorf("commands %+v", r.Attribution.Commands)
			}
		})
	}
}

// TestClientTime: the gap since the previous round trip on the connection is the client's.
func TestClientTime(t *testing.T) {
	a := New()
	a.Begin(0)
	a.RoundTrip(&RoundTrip{Conn: 1, TID: 7, ReqTS: 0, ReqEnd: 1000, End: 5000})
	a.RoundTrip(&RoundTrip{Conn: 1, TID: 7, ReqTS: 25000, ReqEnd: 26000, End: 30000})
	r := a.Result(Unit{})
	if got := cause(r.Attribution.Causes, CauseClient).TotalUS; got != 20 {
		t.Errorf("client time %.1f µs, want 20", got)
	}
}

func kinds(fs []Finding) map[string]Finding {
	m := map[string]Finding{}
	for _, f := range fs {
		m[f.Kind] = f
	}
	return m
}

// TestFindings makes each finding from the pattern it names, and none from a clean exchange.
func TestFindings(t *testing.T) {
	const ms = int64(1e6)
	cases := []struct {
		name string
		feed func(a *Analyzer)
		unit Unit
		want string
	}{
		{"clean", func(a *Analyzer) {
			for i := int64(0); i < 200; i++ {
				a.Request(&Request{Conn: 1, Command: []string{"a", "b"}[i%2], Calls: 1, TS: i * ms, End: i*ms + 1000, WantsReply: true})
				a.RoundTrip(&RoundTrip{Conn: 1, TID: 1, Command: []string{"a", "b"}[i%2], ReqTS: i * ms, ReqEnd: i*ms + 1000, End: i*ms + 50000})
			}
			a.SetInFlight(3)
		}, Unit{}, ""},
		{"split writes", func(a *Analyzer) {
			for i := int64(0); i < 100; i++ {
				a.Request(&Request{Conn: 1, Command: "GRAPH_COMPUTE", Calls: 3, TS: i * ms, End: i*ms + 1000})
			}
		}, Unit{Name: "token", Count: 100, RequestsPerUnit: 1}, "split_writes"},
		{"polling", func(a *Analyzer) {
			for i := int64(0); i < 300; i++ {
				ts := i * 100000 // 10,000/s
				a.Request(&Request{Conn: 1, Command: "vkGetFenceStatus", Calls: 1, TS: ts, End: ts + 1000, WantsReply: true, Digest: 7})
				a.RoundTrip(&RoundTrip{Conn: 1, TID: 1, Command: "vkGetFenceStatus", ReqTS: ts, ReqEnd: ts + 1000, End: ts + 50000, Size: 24})
			}
			a.SetInFlight(3)
		}, Unit{}, "polling_storm"},
		{"40 ms steps", func(a *Analyzer) {
			for i := int64(0); i < 50; i++ {
				d := 100 * int64(1000)
				if i%5 == 0 {
					d = 40*ms + 300000
				}
				a.RoundTrip(&RoundTrip{Conn: 1, TID: 1, Command: "set", ReqTS: i * 100 * ms, ReqEnd: i*100*ms + 1000, End: i*100*ms + d})
			}
		}, Unit{}, "nagle_delayed_ack"},
		{"EAGAIN", func(a *Analyzer) {
			for i := int64(0); i < 2000; i++ {
				a.Event(&trace.Event{TS: i, Conn: 1, Dir: trace.DirRecv, Op: trace.OpRead, Errno: 11})
				if i%2 == 0 {
					a.Event(&trace.Event{TS: i, Conn: 1, Dir: trace.DirRecv, Op: trace.OpRead, Bytes: 10})
				}
			}
		}, Unit{}, "eagain_storm"},
		{"churn", func(a *Analyzer) {
			for c := uint64(1); c <= 30; c++ {
				ts := int64(c) * ms
				a.Event(tcpEv(trace.OpTCPState, c, ts, trace.TCPInfo{OldState: trace.TCPClose, State: trace.TCPSynSent}))
				a.Event(tcpEv(trace.OpTCPState, c, ts+50000, trace.TCPInfo{OldState: trace.TCPSynSent, State: trace.TCPEstablished}))
				a.Event(&trace.Event{TS: ts + 60000, Conn: c, Dir: trace.DirSend, Op: trace.OpWrite, Bytes: 10})
				a.Request(&Request{Conn: c, Command: "GET", Calls: 1, TS: ts + 60000, End: ts + 61000, WantsReply: true})
				a.Event(tcpEv(trace.OpTCPState, c, ts+90000, trace.TCPInfo{OldState: trace.TCPEstablished, State: trace.TCPFinWait1}))
				a.Event(tcpEv(trace.OpTCPState, c, ts+95000, trace.TCPInfo{OldState: trace.TCPFinWait2, State: trace.TCPClose}))
			}
		}, Unit{}, "reconnection_churn"},
		{"serial", func(a *Analyzer) {
			for i := int64(0); i < 200; i++ {
				a.RoundTrip(&RoundTrip{Conn: 1, TID: 1, Command: []string{"a", "b"}[i%2], ReqTS: i * ms, ReqEnd: i*ms + 1000, End: i*ms + 900000})
			}
			a.SetInFlight(1)
		}, Unit{}, "serial_round_trips"},
		{"wake-up", func(a *Analyzer) {
			for i := int64(0); i < 100; i++ {
				ts := i * ms
				a.Event(runnable(1, ts+20000, 30000, trace.SchedIdle))
				a.RoundTrip(&RoundTrip{Conn: 1, TID: 1, Command: []string{"a", "b"}[i%2], ReqTS: ts, ReqEnd: ts + 1000, End: ts + 60000})
			}
			a.SetInFlight(3)
		}, Unit{}, "wakeup_delay"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := New()
			a.Begin(0)
			c.feed(a)
			r := a.Result(c.unit)
			got := kinds(r.Findings)
			if c.want == "" {
				if len(r.Findings) > 0 {
					t.Errorf("findings in a clean exchange: %+v", r.Findings)
				}
				return
			}
			f, ok := got[c.want]
			if !ok {
				t.Fatalf("no %s finding in %+v", c.want, r.Findings)
			}
			if f.Title == "" || f.Evidence == "" || f.Cost == "" || f.Fix == "" || f.Unit == "" {
				t.Errorf("incomplete finding %+v", f)
			}
			t.Logf("%s: %s; %s; %s", f.Title, f.Evidence, f.Cost, f.Fix)
		})
	}
}

// TestPollingRules: a poll is the same request (command, size and captured bytes), asking for
// something, sent again once the previous one's reply is in, and answered alike every time;
// each rule broken leaves the finding out.
func TestPollingRules(t *testing.T) {
	const us = int64(1000)
	type req struct {
		cmd       string
		size      int64
		digest    uint64
		replySize int64
	}
	same := func(r req) func(i int64) req { return func(int64) req { return r } }
	cases := []struct {
		name      string
		next      func(i int64) req
		pipelined bool // every request goes out before the previous reply is in
		want      bool
	}{
		{"status asked again", same(req{"GET_DEVICE_MEMORY", 13, 5, 16}), false, true},
		{"redis GET of one key", same(req{"GET", 36, 5, 9}), false, true},
		{"a write repeated", same(req{"SET", 45, 5, 5}), false, false},
		{"Vulkan submit repeated", same(req{"vkQueueSubmit", 64, 5, 16}), false, false},
		{"pipelined", same(req{"GET", 36, 5, 9}), true, false},
		{"keys of one size", func(i int64) req { return req{"get", 20, uint64(100 + i), 30} }, false, false},
		{"bytes not seen", same(req{"GET", 36, 0, 9}), false, false},
		{"replies of different sizes", func(i int64) req { return req{"GET", 36, 5, 9 + i%3} }, false, false},
		{"sizes alternate", func(i int64) req { return req{"GET", 36 + i%2, 5, 9} }, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := New()
			a.Begin(0)
			const n = 300
			for i := int64(0); i < n; i++ {
				r := c.next(i)
				ts := i * 100 * us
				if c.pipelined {
					ts = i * 10 * us // 10 requests out before the first reply is in
				}
				a.Request(&Request{Conn: 1, Command: r.cmd, Size: r.size, Digest: r.digest, Calls: 1, TS: ts, End: ts + us, WantsReply: true})
				if !c.pipelined {
					a.RoundTrip(&RoundTrip{Conn: 1, TID: 1, Command: r.cmd, ReqTS: ts, ReqEnd: ts + us, End: ts + 50*us, Size: r.replySize})
				}
			}
			if c.pipelined {
				for i := int64(0); i < n; i++ {
					ts := i * 10 * us
					a.RoundTrip(&RoundTrip{Conn: 1, TID: 1, Command: "GET", ReqTS: ts, ReqEnd: ts + us, End: ts + 100*us, Size: 9})
				}
			}
			_, got := kinds(a.Result(Unit{}).Findings)["polling_storm"]
			if got != c.want {
				t.Errorf("polling_storm found %v, want %v", got, c.want)
			}
		})
	}
}

func TestQueryLike(t *testing.T) {
	for name, want := range map[string]bool{
		"vkGetFenceStatus": true, "vkGetQueryPoolResults": true, "GET_DEVICE_MEMORY": true, "GET": true, "get": true,
		"gets": true, "HEAD": true, "EXISTS": true, "LLEN": true, "HGETALL": true, "isReady": true, "queue_status": true,
		"SET": false, "set": false, "vkQueueSubmit": false, "POST": false, "SET_TENSOR": false, "GRAPH_COMPUTE": false,
		"": false, "12": false, "GETSET": false, "GETDEL": false,
	} {
		if got := queryLike(name); got != want {
			t.Errorf("queryLike(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestSplitWritesPerToken: three calls per message, one message per token: two calls per
// token saved.
func TestSplitWritesPerToken(t *testing.T) {
	a := New()
	a.Begin(0)
	for i := int64(0); i < 64; i++ {
		a.Request(&Request{Conn: 1, Command: "GRAPH_COMPUTE", Calls: 3, TS: i, End: i + 1})
	}
	f := kinds(a.Result(Unit{Name: "token", Count: 64, RequestsPerUnit: 1}).Findings)["split_writes"]
	if f.CallsPerUnit != 2 || f.Unit != "token" {
		t.Errorf("split writes: %v calls per %s, want 2 per token", f.CallsPerUnit, f.Unit)
	}
}

// TestTCPStats: connect latency, lifetime and the last state of a connection.
func TestTCPStats(t *testing.T) {
	a := New()
	a.Begin(0)
	a.Connection(&trace.Connection{ID: 4, Family: trace.FamilyTCP, Local: "127.0.0.1:1", Remote: "127.0.0.1:2", PID: 9})
	a.Event(tcpEv(trace.OpTCPState, 4, 1000, trace.TCPInfo{OldState: trace.TCPClose, State: trace.TCPSynSent}))
	a.Event(tcpEv(trace.OpTCPState, 4, 81000, trace.TCPInfo{OldState: trace.TCPSynSent, State: trace.TCPEstablished, SRTTus: 30}))
	a.Event(tcpEv(trace.OpTCPInfo, 4, 90000, trace.TCPInfo{State: trace.TCPEstablished, SRTTus: 40, Cwnd: 10, SndWnd: 0, BytesAcked: 100}))
	a.Event(tcpEv(trace.OpTCPState, 4, 5e6+1000, trace.TCPInfo{OldState: trace.TCPLastAck, State: trace.TCPClose, BytesAcked: 500, BytesReceived: 700}))
	r := a.Result(Unit{})
	if r.Setup == nil || r.Setup.Connects != 1 || r.Setup.P50US != 80 {
		t.Errorf("setup %+v, want 1 connect of 80 µs", r.Setup)
	}
	if len(r.Lifetimes) != 1 || r.Lifetimes[0].LifeMS != 5 || r.Lifetimes[0].TxBytes != 500 || r.Lifetimes[0].ConnectUS != 80 {
		t.Errorf("lifetimes %+v", r.Lifetimes)
	}
	if len(r.TCP) != 1 || r.TCP[0].ZeroWindows != 1 || r.TCP[0].State != "CLOSE" || r.TCP[0].Local != "127.0.0.1:1" {
		t.Errorf("tcp %+v", r.TCP)
	}
	if len(r.Parts) != 2 {
		t.Errorf("parts %v, want tcp and conn", r.Parts)
	}
}

// TestPollFix: the fix speaks the poll's protocol: Vulkan's wait for a vk command, none of
// Vulkan's names for another.
func TestPollFix(t *testing.T) {
	if f := pollFix("vkGetFenceStatus"); !strings.Contains(f, "vkWaitForFences") {
		t.Errorf("vkGetFenceStatus: %q", f)
	}
	if f := pollFix("GET"); strings.Contains(f, "vk") || !strings.Contains(f, "long poll") {
		t.Errorf("GET: %q", f)
	}
}

// TestBlockingLeftOut: a client's round trips of commands that block by design (BLPOP waiting
// for an element) are no serial round trips that pipelining would overlap: the finding leaves
// them out of its count and cost and says so, and with too few others left, there is none.
func TestBlockingLeftOut(t *testing.T) {
	const ms = int64(1e6)
	blpop := RoundTrip{Command: "BLPOP"}
	feed := func(fast int, slow RoundTrip) *Analyzer {
		a := New()
		a.Begin(0)
		ts := int64(0)
		for i := 0; i < fast; i++ {
			a.RoundTrip(&RoundTrip{Conn: 1, TID: 1, Command: "GET", ReqTS: ts, ReqEnd: ts + 1000, End: ts + 9000})
			ts += 10000
		}
		for i := 0; i < 5; i++ {
			a.RoundTrip(&RoundTrip{Conn: 1, TID: 1, Command: slow.Command, Blocks: slow.Blocks, ReqTS: ts, ReqEnd: ts + 1000, End: ts + 300*ms})
			ts += 301 * ms
		}
		a.SetInFlight(1)
		return a
	}
	f, ok := kinds(feed(100, blpop).Result(Unit{}).Findings)["serial_round_trips"]
	if !ok {
		t.Fatal("no serial_round_trips finding for 100 serial GETs")
	}
	if !strings.Contains(f.Evidence, "100 round trips, one at a time") || !strings.Contains(f.Evidence, "5 round trips of commands that block by design (BLPOP)") {
		t.Errorf("evidence %q", f.Evidence)
	}
	if f.CostUSPerUnit > 10 { // the GETs' 8 µs of waiting, not the BLPOPs' 300 ms
		t.Errorf("cost %.1f µs per round trip, want the GETs' 8", f.CostUSPerUnit)
	}
	if _, ok := kinds(feed(95, blpop).Result(Unit{}).Findings)["serial_round_trips"]; ok {
		t.Error("serial_round_trips finding from 95 GETs and 5 BLPOPs: the BLPOPs counted")
	}
	// XREAD blocks by its BLOCK argument, which the decoder marks; without it XREAD is a read
	f, ok = kinds(feed(100, RoundTrip{Command: "XREAD", Blocks: true}).Result(Unit{}).Findings)["serial_round_trips"]
	if !ok || !strings.Contains(f.Evidence, "5 round trips of commands that block by design (XREAD BLOCK)") || f.CostUSPerUnit > 10 {
		t.Errorf("XREAD BLOCK: finding %v %+v", ok, f)
	}
	if _, ok := kinds(feed(95, RoundTrip{Command: "XREAD", Blocks: true}).Result(Unit{}).Findings)["serial_round_trips"]; ok {
		t.Error("serial_round_trips finding from 95 GETs and 5 XREAD BLOCKs: the XREADs counted")
	}
	if _, ok := kinds(feed(95, RoundTrip{Command: "XREAD"}).Result(Unit{}).Findings)["serial_round_trips"]; !ok {
		t.Error("no serial_round_trips finding from 95 GETs and 5 slow XREADs without BLOCK")
	}
	for _, c := range []struct {
		name string
		want bool
	}{{"BLPOP", true}, {"brpop", true}, {"BZPOPMIN", true}, {"WAIT", true}, {"GET", false}, {"XREAD", false}, {"LPOP", false}} {
		if blocking(c.name) != c.want {
			t.Errorf("blocking(%q) = %v, want %v", c.name, !c.want, c.want)
		}
	}
}

// TestNagleSteps: the round trips of a real client that wrote each memcached set in two calls
// without TCP_NODELAY (ms; recorded against Debian's memcached on loopback): all but the first
// waited for the delayed ACK, which fired at 41-52 ms, not at 40±6. Every one of them is
// counted, and the cost is their time, not 40 ms each.
func TestNagleSteps(t *testing.T) {
	rtts := []float64{0.1, 41.1, 41.9, 42.0, 43.3, 43.5, 43.8, 43.8, 43.9, 43.9, 43.9, 43.9, 43.9, 43.9, 43.9, 43.9,
		43.9, 43.9, 43.9, 43.9, 43.9, 43.9, 43.9, 43.9, 43.9, 43.9, 43.9, 44.0, 44.0, 44.0, 44.0, 44.0, 44.0, 44.0,
		44.0, 44.0, 44.1, 44.1, 44.2, 45.9, 47.6, 47.8, 47.9, 47.9, 47.9, 47.9, 47.9, 47.9, 47.9, 47.9, 47.9, 48.0,
		48.0, 48.0, 48.0, 48.0, 48.3, 48.6, 50.0, 51.7}
	const ms = 1e6
	a := New()
	a.Begin(0)
	var ts, sum int64
	for i, r := range rtts {
		d := int64(r * ms)
		if i > 0 {
			sum += d
		}
		a.RoundTrip(&RoundTrip{Conn: 1, TID: 1, Command: "set", ReqTS: ts, ReqEnd: ts + 1000, End: ts + d})
		ts += d + ms
	}
	f, ok := kinds(a.Result(Unit{}).Findings)["nagle_delayed_ack"]
	if !ok {
		t.Fatal("no nagle_delayed_ack finding")
	}
	if !strings.HasPrefix(f.Title, "59 round trips") {
		t.Errorf("title %q, want all 59 stalled round trips", f.Title)
	}
	if want := float64(sum) / 1e3 / float64(len(rtts)); math.Abs(f.CostUSPerUnit-want) > 0.01*want {
		t.Errorf("cost %.1f µs per round trip, want their time, %.1f", f.CostUSPerUnit, want)
	}
	// 30 ms or 60 ms is no delayed ACK
	b := New()
	b.Begin(0)
	for i := int64(0); i < 50; i++ {
		b.RoundTrip(&RoundTrip{Conn: 1, TID: 1, Command: "set", ReqTS: i * 100 * ms, ReqEnd: i*100*ms + 1000, End: i*100*ms + 30*ms + i%2*30*ms})
	}
	if _, ok := kinds(b.Result(Unit{}).Findings)["nagle_delayed_ack"]; ok {
		t.Error("round trips of 30 and 60 ms taken for delayed ACKs")
	}
}
