package evidence

import (
	"github.com/perflab/perflab/trace"
)

// Request is a request message a client sent, as the analyzer decoded it.
type Request struct {
	Conn    uint64 // connection id in its trace
	PID     uint32
	Command string // its command's name ("" when unknown)
	Size    int64  // bytes, header included
	Calls   int    // system calls that carried it
	TS, End int64  // start of its first call and end of its last, monotonic ns
	// WantsReply is set on a request the protocol answers (only those can be polling).
	WantsReply bool
	// Digest is a hash of the request's captured bytes (protocol.Message.Digest): requests of
	// one command, size and digest are the same request asked again. 0 when none were seen.
	Digest uint64
}

// RoundTrip is a reply a client received, paired with its request.
type RoundTrip struct {
	Conn    uint64
	PID     uint32
	TID     uint32 // the thread that received the reply
	Command string // the request's command name
	ReqTS   int64  // start of the request's first call, ns
	ReqEnd  int64  // end of the request's last call, ns
	End     int64  // end of the reply's last call, ns
	Size    int64  // reply bytes
	Status  int    // reply status when the protocol has one
	// Blocks: the request waits on the server for data by its arguments (XREAD ... BLOCK),
	// as the commands blocking names do by their name
	Blocks bool
}

// Unit is the unit of work findings are costed in: the analyzer's unit in its steady state
// ("token"), or none (findings are then costed per request or round trip).
type Unit struct {
	Name              string
	Count             uint64
	RequestsPerUnit   float64
	RoundTripsPerUnit float64
	// Modelled: the trace is a token loop (token markers) whose calls its protocol classes as
	// submits and sync points, so `perflab model --from TRACE` can predict pipelining for it
	Modelled bool
}

// maxRecent is how many runnable stretches are kept per thread to match against round trips.
const maxRecent = 64

// maxThreads bounds the threads followed in one trace, maxConns the connections.
const (
	maxThreads = 1 << 14
	maxConns   = 1 << 16
)

// stretch is one runnable stretch of a thread.
type stretch struct {
	from, to int64 // runnable from, ran at (ns)
	flags    uint8
}

type thread struct {
	recent [maxRecent]stretch
	n      int // stretches kept (ring of maxRecent)
	head   int
}

func (t *thread) add(s stretch) {
	t.recent[t.head] = s
	t.head = (t.head + 1) % maxRecent
	if t.n < maxRecent {
		t.n++
	}
}

// connState is what is known of one connection of the trace being read: who it is and its
// data, with its TCP evidence apart (made on the first), so that the many connections of a
// trace without TCP evidence hold only this.
type connState struct {
	id        uint64
	trace     int
	pid       uint32
	family    trace.Family
	local     string
	remote    string
	firstData int64     // first message event, ns (0 none)
	messages  uint64    // calls that moved data
	requests  uint64    // requests sent on it
	tcp       *tcpState // nil until its first TCP evidence
	prevEnd   int64     // end of its last round trip, ns, when hasPrev (else in attribution.prevEnd)
	hasPrev   bool
	poll      *pollRun // its entry in pollStats.runs, once looked up
}

// tcpState is the TCP evidence of one connection.
type tcpState struct {
	synSent     int64 // CLOSE -> SYN_SENT (connect), ns
	established int64 // -> ESTABLISHED, ns
	passive     bool  // accepted (SYN_RECV seen, or established without a connect)
	closed      int64 // -> CLOSE, ns
	info        trace.TCPInfo
	haveInfo    bool
	snaps       uint64
	zeroWnd     uint64
	retrans     uint64 // retransmission events
	lastRetrans int64  // ns of the last one
	srtt        hist
}

// Analyzer accumulates the evidence of one or more traces. The zero value is not usable: call
// New.
type Analyzer struct {
	trace                        int
	threads                      map[uint32]*thread
	conns                        map[uint64]*connState
	recent                       [recentConns]*connState // conns' entries looked up lately, by id modulo recentConns
	allConns                     []*connState            // every trace's connections, in first-seen order
	haveSched, haveTCP, haveConn bool

	// Runnable stretches of recorded threads, all traces.
	runnable, wakeIdle, wakeBusy, preempted hist

	attr     attribution
	writes   writeStats
	polls    pollStats
	eagain   uint64 // EAGAIN/EWOULDBLOCK failures of receive and send calls
	messages uint64 // calls that moved bytes
	rtt      hist   // every round trip's RTT, for the Nagle/delayed-ACK steps
	steps    [3]uint64
	stepNS   int64   // the stepped round trips' time, summed
	inFlight float64 // mean requests in flight, from the analyzer (0 unknown)
}

// New returns an empty Analyzer.
func New() *Analyzer {
	return &Analyzer{threads: map[uint32]*thread{}, conns: map[uint64]*connState{},
		attr: newAttribution(), polls: pollStats{runs: map[uint64]*pollRun{}, byCmd: map[string]*pollAgg{}},
		writes: writeStats{byCmd: map[string]*writeAgg{}}}
}

