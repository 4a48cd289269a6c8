package loops

import (
	"fmt"
	"math"
	"sort"

	"github.com/perflab/perflab/trace"
)

// MinCycles is how many complete cycles a thread needs to be reported as an event loop.
const MinCycles = 10

// maxN bounds the distinct requests-per-cycle values kept apart; cycles with more requests
// are counted at maxN (a loop serving more than 4096 requests in one cycle is far past where
// the batch model's N matters).
const maxN = 4096

// Msg is what the loop analysis needs of a decoded protocol message: which thread moved it,
// whether it is a request the thread received or a reply it sent, and when.
type Msg struct {
	Trace    int // index of the trace
	PID, TID uint32
	Dir      trace.Dir
	Request  bool  // a request (not a reply)
	Reply    bool  // a reply to an earlier request
	Answered int   // requests a reply answered (1 usually; more when replies are batched in one frame)
	End      int64 // end of the last call that carried it, monotonic ns
}

type threadKey struct {
	trace    int
	pid, tid uint32
}

// cycleAcc is the cycle in progress of one thread.
type cycleAcc struct {
	start, wake         int64 // the wait call's start and end, ns
	lastRecvEnd         int64 // end of the cycle's last receive, 0 when none
	firstSend, lastSend int64 // the cycle's sends after its last receive began, 0 when none
	requests, replies   int
	// interleaved: a request was received after one of the cycle's replies was sent.
	interleaved bool
}

// byN accumulates the cycles that carried the same number of requests.
type byN struct {
	cycles              uint64
	busy, cycleNS, path float64 // sums, ns
}

type thread struct {
	key       threadKey
	waits     map[trace.Op]uint64
	cur       cycleAcc
	open      bool
	cycles    uint64
	empty     uint64
	requests  uint64
	replies   uint64
	outside   uint64 // requests outside any complete cycle (before the first wait call)
	first     int64
	last      int64
	busyNS    float64
	idleNS    float64
	cycle     hist
	busy      hist
	wait      hist
	read      hist
	process   hist
	write     hist
	n         map[int]*byN
	interrupt uint64 // wait calls that failed (EINTR and others)
	// Cycles that received two requests or more and sent a reply, and those of them that sent
	// none before their last request was read (replies held to the cycle's end).
	multi, atEnd uint64
	// The active span: from the start of the first cycle that received a request to the end
	// of the last one, and the cycles (empty ones between included) up to each.
	activeFrom, activeTo   int64
	cyclesBefore, cyclesTo uint64
	activeReqs             uint64
}

// Builder finds the loop cycles of the threads of one or more traces, fed in each trace's
// order: every event (Event) and every decoded message (Message), each message right after
// the event that completed it. Memory grows with the threads and the distinct requests per
// cycle, not with the length of the traces.
type Builder struct {
	cur     int
	waits   bool // a wait call has been seen: until then a trace has no loop to follow
	threads map[threadKey]*thread
	order   []*thread
}

// New returns an empty Builder.
func New() *Builder { return &Builder{threads: map[threadKey]*thread{}} }

// Begin starts trace i: thread ids of different traces are kept apart.
func (b *Builder) Begin(i int) {
	for _, t := range b.order {
		t.closeAnswered()
	}
	b.cur, b.waits = i, false
}

func (b *Builder) thread(pid, tid uint32, create bool) *thread {
	k := threadKey{b.cur, pid, tid}
	t := b.threads[k]
	if t == nil && create {
		t = &thread{key: k, waits: map[trace.Op]uint64{}, n: map[int]*byN{}}
		b.threads[k] = t
		b.order = append(b.order, t)
	}
	return t
}

