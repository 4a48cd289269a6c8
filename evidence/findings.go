package evidence

import (
	"fmt"
	"sort"
	"strings"
)

// writeStats counts the system calls that carried each request.
type writeStats struct {
	requests, multi, extra uint64
	byCmd                  map[string]*writeAgg
	order                  []string
	lastName               string    // the command of the latest request,
	last                   *writeAgg // and its aggregate: requests come in runs of one command
}

type writeAgg struct {
	requests, multi, extra uint64
	maxCalls               int
	sendNS                 float64 // time inside the requests written with several calls
}

// pollRun is the run of identical requests (one command, size and digest) a connection is in.
type pollRun struct {
	cmd        string
	size       int64  // bytes of each request of the run
	digest     uint64 // of each request's captured bytes, 0 when none were seen
	n          uint64
	from, last int64
	replySize  int64 // of the run's first reply, -1 before it
	sameReply  bool
	rttNS      float64
	waiting    int  // requests of the run sent and not yet answered
	pipelined  bool // a request of the run went out before the previous one's reply came back
}

// pollStats sums the runs of a command repeated back to back on one connection.
type pollStats struct {
	runs  map[uint64]*pollRun // per connection of the current trace
	byCmd map[string]*pollAgg
}

type pollAgg struct {
	runs, requests, longest uint64
	spanNS, rttNS           float64
	replySize               int64
}

// minPollRun is the fewest identical requests back to back that count as polling.
const minPollRun = 20

// Request notes a request a client sent: how many calls wrote it, and whether it repeats the
// connection's previous request (the same bytes: polling, if the replies agree).
func (a *Analyzer) Request(r *Request) {
	w := &a.writes
	w.requests++
	cs := a.lookup(r.Conn)
	if cs != nil {
		cs.requests++
	}
	name := cmdName(r.Command)
	wa := w.last
	if wa == nil || name != w.lastName {
		if wa = w.byCmd[name]; wa == nil {
			if len(w.byCmd) >= maxCmdAttr {
				return
			}
			wa = &writeAgg{}
			w.byCmd[name] = wa
			w.order = append(w.order, name)
		}
		w.lastName, w.last = name, wa
	}
	wa.requests++
	if r.Calls > 1 {
		w.multi++
		w.extra += uint64(r.Calls - 1)
		wa.multi++
		wa.extra += uint64(r.Calls - 1)
		wa.maxCalls = max(wa.maxCalls, r.Calls)
		wa.sendNS += float64(r.End - r.TS)
	}
	if r.Command == "" || !r.WantsReply {
		return
	}
	p := a.polls.run(cs, r.Conn)
	if p == nil {
		if len(a.polls.runs) >= maxConns {
			return
		}
		p = &pollRun{}
		a.polls.runs[r.Conn] = p
		if cs != nil {
			cs.poll = p
		}
	}
	if p.cmd != r.Command || p.size != r.Size || p.digest != r.Digest {
		a.polls.close(p)
		*p = pollRun{cmd: r.Command, size: r.Size, digest: r.Digest, from: r.TS, replySize: -1, sameReply: true}
	}
	if p.waiting > 0 {
		p.pipelined = true
	}
	p.waiting++
	p.n++
	p.last = r.TS
}

// reply notes the reply to a request of a run.
func (ps *pollStats) reply(cs *connState, rt *RoundTrip) {
	p := ps.run(cs, rt.Conn)
	if p == nil || p.cmd != rt.Command {
		return
	}
	p.waiting = max(0, p.waiting-1)
	if p.replySize < 0 {
		p.replySize = rt.Size
	} else if rt.Size != p.replySize {
		p.sameReply = false
	}
	p.rttNS += float64(rt.End - rt.ReqTS)
}

// run returns the run of connection id (whose state is cs, or nil), nil when it has none.
func (ps *pollStats) run(cs *connState, id uint64) *pollRun {
	if cs != nil && cs.poll != nil {
		return cs.poll
	}
	p := ps.runs[id]
	if cs != nil {
		cs.poll = p
	}
	return p
}

