package evidence

import "github.com/perflab/perflab/trace"

// Causes of a round trip's time, in the order the table lists them.
const (
	CauseClient     = "client"     // the client's own time since its previous round trip on the connection ended
	CauseSend       = "send"       // the request's system calls
	CauseWaiting    = "waiting"    // the reply on its way: network and server, until the client thread was made runnable
	CauseRetransmit = "retransmit" // waiting that ended in a TCP retransmission of the connection
	CauseWakeup     = "wakeup"     // runnable on a CPU that was idle: the CPU waking up (a halted vCPU)
	CauseRunQueue   = "runqueue"   // runnable behind other threads on a busy CPU (woken or preempted)
	CauseRead       = "read"       // from running to the end of the reply's last receive
)

// Causes lists every cause in table order.
var Causes = []string{CauseClient, CauseSend, CauseWaiting, CauseRetransmit, CauseWakeup, CauseRunQueue, CauseRead}

const nCauses = 7

// maxClientGap caps the client time counted before one request: a longer gap is an idle
// pause of the client, not the cost of a round trip.
const maxClientGap = int64(1e9)

type causeSums [nCauses]float64

type attribution struct {
	haveSched bool
	prevEnd   map[uint64]int64 // per connection without a connState: end of its last round trip, ns
	total     causeSums
	n         uint64
	noWake    uint64 // round trips whose thread was never runnable-and-waiting inside them
	byCmd     map[string]*cmdAttr
	cmdOrder  []string
	lastName  string    // the command of the latest round trip,
	last      *cmdAttr  // and its aggregate in byCmd
	small     causeSums // round trips under smallRTT
	nSmall    uint64
	// blocking sums the round trips of commands that wait for data by design (blocking), of
	// which there were nBlocking, the first one's command firstBlocking
	blocking      causeSums
	nBlocking     uint64
	firstBlocking string
}

// smallRTT is the largest RTT of a "small" round trip for the wake-up finding, ns.
const smallRTT = int64(1e6)

type cmdAttr struct {
	sums causeSums
	n    uint64
}

func newAttribution() attribution {
	return attribution{prevEnd: map[uint64]int64{}, byCmd: map[string]*cmdAttr{}}
}

// maxCmdAttr bounds the commands attributed separately; the rest go to "(other)".
const maxCmdAttr = 256

// RoundTrip attributes one client round trip.
func (a *Analyzer) RoundTrip(rt *RoundTrip) {
	if rt.End <= rt.ReqTS || rt.ReqEnd < rt.ReqTS || rt.ReqEnd > rt.End {
		return
	}
	a.rtt.add(rt.End - rt.ReqTS)
	var c causeSums
	at := &a.attr
	cs := a.lookup(rt.Conn)
	if prev, ok := at.previous(cs, rt.Conn); ok && prev <= rt.ReqTS && rt.ReqTS-prev <= maxClientGap {
		c[0] = float64(rt.ReqTS - prev)
	}
	if cs != nil {
		cs.prevEnd, cs.hasPrev = rt.End, true
	} else {
		at.prevEnd[rt.Conn] = rt.End
	}
	c[1] = float64(rt.ReqEnd - rt.ReqTS)
	idle, busy, after, lastRun := a.runnableIn(rt)
	read := int64(0)
	if lastRun > 0 {
		read = rt.End - lastRun - after
	} else {
		at.noWake++
	}
	waiting := rt.End - rt.ReqEnd - idle - busy - read
	if waiting < 0 { // overlapping stretches (clock reads on different CPUs): trust the sched part
		read = max(0, read+waiting)
		waiting = 0
	}
	retrans := int64(0)
	if cs != nil && cs.tcp != nil && cs.tcp.lastRetrans > rt.ReqTS && cs.tcp.lastRetrans <= rt.End {
		retrans = min(waiting, cs.tcp.lastRetrans-rt.ReqEnd)
		retrans = max(0, retrans)
		waiting -= retrans
	}
	c[2], c[3], c[4], c[5], c[6] = float64(waiting), float64(retrans), float64(idle), float64(busy), float64(read)
	a.addCauses(rt, &c)
	// 40 ms steps: round trips that sat behind Nagle or a delayed ACK. Linux's delayed ACK
	// fires no sooner than 40 ms (TCP_DELACK_MIN) and later by its timer's ticks and the ACK
	// timeout's growth: a real client's 59 stalled round trips took 41-52 ms.
	if d := rt.End - rt.ReqTS; d >= 36e6 {
		k := (d + 8e6) / 40e6 // the multiple of 40 ms at most 8 ms above d
		if lo := k*40e6 - 4e6; k >= 1 && k <= 3 && d >= lo && d <= k*40e6+stepLate {
			a.steps[k-1]++
			a.stepNS += d
		}
	}
	a.polls.reply(cs, rt)
}