// Event takes one event of the current trace: a wait call closes the thread's cycle in
// progress and opens the next; a send or receive on a socket marks the cycle's read and write
// phases.
func (b *Builder) Event(ev *trace.Event) {
	if ev.Op.IsWait() {
		b.waits = true
		t := b.thread(ev.PID, ev.TID, true)
		t.waits[ev.Op]++
		if ev.Errno != 0 {
			t.interrupt++
		}
		t.startCycle(ev.TS, ev.TS+ev.Dur)
		return
	}
	if !b.waits || ev.Dir != trace.DirSend && ev.Dir != trace.DirRecv {
		return
	}
	t := b.thread(ev.PID, ev.TID, false)
	if t == nil || !t.open {
		return
	}
	c := &t.cur
	end := ev.TS + ev.Dur
	if ev.Dir == trace.DirRecv {
		c.lastRecvEnd = max(c.lastRecvEnd, end)
		return
	}
	if c.firstSend == 0 || ev.TS < c.firstSend {
		c.firstSend = ev.TS
	}
	c.lastSend = max(c.lastSend, end)
}

// Message takes one decoded message of the current trace.
func (b *Builder) Message(m *Msg) {
	if !b.waits {
		return
	}
	t := b.thread(m.PID, m.TID, false)
	if t == nil || !t.open {
		if t != nil && m.Dir == trace.DirRecv && m.Request {
			t.outside++
		}
		return
	}
	switch {
	case m.Dir == trace.DirRecv && m.Request:
		t.cur.requests++
		if t.cur.replies > 0 {
			t.cur.interleaved = true
		}
	case m.Dir == trace.DirSend && m.Reply:
		t.cur.replies += max(m.Answered, 1)
	}
}

// startCycle closes the cycle in progress at from (the next wait call's start) and opens the
// one whose wait call ran from from to wake.
func (t *thread) startCycle(from, wake int64) {
	if t.open && from >= t.cur.wake {
		t.closeCycle(from)
	}
	if !t.open {
		t.first = from
	}
	t.cur = cycleAcc{start: from, wake: wake}
	t.open = true
}

func (t *thread) closeCycle(end int64) {
	c := &t.cur
	wait := c.wake - c.start
	busy := end - c.wake
	t.cycles++
	t.last = end
	t.cycle.add(end - c.start)
	t.busy.add(busy)
	t.wait.add(wait)
	t.busyNS += float64(busy)
	t.idleNS += float64(wait)
	// The phases, cut on the timeline: read until the cycle's last receive ended, write from
	// the first send after that to the last send's end, process the rest of the busy time.
	read := int64(0)
	if c.lastRecvEnd > c.wake {
		read = min(c.lastRecvEnd, end) - c.wake
	}
	write := int64(0)
	if c.lastSend > 0 {
		from := max(c.firstSend, c.wake+read)
		to := min(c.lastSend, end)
		write = max(to-from, 0)
	}
	t.read.add(read)
	t.write.add(write)
	t.process.add(max(busy-read-write, 0))
	t.requests += uint64(c.requests)
	t.replies += uint64(c.replies)
	if c.requests >= 2 && c.replies > 0 {
		t.multi++
		if !c.interleaved {
			t.atEnd++
		}
	}
	if c.requests == 0 {
		t.empty++
	} else {
		if t.activeReqs == 0 {
			t.activeFrom, t.cyclesBefore = c.start, t.cycles-1
		}
		t.activeTo, t.cyclesTo = end, t.cycles
		t.activeReqs += uint64(c.requests)
	}
	n := min(c.requests, maxN)
	g := t.n[n]
	if g == nil {
		g = &byN{}
		t.n[n] = g
	}
	g.cycles++
	g.busy += float64(busy)
	g.cycleNS += float64(end - c.start)
	// The path: from the wake to the last reply's end; what the loop does after its replies
	// are out (a read that finds nothing, rearming its socket) is not on the requests' way.
	path := busy
	if c.lastSend > c.wake {
		path = min(c.lastSend, end) - c.wake
	}
	g.path += float64(path)
}

// closeAnswered closes the cycle in progress at the end of a trace when it received requests
// and answered them all: its wait call has not returned (a wait is recorded when it returns),
// but its work is done. It ends at its last send. Any other cycle in progress is left out.
func (t *thread) closeAnswered() {
	c := &t.cur
	if !t.open || c.requests == 0 || c.replies < c.requests || c.lastSend <= c.wake {
		return
	}
	t.closeCycle(c.lastSend)
	t.open = false
}