// Begin starts trace i: threads and connections are those of this trace from now on.
func (a *Analyzer) Begin(i int) {
	a.trace = i
	a.threads = map[uint32]*thread{}
	a.conns = map[uint64]*connState{}
	a.recent = [recentConns]*connState{}
	a.attr.prevEnd = map[uint64]int64{}
	a.polls.runs = map[uint64]*pollRun{}
}

// recentConns is how many connections lookup finds without a map look-up (a power of 2).
const recentConns = 64

// lookup returns the state of connection id in the current trace, nil when it has none.
func (a *Analyzer) lookup(id uint64) *connState {
	slot := &a.recent[id%recentConns]
	if c := *slot; c != nil && c.id == id {
		return c
	}
	c := a.conns[id]
	if c != nil {
		*slot = c
	}
	return c
}

// conn returns the state of connection id, made on first use; nil past maxConns.
func (a *Analyzer) conn(id uint64) *connState {
	c := a.lookup(id)
	if c == nil {
		if len(a.conns) >= maxConns {
			return nil
		}
		c = &connState{id: id, trace: a.trace}
		a.conns[id] = c
		a.allConns = append(a.allConns, c)
		a.recent[id%recentConns] = c
	}
	return c
}

// Connection notes a connection's identity.
func (a *Analyzer) Connection(tc *trace.Connection) {
	c := a.conn(tc.ID)
	if c == nil {
		return
	}
	c.family, c.local, c.remote = tc.Family, tc.Local, tc.Remote
	if tc.PID != 0 {
		c.pid = tc.PID
	}
}

// Event takes one event of the trace: kernel evidence, a message, or a failed call.
func (a *Analyzer) Event(ev *trace.Event) {
	switch ev.Op {
	case trace.OpRunnable:
		a.runnableEvent(ev)
		return
	case trace.OpTCPState, trace.OpTCPRetransmit, trace.OpTCPInfo:
		a.tcpEvent(ev)
		return
	}
	if ev.Dir != trace.DirSend && ev.Dir != trace.DirRecv {
		return
	}
	if ev.Errno == 11 { // EAGAIN, EWOULDBLOCK
		a.eagain++
		a.conn(ev.Conn) // its state is made here, as for data: it counts towards maxConns
		return
	}
	if ev.Errno != 0 || ev.Bytes <= 0 {
		return
	}
	a.messages++
	if ev.Conn == 0 {
		return
	}
	if c := a.conn(ev.Conn); c != nil {
		if c.firstData == 0 {
			c.firstData = ev.TS
		}
		c.messages++
	}
}

func (a *Analyzer) runnableEvent(ev *trace.Event) {
	si, err := trace.DecodeSchedInfo(ev.Payload)
	if err != nil || ev.Dur < 0 {
		return
	}
	a.haveSched = true
	a.attr.haveSched = true
	a.runnable.add(ev.Dur)
	switch {
	case si.Flags&trace.SchedPreempted != 0:
		a.preempted.add(ev.Dur)
	case si.Flags&trace.SchedIdle != 0:
		a.wakeIdle.add(ev.Dur)
	default:
		a.wakeBusy.add(ev.Dur)
	}
	t := a.threads[ev.TID]
	if t == nil {
		if len(a.threads) >= maxThreads {
			return
		}
		t = &thread{}
		a.threads[ev.TID] = t
	}
	t.add(stretch{from: ev.TS, to: ev.TS + ev.Dur, flags: si.Flags})
}

func (a *Analyzer) tcpEvent(ev *trace.Event) {
	ti, err := trace.DecodeTCPInfo(ev.Payload)
	if err != nil {
		return
	}
	cs := a.conn(ev.Conn)
	if cs == nil {
		return
	}
	if cs.pid == 0 {
		cs.pid = ev.PID
	}
	cs.family = trace.FamilyTCP
	if cs.tcp == nil {
		cs.tcp = new(tcpState)
	}
	c := cs.tcp
	if ti.SRTTus > 0 && ti.State == trace.TCPEstablished {
		c.srtt.add(int64(ti.SRTTus) * 1000)
	}
	switch ev.Op {
	case trace.OpTCPState:
		a.haveConn = true
		switch {
		case ti.State == trace.TCPSynSent:
			c.synSent = ev.TS
		case ti.State == trace.TCPSynRecv:
			c.passive = true
			if c.established == 0 {
				c.established = ev.TS
			}
		case ti.State == trace.TCPEstablished:
			c.established = ev.TS
			if c.synSent == 0 {
				c.passive = true
			}
		case ti.State == trace.TCPClose:
			c.closed = ev.TS
		}
	case trace.OpTCPRetransmit:
		a.haveTCP = true
		c.retrans++
		c.lastRetrans = ev.TS
	case trace.OpTCPInfo:
		a.haveTCP = true
		c.snaps++
		if ti.SndWnd == 0 && ti.State == trace.TCPEstablished {
			c.zeroWnd++
		}
	}
	if ti.State != trace.TCPClose || !c.haveInfo || ti.BytesAcked >= c.info.BytesAcked {
		c.info, c.haveInfo = ti, true
	}
}

// SetInFlight gives the mean number of requests in flight the analyzer measured (for the
// serial round trips finding).
func (a *Analyzer) SetInFlight(mean float64) { a.inFlight = mean }