// close counts run p, if it was a poll: at least minPollRun requests with the same bytes (as far
// as they were captured, so never a run whose bytes were not seen) of a command that asks for
// something (queryLike), each sent after the previous one's reply (a client that sends before
// the answer is in is streaming, not asking again), all answered by replies of one size (the
// answer looked the same every time).
func (ps *pollStats) close(p *pollRun) {
	if p.n < minPollRun || p.digest == 0 || p.pipelined || !p.sameReply || p.replySize < 0 || !queryLike(p.cmd) {
		return
	}
	g := ps.byCmd[p.cmd]
	if g == nil {
		if len(ps.byCmd) >= maxCmdAttr {
			return
		}
		g = &pollAgg{replySize: p.replySize}
		ps.byCmd[p.cmd] = g
	}
	g.runs++
	g.requests += p.n
	g.longest = max(g.longest, p.n)
	g.spanNS += float64(p.last - p.from)
	g.rttNS += p.rttNS
	if p.replySize != g.replySize {
		g.replySize = -1 // runs answered by replies of different sizes
	}
}

// pollFix is the polling finding's fix, in the terms of the command's protocol as far as its
// name tells it.
func pollFix(name string) string {
	if strings.HasPrefix(name, "vk") {
		return "wait instead of polling: a blocking wait on the server side (vkWaitForFences rather than vkGetFenceStatus in a loop), an event or fd the client sleeps on, or at least a back-off between polls"
	}
	return "wait instead of polling: a request that blocks on the server until the answer changes (a long poll; a blocking read such as Redis's BLPOP), a notification the client sleeps on (publish/subscribe, an event or fd), or at least a back-off between polls; an answer that never changes can be kept by the client"
}