// Report returns the loops found: every thread with at least MinCycles complete cycles that
// served requests, most requests first. The cycle in progress at the end of each trace is
// counted when it answered every request it received (closeAnswered), else left out.
func (b *Builder) Report(conf float64) *Report {
	for _, t := range b.order {
		t.closeAnswered()
	}
	r := &Report{Threads: []Thread{}}
	idle := 0
	for _, t := range b.order {
		if t.cycles < MinCycles || t.requests == 0 {
			if t.cycles > 0 {
				idle++
			}
			continue
		}
		r.Threads = append(r.Threads, t.report(conf))
	}
	sort.SliceStable(r.Threads, func(i, j int) bool { return r.Threads[i].Requests > r.Threads[j].Requests })
	if idle > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d other thread(s) made wait calls without serving requests (or fewer than %d cycles): not event loops of this protocol", idle, MinCycles))
	}
	if len(r.Threads) == 0 {
		return nil
	}
	return r
}

func (t *thread) report(conf float64) Thread {
	out := Thread{Trace: t.key.trace, PID: t.key.pid, TID: t.key.tid, Cycles: t.cycles, EmptyCycles: t.empty,
		Requests: t.requests, Replies: t.replies, FailedWaits: t.interrupt, OutsideCycles: t.outside}
	var best uint64
	for op, n := range t.waits {
		if n > best || n == best && op.String() < out.WaitCall {
			best, out.WaitCall = n, op.String()
		}
	}
	span := float64(t.last - t.first)
	out.DurationS = round(span/1e9, 6)
	out.BusyS = round(t.busyNS/1e9, 6)
	out.IdleS = round(t.idleNS/1e9, 6)
	if tot := t.busyNS + t.idleNS; tot > 0 {
		out.Utilization = round(t.busyNS/tot, 4)
	}
	out.RequestsPerCycle = round(float64(t.requests)/float64(t.cycles), 3)
	if busy := t.cycles - t.empty; busy > 0 {
		out.RequestsPerBusyCycle = round(float64(t.requests)/float64(busy), 3)
	}
	if span > 0 {
		out.ThroughputPerS = math.Round(float64(t.requests) / span * 1e9)
	}
	if n := t.cyclesTo - t.cyclesBefore; n > 0 {
		out.ActiveS = round(float64(t.activeTo-t.activeFrom)/1e9, 6)
		out.ActiveCycles = n
		out.ActiveCycleUS = round(float64(t.activeTo-t.activeFrom)/float64(n)/1e3, 3)
		out.ActiveRequestsPerCycle = round(float64(t.activeReqs)/float64(n), 3)
	}
	out.MultiRequestCycles = t.multi
	if t.multi > 0 {
		out.RepliesAtCycleEnd = round(float64(t.atEnd)/float64(t.multi), 4)
	}
	out.CycleUS = quantiles(&t.cycle)
	out.BusyUS = quantiles(&t.busy)
	for _, ph := range []struct {
		name string
		h    *hist
	}{{"wait", &t.wait}, {"read", &t.read}, {"process", &t.process}, {"write", &t.write}} {
		p := Phase{Phase: ph.name, Quantiles: quantiles(ph.h)}
		if tot := t.busyNS + t.idleNS; tot > 0 {
			p.Share = round(ph.h.sum/tot, 4)
		}
		out.Phases = append(out.Phases, p)
	}
	ns := make([]int, 0, len(t.n))
	for n := range t.n {
		ns = append(ns, n)
	}
	sort.Ints(ns)
	for _, n := range ns {
		g := t.n[n]
		out.ByN = append(out.ByN, NCycles{N: n, Cycles: g.cycles, BusyUS: round(g.busy/float64(g.cycles)/1e3, 3),
			CycleUS: round(g.cycleNS/float64(g.cycles)/1e3, 3), PathUS: round(g.path/float64(g.cycles)/1e3, 3)})
	}
	out.Fit, out.Ranges, out.Warnings = fitThread(out.ByN, conf)
	return out
}

func quantiles(h *hist) Quantiles {
	return Quantiles{P50: round(h.quantile(0.5)/1e3, 3), P90: round(h.quantile(0.9)/1e3, 3),
		P99: round(h.quantile(0.99)/1e3, 3), Mean: round(h.mean()/1e3, 3), Max: round(float64(h.max)/1e3, 3)}
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p)/p + 0
}
