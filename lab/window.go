package lab

import (
	"math"
	"sort"

	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// roundTrip is one of the client's round trips in a point's trace: the request's first byte
// out (Start) to the reply's last byte in (End), ns, on connection Conn, by thread TID.
type roundTrip struct {
	Start, End int64
	Conn       uint64
	TID        uint32
}

// waitCalls sums one client thread's wait calls: how many, their time, and the span from the
// first one's start to the last one's end, ns.
type waitCalls struct {
	calls       int64
	waitNS      int64
	first, last int64
}

// pointScan is what one pass over a point's trace collects: the client's round trips, the
// server's residence per request, the commands the server received, and the client threads'
// wait calls.
type pointScan struct {
	server   map[uint32]bool
	trips    []roundTrip
	commands map[string]int64
	resNS    float64 // sum of the server's residences: its request's first read to its reply's last byte
	res      int64   // replies the server sent with a paired request
	waits    map[uint32]*waitCalls
}

func (s *pointScan) Begin(int, string, trace.Meta)                 {}
func (s *pointScan) Answered(*protocol.Message, protocol.Answered) {}
func (s *pointScan) End(int, trace.Recovery, *protocol.Decoder)    {}

func (s *pointScan) Record(rec *trace.Record) {
	if rec.Kind != trace.KindEvent {
		return
	}
	ev := &rec.Event
	if !ev.Op.IsWait() || s.server[ev.PID] {
		return
	}
	w := s.waits[ev.TID]
	if w == nil {
		w = &waitCalls{first: ev.TS}
		s.waits[ev.TID] = w
	}
	w.calls++
	w.waitNS += ev.Dur
	w.first = min(w.first, ev.TS)
	w.last = max(w.last, ev.TS+ev.Dur)
}

func (s *pointScan) Message(m *protocol.Message) {
	if s.server[m.PID] {
		switch {
		case m.Dir == trace.DirRecv && !m.IsReply && m.Name != "":
			s.commands[m.Name]++
		case m.Dir == trace.DirSend && m.IsReply && m.ReqTS > 0 && m.End > m.ReqTS:
			s.resNS += float64(m.End - m.ReqTS)
			s.res++
		}
		return
	}
	if !m.IsReply || m.RTT <= 0 || m.Dir != trace.DirRecv {
		return
	}
	s.trips = append(s.trips, roundTrip{Start: m.ReqTS, End: m.ReqTS + m.RTT, Conn: m.Conn, TID: m.TID})
}

// Window is the span of a point's trace over which L, λ and W are taken, and what they are
// there (from the trace alone).
type Window struct {
	// Seconds is the window's length; RoundTrips the round trips in it.
	Seconds    float64 `json:"s"`
	RoundTrips int64   `json:"round_trips"`
	// InflightMean is L: the time the round trips spent in flight inside the window over its
	// length; ThroughputPerS the round trips that ended in it per second; RTTMeanUS the mean
	// RTT of those.
	InflightMean   float64 `json:"inflight_mean"`
	ThroughputPerS float64 `json:"throughput_per_s"`
	RTTMeanUS      float64 `json:"rtt_mean_us"`
}

// loadConns returns the connections of the closed loop: the clients connections that carried
// the most round trips (a benchmark's own set-up, such as redis-benchmark's CONFIG GETs or a
// client's first SET on a connection of its own, is left out), or all when there are no more.
func loadConns(trips []roundTrip, clients int) map[uint64]bool {
	count := map[uint64]int{}
	first := map[uint64]int64{}
	for _, rt := range trips {
		if _, ok := first[rt.Conn]; !ok {
			first[rt.Conn] = rt.Start
		}
		count[rt.Conn]++
	}
	ids := make([]uint64, 0, len(count))
	for id := range count {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		if count[ids[i]] != count[ids[j]] {
			return count[ids[i]] > count[ids[j]]
		}
		return first[ids[i]] < first[ids[j]]
	})
	if clients > 0 && len(ids) > clients {
		ids = ids[:clients]
	}
	out := make(map[uint64]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out
}

// loadWindow is the closed loop's whole run: from the first request of its connections to
// their last reply, the window a closed-loop benchmark times (redis-benchmark starts its clock
// after connecting its clients and stops it at the last reply). Every round trip of the load
// lies inside it, so L is their RTTs summed over its length.
func loadWindow(trips []roundTrip, load map[uint64]bool) (Window, [2]int64) {
	var from, to int64
	var sum float64
	var n int64
	for _, rt := range trips {
		if !load[rt.Conn] {
			continue
		}
		if n == 0 || rt.Start < from {
			from = rt.Start
		}
		to = max(to, rt.End)
		sum += float64(rt.End - rt.Start)
		n++
	}
	w := Window{RoundTrips: n}
	if n == 0 || to <= from {
		return w, [2]int64{}
	}
	span := float64(to - from)
	w.Seconds = round6(span / 1e9)
	w.InflightMean = round3(sum / span)
	w.ThroughputPerS = math.Round(float64(n) / span * 1e9)
	w.RTTMeanUS = round3(sum / float64(n) / 1e3)
	return w, [2]int64{from, to}
}

// steadyWindow is the part of the run where every connection of the load is active: from the
// last connection's first request to the first connection's last reply (a closed loop's
// clients start one after another and finish at different times; outside this window fewer
// than all are in flight). L there is the round trips' time inside the window over its length,
// λ the round trips that ended in it, W their mean RTT. ok is false when no such window exists.
func steadyWindow(trips []roundTrip, load map[uint64]bool) (w Window, ok bool) {
	firsts := map[uint64]int64{}
	lasts := map[uint64]int64{}
	for _, rt := range trips {
		if !load[rt.Conn] {
			continue
		}
		if f, seen := firsts[rt.Conn]; !seen || rt.Start < f {
			firsts[rt.Conn] = rt.Start
		}
		lasts[rt.Conn] = max(lasts[rt.Conn], rt.End)
	}
	if len(firsts) == 0 {
		return w, false
	}
	var from int64
	to := int64(math.MaxInt64)
	for c, f := range firsts {
		from = max(from, f)
		to = min(to, lasts[c])
	}
	if to <= from {
		return w, false
	}
	var inside, sum float64
	var n int64
	for _, rt := range trips {
		if !load[rt.Conn] {
			continue
		}
		if s, e := max(rt.Start, from), min(rt.End, to); e > s {
			inside += float64(e - s)
		}
		if rt.End > from && rt.End <= to {
			sum += float64(rt.End - rt.Start)
			n++
		}
	}
	if n == 0 {
		return w, false
	}
	span := float64(to - from)
	return Window{Seconds: round6(span / 1e9), RoundTrips: n, InflightMean: round3(inside / span),
		ThroughputPerS: math.Round(float64(n) / span * 1e9), RTTMeanUS: round3(sum / float64(n) / 1e3)}, true
}

// clientLoop finds the client's event-loop thread: the thread that received at least
// clientLoopShare of the load's replies and made at least one wait call per ten of them. Its
// busy time is its span between its first and last wait calls minus the time inside them.
func clientLoop(trips []roundTrip, load map[uint64]bool, waits map[uint32]*waitCalls) *ClientLoop {
	per := map[uint32]int64{}
	var all int64
	for _, rt := range trips {
		if load[rt.Conn] {
			per[rt.TID]++
			all++
		}
	}
	for tid, n := range per {
		w := waits[tid]
		if w == nil || float64(n) < clientLoopShare*float64(all) || w.calls*10 < n || w.last <= w.first {
			continue
		}
		busy := float64(w.last-w.first-w.waitNS) / 1e3
		if busy <= 0 {
			continue
		}
		return &ClientLoop{TID: tid, Cycles: w.calls, Replies: n, BusyUS: round3(busy / float64(w.calls)),
			RepliesPerCycle: round3(float64(n) / float64(w.calls)), BusyPerReplyUS: round3(busy / float64(n)),
			Utilization: math.Round(busy*1e3/float64(w.last-w.first)*1e4) / 1e4}
	}
	return nil
}

// clientLoopShare is the share of the load's replies one client thread must receive to be
// taken as the client's event loop (a single-threaded benchmark such as redis-benchmark).
const clientLoopShare = 0.9

// ClientLoop is the client's own event loop in a point's trace, when it has one: its thread,
// its cycles (wait calls) and the load's replies it received, the mean busy time of a cycle
// (its time outside the wait calls), replies per cycle, busy time per reply (µs), and its busy
// share of its time (a thread that waits for a processor is busy for this count).
type ClientLoop struct {
	TID             uint32  `json:"tid"`
	Cycles          int64   `json:"cycles"`
	Replies         int64   `json:"replies"`
	BusyUS          float64 `json:"busy_us"`
	RepliesPerCycle float64 `json:"replies_per_cycle"`
	BusyPerReplyUS  float64 `json:"busy_per_reply_us"`
	Utilization     float64 `json:"utilization"`
}

func round6(v float64) float64 { return math.Round(v*1e6)/1e6 + 0 }