// queryLike reports whether a command's name says it asks for something rather than changes
// it, so that asking it again and again can be a poll: a name that starts, once a "vk" prefix
// and underscores are left out and case is ignored, with get, is, has, query, check, poll,
// stat, exists or head (HTTP's GET and HEAD, memcached's get and gets, ggml-rpc's
// GET_DEVICE_MEMORY, vkGetFenceStatus), or holds "status"; and Redis's reads named otherwise
// (MGET, HGET, LLEN, TTL...). A write repeated (SET, vkQueueSubmit, Redis's GETSET) is not a
// poll, nor is a name perflab does not know ("" or a number).
func queryLike(name string) bool {
	n := strings.ToLower(strings.ReplaceAll(name, "_", ""))
	if strings.HasPrefix(name, "vk") {
		n = n[2:]
	}
	switch n {
	case "getset", "getdel", "getex": // Redis's writes that answer with the old value
		return false
	}
	for _, p := range []string{"get", "is", "has", "query", "check", "poll", "stat", "exists", "head"} {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	if strings.Contains(n, "status") {
		return true
	}
	switch n {
	case "mget", "hget", "hmget", "hgetall", "hexists", "hlen", "llen", "lrange", "lindex", "scard", "sismember",
		"smembers", "zcard", "zscore", "zrange", "zrank", "ttl", "pttl", "type", "xlen", "xrange", "xread", "strlen", "gat", "gats":
		return true
	}
	return false
}

// blocking reports whether the command named waits on the server for data by design, its
// reply held until the data comes or a timeout given by the client: Redis's blocking pops and
// moves, WAIT and WAITAOF. Its round trip's wait is not the network's or the server's work, and
// no pipelining takes it away. (XREAD blocks only with its BLOCK argument, which the name does
// not show.)
// It is asked of every round trip, so it allocates nothing and rejects most names by their
// first byte.
func blocking(name string) bool {
	if name == "" || name[0]|0x20 != 'b' && name[0]|0x20 != 'w' {
		return false
	}
	for _, b := range [...]string{"BLPOP", "BRPOP", "BLMOVE", "BRPOPLPUSH", "BLMPOP", "BZPOPMIN", "BZPOPMAX", "BZMPOP", "WAIT", "WAITAOF"} {
		if strings.EqualFold(name, b) {
			return true
		}
	}
	return false
}

// findings turns the evidence into findings, costliest first.
func (a *Analyzer) findings(unit Unit, r *Report) []Finding {
	for _, p := range a.polls.runs {
		a.polls.close(p)
		p.n = 0
	}
	var out []Finding
	for _, f := range []*Finding{a.wakeupFinding(unit), a.splitWritesFinding(unit)} {
		if f != nil {
			out = append(out, *f)
		}
	}
	out = append(out, a.pollingFindings(unit)...)
	for _, f := range []*Finding{a.nagleFinding(unit), a.eagainFinding(unit), a.churnFinding(unit, r), a.serialFinding(unit)} {
		if f != nil {
			out = append(out, *f)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CostUSPerUnit > out[j].CostUSPerUnit })
	return out
}

// wakeupFinding: wake-up delay dominating small round trips, or nil.
func (a *Analyzer) wakeupFinding(unit Unit) *Finding {
	at := &a.attr
	if at.haveSched && at.nSmall >= 20 {
		s := at.small
		sched := s[4] + s[5]
		total := sum(s) - s[0] // of the round-trip time, the client's own time apart
		if total > 0 && sched/total >= 0.2 {
			per := sched / float64(at.nSmall)
			cost, u := perRT(sched, at.nSmall, unit)
			idle := ""
			if s[4] > s[5] {
				idle = "; mostly on a CPU that was idle, so the CPU itself was waking up (a halted vCPU costs tens of µs each way)"
			}
			return &Finding{Kind: "wakeup_delay", Title: fmt.Sprintf("Wake-up delay is %.0f%% of small round trips", 100*sched/total),
				Evidence: fmt.Sprintf("%d round trips under 1 ms: the client thread sat runnable %.1f µs per round trip after its reply arrived (%.1f µs waking an idle CPU, %.1f µs behind other threads)%s",
					at.nSmall, us(per), us(s[4]/float64(at.nSmall)), us(s[5]/float64(at.nSmall)), idle),
				Cost: fmt.Sprintf("%.1f µs per %s", us(cost), u), Unit: u, CostUSPerUnit: us(cost), Share: round3(sched / total),
				Fix: "keep the waiting thread on its CPU: busy-poll the socket (SO_BUSY_POLL, or spin a few µs before blocking), keep the CPUs out of deep idle (idle=poll, /dev/cpu_dma_latency), and pin client and server threads to CPUs of their own (taskset)"}
		}
	}
	return nil
}

// splitWritesFinding: one message written with several system calls, or nil.
func (a *Analyzer) splitWritesFinding(unit Unit) *Finding {
	if w := &a.writes; w.multi >= 10 && float64(w.multi) >= 0.25*float64(w.requests) {
		names := append([]string(nil), w.order...)
		sort.SliceStable(names, func(i, j int) bool { return w.byCmd[names[i]].extra > w.byCmd[names[j]].extra })
		var parts []string
		for _, n := range names {
			g := w.byCmd[n]
			if g.multi == 0 || len(parts) == 3 {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s: %d of %d requests, up to %d calls each", n, g.multi, g.requests, g.maxCalls))
		}
		calls, u := perReq(float64(w.extra), w.requests, unit)
		return &Finding{Kind: "split_writes", Title: fmt.Sprintf("%d requests were each written with several system calls", w.multi),
			Evidence: fmt.Sprintf("%d of %d requests took %.2f calls each on average (%s)", w.multi, w.requests,
				1+float64(w.extra)/float64(w.multi), joinSemi(parts)),
			Cost: fmt.Sprintf("%.1f extra system calls per %s", calls, u), Unit: u, CallsPerUnit: round3(calls),
			Fix: fmt.Sprintf("write each message with one call (writev of header and payload, or one buffer): that saves %.1f system calls per %s, and with TCP avoids a write-write-read that Nagle and delayed ACKs can stall", calls, u)}
	}
	return nil
}

// pollingFindings: a command polled back to back (a status asked again and again), one finding
// per such command.
func (a *Analyzer) pollingFindings(unit Unit) []Finding {
	at := &a.attr
	var out []Finding
	for _, name := range sortedPolls(a.polls.byCmd) {
		g := a.polls.byCmd[name]
		if g.requests < 100 || g.spanNS <= 0 || strings.Contains(strings.ToLower(name), "wait") {
			continue // a blocking wait repeated is the fix, not polling
		}
		rate := float64(g.requests) / (g.spanNS / 1e9)
		if rate < 500 {
			continue
		}
		same := ", the replies of each run all of one size: the answer looked the same every time"
		if g.replySize >= 0 {
			same = fmt.Sprintf(", every reply %d bytes: the answer looked the same every time", g.replySize)
		}
		// Of every round trip, this share is polling: per unit of work, as many.
		rts, u := perRT(float64(g.requests), at.n, unit)
		cost, _ := perRT(g.rttNS, at.n, unit)
		out = append(out, Finding{Kind: "polling_storm", Title: fmt.Sprintf("%s is polled: %d requests back to back at %.0f/s", name, g.requests, rate),
			Evidence: fmt.Sprintf("%d runs of at least %d identical %s requests (the same captured bytes) in a row on one connection, each sent once the previous one's reply was in (longest %d)%s",
				g.runs, minPollRun, name, g.longest, same),
			Cost: fmt.Sprintf("%.1f round trips and %.1f µs of round-trip time per %s", rts, us(cost), u), Unit: u,
			CostUSPerUnit: us(cost), CallsPerUnit: round3(2 * rts),
			Fix: pollFix(name)})
	}
	return out
}

// nagleFinding: Nagle or delayed-ACK stalls (round trips stepping by about 40 ms), or nil.
func (a *Analyzer) nagleFinding(unit Unit) *Finding {
	if steps := a.steps[0] + a.steps[1] + a.steps[2]; steps >= 3 && a.rtt.n > 0 && float64(steps) >= 0.01*float64(a.rtt.n) {
		stall := float64(a.stepNS) / 1e3 // µs: nearly all of such a round trip is the stall
		cost, u := perRT(stall, a.rtt.n, unit)
		return &Finding{Kind: "nagle_delayed_ack", Title: fmt.Sprintf("%d round trips stalled about 40 ms (Nagle or a delayed ACK)", steps),
			Evidence: fmt.Sprintf("%d of %d round trips took 36-52 ms, %d took 76-92 ms, %d took 116-132 ms (the delayed ACK's 40 ms and its multiples, and the timer's lateness); the median round trip took %.1f µs",
				a.steps[0], a.rtt.n, a.steps[1], a.steps[2], us(a.rtt.quantile(0.5))),
			Cost: fmt.Sprintf("%.1f µs per %s", cost, u), Unit: u, CostUSPerUnit: round3(cost),
			Fix: "set TCP_NODELAY on the sender and write each message with one call (writev), so that no small segment waits for the ACK of the previous one; TCP_QUICKACK on the receiver stops the delayed ACK"}
	}
	return nil
}

// eagainFinding: calls on non-blocking sockets failing with EAGAIN more than moving data, or nil.
func (a *Analyzer) eagainFinding(unit Unit) *Finding {
	if a.eagain >= 1000 && a.messages > 0 && float64(a.eagain) >= 0.5*float64(a.messages) {
		calls, u := perReq(float64(a.eagain), a.writes.requests, unit)
		return &Finding{Kind: "eagain_storm", Title: fmt.Sprintf("%d calls failed with EAGAIN", a.eagain),
			Evidence: fmt.Sprintf("%d system calls on non-blocking sockets returned EAGAIN, %.2f for each of the %d calls that moved data", a.eagain,
				float64(a.eagain)/float64(a.messages), a.messages),
			Cost: fmt.Sprintf("%.1f failed system calls per %s", calls, u), Unit: u, CallsPerUnit: round3(calls),
			Fix: "wait for readiness before reading (epoll or poll, or a blocking socket) instead of retrying the call; if spinning is meant, bound it and say so"}
	}
	return nil
}

// churnFinding: reconnection churn, many connections opened for a few requests each, or nil.
func (a *Analyzer) churnFinding(unit Unit, r *Report) *Finding {
	var connects, accepts, short uint64
	var connectNS float64
	for _, cs := range a.allConns {
		c := cs.tcp
		switch {
		case c == nil:
			continue
		case c.synSent > 0:
			connects++
			if c.established > c.synSent {
				connectNS += float64(c.established - c.synSent)
			}
		case c.passive && c.established > 0:
			accepts++
		default:
			continue
		}
		if cs.requests <= 4 {
			short++
		}
	}
	if opened := max(connects, accepts); opened >= 20 && float64(short) >= 0.5*float64(connects+accepts) {
		conns, u := perReq(float64(opened), a.writes.requests, unit)
		cost, _ := perReq(connectNS, a.writes.requests, unit)
		setup := ""
		if r.Setup != nil && r.Setup.Connects > 0 {
			setup = fmt.Sprintf("; connecting took %.1f µs at the median", r.Setup.P50US)
		}
		return &Finding{Kind: "reconnection_churn", Title: fmt.Sprintf("%d connections opened, most for 4 requests or fewer", opened),
			Evidence: fmt.Sprintf("%d TCP connects and %d accepts while recording; %d of these ends carried at most 4 requests%s", connects, accepts, short, setup),
			Cost:     fmt.Sprintf("%.2f connections (a handshake each) and %.1f µs of connecting per %s", conns, us(cost), u), Unit: u, CostUSPerUnit: us(cost),
			Fix: "keep connections open and reuse them (keep-alive, a connection pool) instead of one connection per request"}
	}
	return nil
}

// serialFix is the serial finding's fix; it points to perflab model only where the model can
// predict for the trace (else the model refuses it, or predicts no change for calls it cannot
// class).
func serialFix(unit Unit) string {
	fix := "send the next request before the previous reply when it does not depend on it (pipelining), or batch requests"
	if unit.Modelled {
		fix += "; 'perflab model --from TRACE --mode pipeline' predicts what it buys"
	} else {
		fix += "; the waiting above is what overlapping the round trips could take away at most"
	}
	return fix
}

// serialFinding: serial round trips that pipelining could overlap, or nil.
func (a *Analyzer) serialFinding(unit Unit) *Finding {
	at := &a.attr
	// round trips of blocking commands wait for data by design: pipelining takes none of it
	n := at.n - at.nBlocking
	if n >= 100 && a.inFlight > 0 && a.inFlight <= 1.2 {
		waitOf := func(c *causeSums) float64 { return c[2] + c[3] + c[4] + c[5] + c[6] }
		total := sum(at.total) - sum(at.blocking)
		wait := waitOf(&at.total) - waitOf(&at.blocking)
		if total > 0 && wait/total >= 0.5 {
			cost, u := perRT(wait, n, unit)
			left := ""
			if at.nBlocking > 0 {
				left = fmt.Sprintf("; %d round trips of commands that block by design (%s), waiting for data, are left out", at.nBlocking, at.firstBlocking)
			}
			return &Finding{Kind: "serial_round_trips", Title: fmt.Sprintf("Round trips are serial: %.2f requests in flight on average", a.inFlight),
				Evidence: fmt.Sprintf("%d round trips, one at a time; %.0f%% of the client's time went to waiting for replies%s", n, 100*wait/total, left),
				Cost:     fmt.Sprintf("%.1f µs of waiting per %s", us(cost), u), Unit: u, CostUSPerUnit: us(cost), Share: round3(wait / total),
				Fix: serialFix(unit)}
		}
	}
	return nil
}

func sortedPolls(m map[string]*pollAgg) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if m[names[i]].requests != m[names[j]].requests {
			return m[names[i]].requests > m[names[j]].requests
		}
		return names[i] < names[j]
	})
	return names
}

func joinSemi(parts []string) string {
	s := ""
	for i, p := range parts {
		if i > 0 {
			s += "; "
		}
		s += p
	}
	return s
}

// cmdName is the name a command is counted under: "(unknown)" for a message the decoder could
// not name.
func cmdName(name string) string {
	if name == "" {
		return "(unknown)"
	}
	return name
}