// stepLate is how much later than a multiple of 40 ms a round trip still counts as a step, ns.
const stepLate = 12e6

// previous returns the end of the last round trip of connection id (whose state is cs, or
// nil), if any.
func (at *attribution) previous(cs *connState, id uint64) (int64, bool) {
	if cs != nil && cs.hasPrev {
		return cs.prevEnd, true
	}
	prev, ok := at.prevEnd[id] // kept there before cs was made, or past maxConns
	return prev, ok
}

// runnableIn sums the client thread's runnable stretches inside [rt.ReqEnd, rt.End], ns: on a CPU
// that was idle (waking it), behind other threads, and after the last wake-up's run
// (preemptions while reading, which are not reading); lastRun is when that run began, 0 when
// the thread was not woken in the round trip.
func (a *Analyzer) runnableIn(rt *RoundTrip) (idle, busy, after, lastRun int64) {
	t := a.threads[rt.TID]
	if t == nil {
		return 0, 0, 0, 0
	}
	for k := 0; k < t.n; k++ {
		s := t.recent[(t.head-1-k+2*maxRecent)%maxRecent]
		if s.to < rt.ReqEnd || s.from > rt.End {
			continue
		}
		from, to := max(s.from, rt.ReqEnd), min(s.to, rt.End)
		if to <= from {
			continue
		}
		if s.flags&trace.SchedIdle != 0 && s.flags&trace.SchedPreempted == 0 {
			idle += to - from
		} else {
			busy += to - from
		}
		if s.flags&trace.SchedPreempted == 0 && s.to <= rt.End {
			lastRun = max(lastRun, s.to)
		}
	}
	for k := 0; k < t.n && lastRun > 0; k++ {
		s := t.recent[k]
		if s.flags&trace.SchedPreempted != 0 && s.from >= lastRun && s.from < rt.End {
			after += min(s.to, rt.End) - s.from
		}
	}
	return idle, busy, after, lastRun
}

// addCauses adds one round trip's causes to the totals, to the small round trips' when it
// took under smallRTT, and to its command's (past maxCmdAttr commands, to "(other)").
func (a *Analyzer) addCauses(rt *RoundTrip, c *causeSums) {
	at := &a.attr
	ca := at.cmd(cmdName(rt.Command))
	at.n++
	ca.n++
	if rt.Blocks || blocking(rt.Command) {
		if at.nBlocking == 0 {
			at.firstBlocking = rt.Command
			if rt.Blocks {
				at.firstBlocking += " BLOCK"
			}
		}
		at.nBlocking++
		for i := range c {
			at.blocking[i] += c[i]
		}
	}
	if rt.End-rt.ReqTS < smallRTT {
		at.nSmall++
		for i := range c {
			at.total[i] += c[i]
			at.small[i] += c[i]
			ca.sums[i] += c[i]
		}
		return
	}
	for i := range c {
		at.total[i] += c[i]
		ca.sums[i] += c[i]
	}
}

// cmd returns the aggregate of command name (past maxCmdAttr commands, "(other)"'s); the
// latest one's without a look-up, since round trips come in runs of one command.
func (at *attribution) cmd(name string) *cmdAttr {
	if at.last != nil && name == at.lastName {
		return at.last
	}
	key := name
	ca := at.byCmd[key]
	if ca == nil {
		if len(at.byCmd) >= maxCmdAttr {
			key = "(other)"
			ca = at.byCmd[key]
		}
		if ca == nil {
			ca = &cmdAttr{}
			at.byCmd[key] = ca
			at.cmdOrder = append(at.cmdOrder, key)
		}
	}
	at.lastName, at.last = name, ca
	return ca
}
