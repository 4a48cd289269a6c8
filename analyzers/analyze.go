package analyzers

import (
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/perflab/perflab/evidence"
	"github.com/perflab/perflab/loops"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// maxSeries is the most points a time series keeps; past it, neighbouring points merge.
const maxSeries = 256

// series is a time series of bounded length: values are summed (or maxed) into buckets whose
// width doubles whenever there would be more than maxSeries of them.
type series struct {
	origin int64 // ns
	width  int64 // ns per bucket
	vals   []float64
	useMax bool
	// the bucket of the last add, at, holds the ns from origin in [lo, hi): the next add,
	// likely in it, then needs no division (hi 0: none yet)
	lo, hi int64
	at     int
}

func (s *series) add(ts int64, v float64) {
	if s.width == 0 {
		s.width = 1e6
	}
	if ts < s.origin {
		ts = s.origin
	}
	d := ts - s.origin
	if d > 1<<62 || d < -(1<<62) { // a clock that jumped: keep the series bounded
		return
	}
	if d >= s.lo && d < s.hi {
		s.addAt(s.at, v)
		return
	}
	i := int(d / s.width)
	for i >= maxSeries {
		merged := make([]float64, (len(s.vals)+1)/2, maxSeries)
		for k, v := range s.vals {
			if s.useMax {
				merged[k/2] = math.Max(merged[k/2], v)
			} else {
				merged[k/2] += v
			}
		}
		s.vals = merged
		s.width *= 2
		i = int(d / s.width)
	}
	for len(s.vals) <= i {
		s.vals = append(s.vals, 0)
	}
	if d >= 0 {
		s.lo, s.hi, s.at = int64(i)*s.width, int64(i+1)*s.width, i
	}
	s.addAt(i, v)
}

// addAt adds v to bucket i.
func (s *series) addAt(i int, v float64) {
	if s.useMax {
		// math.Max's, for the counts (never NaN, never -0) this series takes
		if v > s.vals[i] {
			s.vals[i] = v
		}
	} else {
		s.vals[i] += v
	}
}

// points returns the series with times in s from base and, for sums, values per second.
func (s *series) points(base int64) []TimePoint {
	out := make([]TimePoint, len(s.vals))
	for i, v := range s.vals {
		t := float64(s.origin-base+int64(i)*s.width) / 1e9
		if !s.useMax {
			v = v / (float64(s.width) / 1e9)
		}
		out[i] = TimePoint{TS: round3(t*1e3) / 1e3, Value: round3(v)}
	}
	return out
}

// dirAgg is one direction of one connection. Its call latencies are the first inline and a
// Hist from the second call on, so that a trace of many short connections holds a few words
// for each direction that made one call instead of a whole Hist.
type dirAgg struct {
	calls, bytes, frames uint64
	first                int64 // the first call's latency, ns (when calls > 0)
	lat                  *Hist // every call's latency, once there are two
}

// call counts one call of dur ns that moved n bytes.
func (d *dirAgg) call(dur, n int64) {
	d.calls++
	d.bytes += uint64(n)
	switch {
	case d.lat != nil:
		d.lat.Add(dur)
	case d.calls == 1:
		d.first = dur
	default:
		d.lat = new(Hist)
		d.lat.Add(d.first)
		d.lat.Add(dur)
	}
}

// latency is the Latency of the calls' latencies, as one Hist of them gives it.
func (d *dirAgg) latency(conf float64) Latency {
	switch {
	case d.lat != nil:
		return d.lat.latency(conf)
	case d.calls == 1:
		var h Hist
		h.Add(d.first)
		return h.latency(conf)
	}
	return Latency{}
}

type connAgg struct {
	side    int32 // index in analyzer.sides of (its pid, it), -1 until known
	sidePID uint32
	trace   int32 // index of its trace
	pid     uint32
	family  trace.Family
	id      uint64
	local   string
	remote  string
	dirs    [2]dirAgg // by direction: dirs[d-1] for trace.DirSend and trace.DirRecv
}

// dir returns the aggregate of direction d, which must be trace.DirSend or trace.DirRecv.
func (c *connAgg) dir(d trace.Dir) *dirAgg { return &c.dirs[d-1] }

type cmdKey struct {
	proto, name string
	id          uint64
	dir         trace.Dir
	reply, push bool
}

type cmdAgg struct {
	name         string
	idx          uint32 // its number in the message records (analyzer.cmdIndex), 0 until numbered
	count, bytes uint64
	rtt          Hist
	win          windowAgg // round trips of this command, Venus Plus style ("vkQueueSubmit: summary at 100 calls")
	inTrace      int32     // 1 + the index of the latest trace it appeared in
	spanNS       int64     // Σ the spans of the traces it appeared in (CmdStats.SpanS)
}

type errKey struct {
	errno uint32
	dir   trace.Dir
}

type procAgg struct {
	// recent round trips (to count what else was in flight) and the interval being merged for
	// the blocked time
	recent            [nRecent]flight
	nRecent           int
	recentSvc         [nRecent]flight // recent services of a server, to count the requests in service
	nRecentSvc        int
	curFrom, curTo    int64
	closedTo          int64   // the end of the last blocked interval closed: time before it is counted
	rtEvents, wanting uint64  // a tracer's round-trip events; its requests that want a reply
	rts               uint64  // round trips completed (a client's) or served (a server's)
	served            uint64  // round trips served (a server's replies)
	serviceArea       float64 // Σ service time to the reply's last byte, ns
	blocked           int64   // ns with at least one round trip outstanding
	area              float64 // ∫ requests in flight dt = Σ RTT, request·ns
}

// nRecent is how many of its recent round trips a process keeps, to count what else was in
// flight; maxInFlightN is then the most requests in flight a round trip can count (a count
// that reaches it is a lower bound: InFlight.MaxAtLeast).
const (
	nRecent      = 64
	maxInFlightN = nRecent + 1
)

type windowAgg struct {
	calls   uint64
	sumDur  float64
	sumB    float64
	maxDur  int64
	stride  uint64
	next    uint64 // the calls at which the next window closes: the next multiple of stride
	windows []Window
}

// msgRec is what the unit and phase attribution keeps of a message: 24 bytes, so a trace's
// messages fit in well under the 64 bytes per event that analyze may use.
type msgRec struct {
	ts   int64
	size uint32
	cmd  uint32 // the message's command (analyzer.cmdIndex), 0 when none
	busy uint32 // ns inside the calls that carried it (capped)
	proc uint16 // index of the message's connection in analyzer.sides (maxProcs: any other)
	kind uint8
	rts  uint8 // round trips this message completed (a reply may answer several requests)
}

// maxExtraMarkers bounds the markers taken from Options.Markers.
const maxExtraMarkers = 1 << 20

// maxTracerPairs bounds the tracer round trips kept for replay (40 MB at most).
const maxTracerPairs = 1 << 20

// maxProcs bounds the processes told apart in unit attribution.
const maxProcs = 1<<16 - 1

const (
	recSend     = 1 << iota // the message was sent (else received)
	recUnit                 // a request sent that opens a unit of work (spec unit command)
	recUnitRecv             // the same, received (a traced server)
	recRTEvent              // a tracer's round-trip event (not a message)
	recReply                // the message is a reply
)

type interval struct{ from, to int64 }

// flight is a recent round trip (or service) of a process, from its request to its reply, and
// n, the requests in flight (in service) when its request went out (came in), itself
// included. Round trips complete in any order (connections of one process interleave; Redis
// answers the clients it read in one loop turn last first), so n grows as the ones that went
// out before it but completed after it come in; it is counted (commitFlight) once the
// flight leaves the process's ring of recent ones, or at the end.
type flight struct {
	from, to int64
	n        int
}

// analyzer is the sink that builds a Summary in one pass, in memory bounded by the number of
// connections, commands and processes, never by the number of events.
type analyzer struct {
	opt               Options
	conf              float64
	loops             *loops.Builder // the event-loop analysis (loops.go)
	loopMsg           loops.Msg
	s                 *Summary
	cur               int
	first             int64
	last              int64
	haveTS            bool
	durNS             int64
	cmds              map[cmdKey]*cmdAgg
	errs              map[errKey]uint64
	procs             map[uint64]*procAgg
	rtt               Hist
	service           Hist // server service time: request's last byte in → reply's first byte out
	serviceLast       Hist // the same, to the reply's last byte out
	firstByte         Hist // client: request's first byte out → reply's first byte in
	nServed           uint64
	unpaired          uint64                  // replies with no request to answer
	overridden        uint64                  // replies answering a request the decoder thought wanted none
	calls             Hist                    // call latency, when there are no round trips (kept only until there is one)
	byN               [maxInFlightN + 1]*Hist // RTT by requests in flight at issue (nil: none)
	inflMax           int
	inflCapped        bool // a round trip (or service) counted maxInFlightN in flight: maybe more
	infl              series
	svcMax            int    // a server: most requests in service at once
	svcInfl           series // a server: requests in service over time
	tl                series
	win               [3]windowAgg
	lost              map[string]uint64
	lostSync, dropped uint64
	truncated         uint64
	specs             map[string]*protocol.Spec // by name: the built-ins and the chosen spec
	cipher            *protocol.CipherFilter    // the current trace's TLS ciphertext connections
	tlsConns          map[[3]uint64]bool        // trace, connection and pid with TLS plaintext
	budget            recBudget                 // the memory recs, blocks and srvRecv may hold
	recs              spillList[msgRec]         // this trace's messages, for units and phases
	lastRecP          *msgRec                   // the last message's record
	marks             markSet                   // this trace's phase and unit markers
	markerUnitsSeen   bool                      // a trace's units came from its unit markers
	blocks            spillList[interval]       // this trace's intervals with a client blocked on a reply
	srvRecv           spillList[interval]       // this trace's time a traced server spent in receive calls for requests (waiting included)
	unitSpec          string                    // unit name of the spec unit commands seen
	openers           [2]openers                // this trace's requests that open units: sent, received
	busy              *busySet                  // this trace's serverBusy, once made (busyMade)
	busyMade          bool
	sides             map[[2]uint64]uint16 // this trace's (pid, connection) pairs, numbered for msgRec.proc
	sidePID           []uint32             // the pid of each side
	tracerUnanswered  uint64
	unanswered        uint64          // requests of eBPF traces still awaiting a reply at the end
	rtEventsSeen      uint64          // this trace's tracer round-trip events
	tracerPairs       []trace.Event   // this trace's tracer frames paired, replayed when it has no round-trip events
	rawPairs          []rawPair       // this trace's exchanges inferred on connections of unknown protocol
	netlink           map[uint64]bool // this trace's netlink sockets (connection ids)
	framesBefore      uint64          // messages of the traces before this one
	callsBefore       uint64          // calls of the traces before this one
	lastConn          *connAgg        // cache of connAgg's last answer
	lastConnKey       uint64
	curConns          connIndex[*connAgg] // this trace's connections by id
	connList          chunked[connAgg]    // every trace's connections, in first-seen order
	lastProc          *procAgg            // cache of proc's last answer
	lastProcKey       uint64
	fastCmds          map[uint64]*cmdAgg // commands of binary specs by (spec, direction, id)
	specIdx           map[*protocol.Spec]uint64
	hit               *cmdHit         // the entry of cmdHits of the message being counted, nil when none
	cmdHits           [2][2]cmdHit    // the last command of a binary spec by direction (send, recv) and reply
	cmdNames          []string        // the commands numbered for msgRec.cmd (cmdAgg.idx), by number-1
	nByN              int             // Hists in byN
	loopWaits         bool            // the loop analysis saw a wait call in this trace (loopEvent)
	unitCmds          map[string]bool // Options.UnitCommands
	extraMarks        markSet         // Options.Markers'
	nExtraMarks       int             // markers read from Options.Markers
	warnings          []string
	vb                batchAgg           // request frames of several commands (venus-mesa)
	text              textAgg            // statuses and blind spells of text protocols
	ev                *evidence.Analyzer // kernel evidence and findings (evidence/)

	// clientDurNS and servedDurNS sum the spans of the traces that had client round trips,
	// and those that had served ones: the time over which each kind was in flight (a client's
	// trace and its server's, analysed together, each count for their own kind only)
	clientDurNS, servedDurNS   int64
	clientBefore, servedBefore uint64 // the round trips of each kind before the current trace
}

// Analyze reads the traces ins once, streaming, and returns their Summary: totals,
// connections, commands, round trips, units, phases, windows, in-flight and Little's law, the
// batch fit, populations and warnings. A trace that cannot be read gives a
// *protocol.ReadError; a damaged one is analysed as far as it goes, with Recovery set and a
// warning.
func Analyze(ins []protocol.Input, opt Options) (*Summary, error) {
	return AnalyzeVisit(ins, opt, nil)
}

// AnalyzeVisit is Analyze that also hands also (when not nil) every record and every decoded
// message of the same pass, after the analysis has seen it: a verb that needs more than the
// Summary reads each trace once.
func AnalyzeVisit(ins []protocol.Input, opt Options, also protocol.Visitor) (*Summary, error) {
	a, err := analyze(ins, opt, also)
	if err != nil {
		return nil, err
	}
	return a.s, nil
}

// analyze is AnalyzeVisit, returning the analyzer that made the Summary.
func analyze(ins []protocol.Input, opt Options, also protocol.Visitor) (*analyzer, error) {
	a, err := newAnalyzer(opt)
	if err != nil {
		return nil, err
	}
	if opt.Markers != "" {
		if err := a.loadMarkers(opt.Markers); err != nil {
			return nil, err
		}
	}
	if err := scan(ins, a.opt.Spec, &sink{a: a, also: also}); err != nil {
		return nil, err
	}
	a.finish()
	a.loopFinish()
	return a, nil
}

// loadMarkers reads the markers of the trace at path, for every trace analysed.
func (a *analyzer) loadMarkers(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return protocol.NewReadError(path, err)
	}
	defer f.Close()
	r, err := trace.NewReader(f)
	if err != nil {
		return &protocol.ReadError{Path: path, Err: err}
	}
	var rec trace.Record
	for {
		err := r.Next(&rec)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &protocol.ReadError{Path: path, Err: err}
		}
		if rec.Kind == trace.KindMarker && a.nExtraMarks < maxExtraMarkers {
			a.nExtraMarks++
			a.extraMarks.add(&rec.Marker, a.unitName())
		}
	}
}

func newAnalyzer(opt Options) (*analyzer, error) {
	a := &analyzer{opt: opt, conf: opt.Confidence, cmds: map[cmdKey]*cmdAgg{},
		errs: map[errKey]uint64{}, procs: map[uint64]*procAgg{}, lost: map[string]uint64{}}
	if a.conf <= 0 || a.conf >= 1 {
		a.conf = DefaultConfidence
	}
	if a.opt.WindowCalls <= 0 {
		a.opt.WindowCalls = DefaultWindowCalls
	}
	a.infl.useMax = true
	a.budget.limit = opt.RecordMemory
	if a.budget.limit == 0 {
		a.budget.limit = DefaultRecordMemory
	}
	a.recs.budget, a.blocks.budget, a.srvRecv.budget = &a.budget, &a.budget, &a.budget
	a.svcInfl.useMax = true
	a.ev = evidence.New()
	a.specs = map[string]*protocol.Spec{}
	a.fastCmds, a.specIdx = map[uint64]*cmdAgg{}, map[*protocol.Spec]uint64{}
	if opt.UnitCommands != "" {
		a.unitCmds = map[string]bool{}
		for _, n := range strings.Split(opt.UnitCommands, ",") {
			if n = strings.TrimSpace(n); n != "" {
				a.unitCmds[n] = true
			}
		}
	}
	for _, n := range protocol.Builtins() {
		if sp, err := protocol.BuiltinSpec(n); err == nil {
			a.specs[n] = sp
		}
	}
	if sp, err := protocol.Resolve(opt.Protocol, opt.SpecFile, opt.Spec); err != nil {
		return nil, err
	} else if sp != nil {
		a.specs[sp.Name] = sp
		a.opt.Spec = sp
	}
	a.s = &Summary{Schema: SummarySchema, Traces: []string{}, Meta: []trace.Meta{}, Connections: []ConnStats{},
		Commands: []CmdStats{}, Units: []UnitStats{}, LittlesLaw: []LittleRow{}, Modes: []Mode{}, Warnings: []string{}}
	return a, nil
}

func (a *analyzer) warnf(format string, args ...any) {
	a.warnings = append(a.warnings, fmt.Sprintf(format, args...))
}

func (a *analyzer) begin(i int, path string, meta trace.Meta) {
	a.loopBegin(i)
	a.cur = i
	a.ev.Begin(i)
	a.s.Traces = append(a.s.Traces, filepath.Base(path))
	a.s.Meta = append(a.s.Meta, meta)
	a.haveTS = false
	a.recs.reset()
	a.blocks.reset()
	a.srvRecv.reset()
	a.marks.copyOf(&a.extraMarks)
	a.unitSpec, a.lastRecP = "", nil
	a.openers = [2]openers{}
	a.lastConn, a.lastProc = nil, nil
	a.cipher = protocol.NewCipherFilter(meta)
	a.curConns = connIndex[*connAgg]{}
	a.sides, a.sidePID = map[[2]uint64]uint16{}, a.sidePID[:0]
	a.rtEventsSeen, a.tracerPairs, a.rawPairs = 0, a.tracerPairs[:0], a.rawPairs[:0]
	clear(a.netlink)
	if a.lost == nil || i > 0 {
		a.lost = map[string]uint64{}
	}
}

func (a *analyzer) event(ev *trace.Event) {
	a.s.Events++
	a.ev.Event(ev)
	if ev.Op.IsEvidence() {
		return // kernel evidence: read, but not a message
	}
	a.loopEvent(ev)
	end := ev.TS + ev.Dur
	if !a.haveTS {
		a.first, a.last, a.haveTS = ev.TS, end, true
		a.tl.origin, a.infl.origin, a.svcInfl.origin = ev.TS, ev.TS, ev.TS
	} else {
		a.first = min(a.first, ev.TS)
		a.last = max(a.last, end)
	}
	if ev.Dir != trace.DirSend && ev.Dir != trace.DirRecv {
		if ev.Op == trace.OpRoundTrip {
			a.rtEvent(ev)
		}
		return
	}
	if ev.Errno != 0 {
		a.errs[errKey{ev.Errno, ev.Dir}]++
		return
	}
	if ev.Bytes <= 0 && ev.Op != trace.OpFrameSend && ev.Op != trace.OpFrameRecv {
		return
	}
	if ev.Op.Plaintext() {
		a.tlsEvent(ev) // the messages, decoded; their system calls carry them encrypted
		return
	}
	if a.cipher.Cipher(ev) {
		a.cipherEvent(ev)
	}
	t := &a.s.Totals.Send
	if ev.Dir == trace.DirRecv {
		t = &a.s.Totals.Recv
	}
	t.Calls++
	t.Bytes += uint64(ev.Bytes)
	c := a.connAgg(ev.Conn, ev.PID)
	c.dir(ev.Dir).call(ev.Dur, ev.Bytes)
	if a.rtt.n == 0 && a.service.n == 0 {
		// the call latencies stand in for round trips only in a pass that has neither
		// (finishDistribution): once there is one, they are never read
		a.calls.Add(ev.Dur)
	}
}

// add counts one call of dur ns moving n bytes, and closes a window every stride calls: the
// cumulative summary at that many calls, as Venus Plus prints it. Past 64 windows every other
// one is dropped and the stride doubles.
func (w *windowAgg) add(dir, cmd string, dur, n int64, stride int) {
	if w.stride == 0 {
		w.stride = uint64(stride)
		w.next = w.stride
	}
	w.calls++
	w.sumDur += float64(dur)
	w.sumB += float64(n)
	w.maxDur = max(w.maxDur, dur)
	if w.calls == w.next { // a multiple of the stride
		w.next += w.stride
		w.windows = append(w.windows, Window{Dir: dir, Command: cmd, Calls: w.calls, AvgUS: us(w.sumDur / float64(w.calls)),
			AvgBytes: math.Round(w.sumB / float64(w.calls)), MaxUS: us(float64(w.maxDur))})
		if len(w.windows) >= 64 {
			kept := w.windows[:0]
			for _, x := range w.windows {
				if x.Calls%(2*w.stride) == 0 {
					kept = append(kept, x)
				}
			}
			w.windows = kept
			w.stride *= 2
			w.next = (w.calls/w.stride + 1) * w.stride
		}
	}
}

func (a *analyzer) connAgg(id uint64, pid uint32) *connAgg {
	key := id
	if id == 0 {
		key = 1<<63 | uint64(pid)
	}
	if a.lastConn != nil && a.lastConnKey == key {
		return a.lastConn
	}
	c := a.curConns.get(key)
	if c == nil {
		c = a.connList.add(connAgg{trace: int32(a.cur), side: -1, id: id, pid: pid})
		a.curConns.put(key, c)
	}
	a.lastConn, a.lastConnKey = c, key
	return c
}

func (a *analyzer) connection(c *trace.Connection) {
	a.ev.Connection(c)
	ca := a.connAgg(c.ID, c.PID)
	ca.id, ca.family, ca.local, ca.remote = c.ID, c.Family, c.Local, c.Remote
	if c.Family == trace.FamilyNetlink {
		if a.netlink == nil {
			a.netlink = map[uint64]bool{}
		}
		a.netlink[c.ID] = true
	}
	if c.PID != 0 {
		ca.pid = c.PID
	}
}

func (a *analyzer) marker(m *trace.Marker) {
	if a.opt.Markers != "" {
		return // the markers of Options.Markers replace the trace's own
	}
	a.addMarker(m)
}

func (a *analyzer) addMarker(m *trace.Marker) { a.marks.add(m, a.unitName()) }

// unitName is the name of the markers that count units of work: Options.Unit, else "token".
func (a *analyzer) unitName() string {
	if a.opt.Unit == "" {
		return "token"
	}
	return a.opt.Unit
}

func isLoadPhase(name string) bool {
	n := strings.ToLower(name)
	return n == "load" || n == "init" || n == "setup" || n == "warmup"
}

func (a *analyzer) lostCount(l *trace.Lost) { a.lost[l.Source] = l.Count }

func (a *analyzer) message(m *protocol.Message) {
	a.loopMessage(m)
	a.evidenceMessage(m)
	t := &a.s.Totals.Send
	if m.Dir == trace.DirRecv {
		t = &a.s.Totals.Recv
	}
	t.Frames++
	a.text.message(m)
	if m.Truncated {
		a.truncated++
	}
	c := a.connAgg(m.Conn, m.PID)
	if m.Dir == trace.DirSend || m.Dir == trace.DirRecv {
		c.dir(m.Dir).frames++
	}
	if c.side < 0 || c.sidePID != m.PID {
		c.side, c.sidePID = int32(a.sideIndex(m.PID, m.Conn)), m.PID
	}
	a.tl.add(m.TS, 1)
	if isVenusFamily(m.Protocol) {
		// VENUS_TRACE_NET's summaries: per direction, one per message (a received message is
		// its header read and its payload read), from its first call's start to its last
		// call's end, bytes with the header
		a.win[m.Dir].add(m.Dir.String(), "", m.End-m.TS, m.Size, a.opt.WindowCalls)
	}
	ca := a.cmdFor(m)
	ca.count++
	ca.bytes += uint64(m.Size)
	ca.inTrace = int32(a.cur) + 1
	if m.Batch != nil && !m.IsReply {
		a.batch(m)
	}
	// a message counts when it completes, as a client's counters do; its record is filled in
	// where it is kept (a record built apart and copied in stalls on the copy)
	rec := a.recs.next()
	rec.ts, rec.size, rec.proc = m.End, uint32(min(m.Size, math.MaxUint32)), uint16(c.side)
	rec.cmd, rec.busy = a.cmdIndex(ca), uint32(min(max(m.CallNS, 0), math.MaxUint32))
	if m.Dir == trace.DirSend {
		rec.kind |= recSend
	}
	if m.IsReply {
		rec.kind |= recReply
	}
	if !m.IsReply {
		a.unitOpener(m, rec)
	}
	if !m.IsReply && m.Dir == trace.DirRecv && m.CallNS > 0 {
		a.srvRecv.add(interval{m.End - m.CallNS, m.End}) // a server reading a request
	}
	p := a.proc(m.PID)
	if m.Source == trace.SourceTracer {
		a.tracerMessage(m, p, ca, rec)
		return
	}
	a.pairedMessage(m, p, ca, rec)
	a.lastRecP = rec
}

// unitOpener marks r as opening a unit of work when the request m does (by its spec's
// unit_commands, or the --unit-command names), and keeps the unit's name.
func (a *analyzer) unitOpener(m *protocol.Message, r *msgRec) {
	sp := m.Spec()
	if sp == nil {
		return
	}
	var opens bool
	switch {
	case a.unitCmds != nil:
		opens = a.unitCmds[m.Name]
	case a.hit != nil:
		opens = a.hit.opensUnit()
	default:
		opens = sp.OpensUnit(m.Command)
	}
	if opens {
		side := 0
		if m.Dir == trace.DirSend {
			r.kind |= recUnit
		} else {
			r.kind |= recUnitRecv
			side = 1
		}
		a.openers[side].add(r)
		// a unit keeps its name: the one asked for, else the protocol's ("token"), even
		// when --unit-command picks the commands that open it
		switch {
		case a.opt.Unit != "":
			a.unitSpec = a.opt.Unit
		case sp.UnitName != "":
			a.unitSpec = sp.UnitName
		default:
			a.unitSpec = "unit"
		}
	}
}

// tracerMessage counts a message of a tracer's frames: a tracer reports its round trips itself
// (rtEvent), so its frames only count. Pairs of frames stand in for those events when a trace
// has none (end).
func (a *analyzer) tracerMessage(m *protocol.Message, p *procAgg, ca *cmdAgg, r *msgRec) {
	if m.WantsReply && m.Dir == trace.DirSend {
		p.wanting++
	}
	if m.IsReply && m.RTT > 0 && m.Dir == trace.DirRecv && len(a.tracerPairs) < maxTracerPairs {
		a.tracerPairs = append(a.tracerPairs, trace.Event{TS: m.ReqTS, Dur: m.RTT, PID: m.PID, Conn: m.Conn, Command: uint32(m.Command), Op: trace.OpRoundTrip})
	}
	if m.IsReply && m.RTT > 0 && m.Dir == trace.DirSend { // a traced server's reply: its service time
		a.served(p, ca, m.ReqEnd, m.ReqTS, m.TS, m.End)
		r.rts++
	}
}

// pairedMessage counts the round trip a decoded reply completes: a client's, a server's
// service, or an exchange inferred from raw bursts.
func (a *analyzer) pairedMessage(m *protocol.Message, p *procAgg, ca *cmdAgg, r *msgRec) {
	switch {
	case m.IsReply && m.RTT > 0 && m.Spec() != nil && m.Spec().Kind == "raw":
		// an exchange inferred from bursts: counted at the trace's end unless its connection
		// turned out to be full-duplex
		if len(a.rawPairs) < maxTracerPairs {
			key := m.Conn
			if key == 0 {
				key = 1<<63 | uint64(m.PID)
			}
			a.rawPairs = append(a.rawPairs, rawPair{key: key, pid: m.PID, dir: m.Dir, reqTS: m.ReqTS, reqEnd: m.ReqEnd, ts: m.TS, end: m.End, firstEnd: m.FirstEnd})
		}
	case m.IsReply && m.RTT > 0 && m.Dir == trace.DirRecv: // a client's reply
		a.roundTrip(p, ca, m.ReqTS, m.End)
		if m.FirstEnd > m.ReqTS {
			a.firstByte.Add(m.FirstEnd - m.ReqTS)
		}
		r.rts++
	case m.IsReply && m.RTT > 0 && m.Dir == trace.DirSend: // a server's reply: service time
		a.served(p, ca, m.ReqEnd, m.ReqTS, m.TS, m.End)
		r.rts++ // a round trip of its client
	}
}

// served counts a round trip a server served: its service time runs from the request's last
// byte received (reqEnd) to the reply's first byte sent (first) and to its last (last), never
// including the wait for the request. reqTS stands in for reqEnd when that is unknown.
func (a *analyzer) served(p *procAgg, ca *cmdAgg, reqEnd, reqTS, first, last int64) {
	if reqEnd == 0 {
		reqEnd = reqTS
	}
	toFirst, toLast := max(first-reqEnd, 0), max(last-reqEnd, 0)
	a.service.Add(toFirst)
	a.serviceLast.Add(toLast)
	if ca != nil {
		ca.rtt.Add(toFirst)
	}
	p.rts++
	p.served++
	p.serviceArea += float64(toLast)

	a.nServed++
	// requests in service when this one arrived: this one, and the recent ones still in service;
	// and this one was in service when the recent ones that arrived after it did
	to := reqEnd + toLast
	n, f := inFlight(&p.recentSvc, p.nRecentSvc, reqEnd, to)
	if p.nRecentSvc >= nRecent {
		a.commitService(f)
	}
	*f = flight{reqEnd, to, n}
	p.nRecentSvc++
}

// inFlight counts, in a process's ring of its count recent flights (round trips or services),
// those in flight when a flight from..to began, itself included, and counts this one in those
// that began while it was in flight. Flights come in the order they complete, so the walk back
// stops at the first one that ended before this one began. It returns the count and the slot
// the new flight takes, whose flight, once count fills the ring, the caller commits first.
func inFlight(ring *[nRecent]flight, count int, from, to int64) (int, *flight) {
	n := 1
	for i := 1; i <= min(count, nRecent); i++ {
		r := &ring[(count-i)%nRecent]
		if r.to <= from {
			break
		}
		if r.from <= from {
			n++
		} else if r.from < to {
			r.n++
		}
	}
	return n, &ring[count%nRecent]
}

// commitService counts a service's requests in service at its arrival, once final.
func (a *analyzer) commitService(f *flight) {
	n := min(f.n, maxInFlightN)
	a.inflCapped = a.inflCapped || n == maxInFlightN
	a.svcMax = max(a.svcMax, n)
	a.svcInfl.add(f.from, float64(n))
}

// commitFlight counts a round trip by the requests in flight when it went out, once final.
func (a *analyzer) commitFlight(f *flight) {
	n := min(f.n, maxInFlightN)
	a.inflCapped = a.inflCapped || n == maxInFlightN
	h := a.byN[n]
	if h == nil {
		h = &Hist{}
		a.byN[n] = h
		a.nByN++
	}
	h.Add(f.to - f.from)
	a.inflMax = max(a.inflMax, n)
	a.infl.add(f.from, float64(n))
}

// flushFlights counts the flights still in the processes' rings (at a trace's end: only its
// processes' have any), in the order of the processes' keys and, within one, of completion.
func (a *analyzer) flushFlights() {
	for _, k := range slices.Sorted(maps.Keys(a.procs)) {
		p := a.procs[k]
		for i := max(p.nRecent-nRecent, 0); i < p.nRecent; i++ {
			a.commitFlight(&p.recent[i%nRecent])
		}
		for i := max(p.nRecentSvc-nRecent, 0); i < p.nRecentSvc; i++ {
			a.commitService(&p.recentSvc[i%nRecent])
		}
		p.nRecent, p.nRecentSvc = 0, 0
	}
}

// proc returns the aggregate of process pid in the current trace.
func (a *analyzer) proc(pid uint32) *procAgg {
	pk := uint64(a.cur)<<32 | uint64(pid)
	if a.lastProc != nil && a.lastProcKey == pk {
		return a.lastProc
	}
	p := a.procs[pk]
	if p == nil {
		p = &procAgg{}
		a.procs[pk] = p
	}
	a.lastProc, a.lastProcKey = p, pk
	return p
}

// cmdFor returns the aggregate of m's command and direction. Commands of a binary spec are
// found by number (their name follows from it); others by name.
func (a *analyzer) cmdFor(m *protocol.Message) *cmdAgg {
	var fk uint64
	var hit *cmdHit
	a.hit = nil
	if (m.Dir == trace.DirSend || m.Dir == trace.DirRecv) && (m.Name != "" || m.Command != 0) {
		hit = &a.cmdHits[m.Dir-trace.DirSend][b2i(m.IsReply)]
		if hit.ca != nil && hit.spec == m.Spec() && hit.command == m.Command {
			a.hit = hit
			return hit.ca
		}
	}
	if sp := m.Spec(); sp != nil && sp.Kind == "binary" && m.Command < 1<<51 && (m.Name != "" || m.Command != 0) {
		si, ok := a.specIdx[sp]
		if !ok {
			si = uint64(len(a.specIdx) + 1)
			a.specIdx[sp] = si
		}
		if si < 1<<10 {
			fk = si<<54 | uint64(m.Dir)<<52 | m.Command
			if m.IsReply {
				fk |= 1 << 51
			}
			if ca := a.fastCmds[fk]; ca != nil {
				hit.remember(sp, m.Command, ca)
				return ca
			}
		}
	}
	name := m.Name
	if name == "" && m.Command != 0 {
		name = fmt.Sprintf("cmd%d", m.Command)
	}
	if name == "" && m.Protocol == "raw" {
		name = "(raw)"
	}
	if name == "" {
		name = "(unknown)"
	}
	k := cmdKey{proto: m.Protocol, name: name, id: m.Command, dir: m.Dir, reply: m.IsReply, push: m.Push}
	ca := a.cmds[k]
	if ca == nil {
		ca = &cmdAgg{name: name}
		a.cmds[k] = ca
	}
	if fk != 0 {
		a.fastCmds[fk] = ca
		hit.remember(m.Spec(), m.Command, ca)
	}
	return ca
}

// cmdHit is the command a message of a binary spec was last counted under, for one direction
// and reply flag: messages come in runs of few commands, and these need no look-up. It holds
// what fastCmds does, for the key of its spec, direction, reply flag and command.
type cmdHit struct {
	spec    *protocol.Spec
	command uint64
	ca      *cmdAgg
	opens   int8 // spec.OpensUnit(command): 0 not asked yet, 1 no, 2 yes
}

// remember makes ca the command of spec sp and command id (h is nil when the message's
// direction has no entry).
func (h *cmdHit) remember(sp *protocol.Spec, id uint64, ca *cmdAgg) {
	if h != nil {
		*h = cmdHit{spec: sp, command: id, ca: ca}
	}
}

// opensUnit is sp.OpensUnit(id) for the spec and command of h, asked once.
func (h *cmdHit) opensUnit() bool {
	if h.opens == 0 {
		h.opens = 1
		if h.spec.OpensUnit(h.command) {
			h.opens = 2
		}
	}
	return h.opens == 2
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// cmdIndex numbers command ca for the message records.
func (a *analyzer) cmdIndex(ca *cmdAgg) uint32 {
	if ca.idx == 0 && len(a.cmdNames) < math.MaxUint32-1 {
		a.cmdNames = append(a.cmdNames, ca.name)
		ca.idx = uint32(len(a.cmdNames))
	}
	return ca.idx
}

// answered counts a further request answered by the reply m (its first one is m itself);
// it comes after m.
func (a *analyzer) answered(m *protocol.Message, req protocol.Answered) {
	reqTS, cmd, name := req.ReqTS, req.Command, req.Name
	if m.Source == trace.SourceTracer || a.lastRecP == nil {
		return
	}
	pk := uint64(a.cur)<<32 | uint64(m.PID)
	p := a.procs[pk]
	if p == nil {
		return
	}
	if name == "" {
		name = fmt.Sprintf("cmd%d", cmd)
	}
	k := cmdKey{proto: m.Protocol, name: name, id: cmd, dir: m.Dir, reply: true}
	ca := a.cmds[k]
	if ca == nil {
		ca = &cmdAgg{}
		a.cmds[k] = ca
	}
	if m.Dir == trace.DirRecv {
		a.roundTrip(p, ca, reqTS, m.End)
		if r := a.lastRecP; r.rts < 255 {
			r.rts++
		}
	} else {
		a.served(p, ca, req.ReqEnd, reqTS, m.TS, m.End)
		if r := a.lastRecP; r.rts < 255 {
			r.rts++
		}
	}
}

// rtEvent takes a tracer's round-trip event: TS is when the request was sent, Dur the RTT.
func (a *analyzer) rtEvent(ev *trace.Event) {
	pk := uint64(a.cur)<<32 | uint64(ev.PID)
	p := a.procs[pk]
	if p == nil {
		p = &procAgg{}
		a.procs[pk] = p
	}
	p.rtEvents++
	a.rtEventsSeen++
	var ca *cmdAgg
	if sp := a.specs[a.tracerProto(ev)]; sp != nil {
		name := sp.CommandName(uint64(ev.Command))
		if name == "" {
			name = fmt.Sprintf("cmd%d", ev.Command)
		}
		k := cmdKey{proto: sp.Name, name: name, id: uint64(ev.Command), dir: trace.DirRecv, reply: true}
		ca = a.cmds[k]
		if ca == nil {
			ca = &cmdAgg{}
			a.cmds[k] = ca
		}
	}
	a.roundTrip(p, ca, ev.TS, ev.TS+ev.Dur)
	a.recs.add(msgRec{ts: ev.TS + ev.Dur, kind: recRTEvent, proc: a.sideIndex(ev.PID, ev.Conn)})
}

// roundTrip counts a client's round trip from its request's start to its reply's end: the
// RTT, what else was in flight when it started (the recent round trips of the process that
// cover its start), the integral of requests in flight, and the time blocked (the union of
// the round trips' intervals).
func (a *analyzer) roundTrip(p *procAgg, ca *cmdAgg, from, to int64) {
	rtt := to - from
	p.rts++
	n, f := inFlight(&p.recent, p.nRecent, from, to)
	if p.nRecent >= nRecent {
		a.commitFlight(f)
	}
	*f = flight{from, to, n}
	p.nRecent++
	a.rtt.Add(rtt)
	p.area += float64(rtt)
	if ca != nil {
		ca.rtt.Add(rtt)
		ca.win.add("rtt", "", rtt, 0, a.opt.WindowCalls)
	}
	// Round trips end in reply order, not request order: a pipelined request sent before the
	// last closed interval ended can complete now. Its time up to that end is counted already.
	from = max(from, p.closedTo)
	switch {
	case to <= from:
		// wholly within time already counted
	case p.curTo == 0:
		p.curFrom, p.curTo = from, to
	case from <= p.curTo:
		p.curFrom = min(p.curFrom, from)
		p.curTo = max(p.curTo, to)
	default:
		p.closeBlock(a)
		p.curFrom, p.curTo = from, to
	}
}

func (p *procAgg) closeBlock(a *analyzer) {
	if p.curTo > p.curFrom {
		p.blocked += p.curTo - p.curFrom
		a.blocks.add(interval{p.curFrom, p.curTo})
		p.closedTo = p.curTo
	}
	p.curFrom, p.curTo = 0, 0
}

// tracerProto is the protocol of a tracer's events: the chosen spec, else venus (the tracer
// that writes round-trip events).
func (a *analyzer) tracerProto(ev *trace.Event) string {
	if a.opt.Spec != nil {
		return a.opt.Spec.Name
	}
	return "venus"
}

// sideIndex numbers a (process, connection) pair of this trace.
func (a *analyzer) sideIndex(pid uint32, conn uint64) uint16 {
	k := [2]uint64{uint64(pid), conn}
	i, ok := a.sides[k]
	if !ok {
		i = uint16(min(len(a.sides), maxProcs))
		if len(a.sides) < maxProcs {
			a.sides[k] = i
			a.sidePID = append(a.sidePID, pid)
		}
	}
	return i
}

func (a *analyzer) end(i int, rec trace.Recovery, d *protocol.Decoder) {
	pastBefore, blindBefore := a.text.pastHead, a.text.blind
	a.text.end(d, a.s.Meta[i])
	pastHead, blind := a.text.pastHead-pastBefore, a.text.blind-blindBefore
	if _, other, notes := d.Returned(); other > 0 {
		for _, n := range notes {
			a.warnf("%s: %s", a.s.Traces[i], n)
		}
		if more := other - uint64(len(notes)); more > 0 {
			a.warnf("%s: %d more connections retired while idle were decoded as another protocol when they carried data again; each counts once, as its first", a.s.Traces[i], more)
		}
	}
	ls, dr, w := d.Stats()
	_, up, ov := d.Pairing()
	a.unpaired += up
	a.overridden += ov
	switch {
	case up > 0 && pastHead > 0:
		a.warnf("%s: %d replies answer no request seen in the trace: in %d calls the captured payload heads ended before the pipelined messages did, so their requests were not seen (or the trace began mid-conversation); they are not round trips", a.s.Traces[i], up, pastHead)
	case up > 0 && blind > 0:
		a.warnf("%s: %d replies answer no request seen in the trace: in %d calls a message's lines ran past the captured payload head, so requests pipelined behind it in the same call were not seen (or the trace began mid-conversation); they are not round trips", a.s.Traces[i], up, blind)
	case up > 0:
		a.warnf("%s: %d replies answer no request seen in the trace (the trace began mid-conversation, or the decoder misread the requests); they are not round trips", a.s.Traces[i], up)
	}
	if ov > 0 {
		a.warnf("%s: %d replies answered requests that the decoder thought wanted none; paired by the conversation's order", a.s.Traces[i], ov)
	}
	a.lostSync += ls
	if d.Fixed() != nil && a.s.Totals.Send.Frames+a.s.Totals.Recv.Frames == a.framesBefore && a.s.Totals.Send.Calls+a.s.Totals.Recv.Calls > a.callsBefore {
		a.warnf("%s: no message decoded under the protocol asked for (%s): is it the right one? try --protocol auto", a.s.Traces[i], d.Fixed().Name)
	}
	a.framesBefore, a.callsBefore = a.s.Totals.Send.Frames+a.s.Totals.Recv.Frames, a.s.Totals.Send.Calls+a.s.Totals.Recv.Calls
	if lost, seen := d.Undecoded(); lost > 0 && seen > 0 {
		a.s.UndecodedBytes += uint64(lost)
		share := float64(lost) / float64(seen)
		a.warnf("%s: %d of %d bytes (%.1f%%) did not decode as %s; they count in the totals but in no message", a.s.Traces[i], lost, seen, 100*share, strings.Join(d.Protocols(), ","))
		if d.Fixed() != nil && share > 0.5 {
			a.warnf("%s: most bytes fail to decode under the protocol asked for (%s): is it the right one? try --protocol auto", a.s.Traces[i], d.Fixed().Name)
		}
	}
	a.dropped += dr
	a.unanswered += w
	var span int64
	if a.haveTS {
		span = a.last - a.first
		a.durNS += span
	}
	for _, v := range a.lost {
		a.s.Lost += v
	}
	if rec.Damaged() {
		if a.s.Recovery == nil {
			r := rec
			a.s.Recovery = &r
		} else {
			a.s.Recovery.Add(rec)
		}
		if rec.OutOfPlace() {
			a.warnf("%s: trace damaged or cut (%s): chunks were out of place; each chunk was counted once", a.s.Traces[i], rec.String())
		} else {
			a.warnf("%s: trace damaged or cut (%s); results cover what was readable", a.s.Traces[i], rec.String())
		}
	}
	a.rawExchanges(i, d)
	if a.rtEventsSeen == 0 {
		for k := range a.tracerPairs {
			a.rtEvent(&a.tracerPairs[k])
		}
	}
	a.flushFlights() // while the series' origin is this trace's
	for k, p := range a.procs {
		if k>>32 == uint64(i) {
			p.closeBlock(a)
			if p.wanting > p.rtEvents && p.rtEvents > 0 {
				a.tracerUnanswered += p.wanting - p.rtEvents
			}
		}
	}
	a.phasesAndUnits(i)
	if err := a.budget.err; err != nil {
		a.warnf("%s: %v: the per-message records were kept in memory past the record budget (set TMPDIR to a directory with room)", a.s.Traces[i], err)
		a.budget.err = nil
	}
	if err := a.budget.readErr; err != nil {
		a.warnf("%s: %v: the per-unit and per-phase figures are incomplete", a.s.Traces[i], err)
		a.budget.readErr = nil
	}
	a.busy, a.busyMade = nil, false
	a.recs.reset() // and their temporary files closed
	a.blocks.reset()
	a.srvRecv.reset()
	protos := d.Protocols()
	if a.s.Protocol == "" {
		a.s.Protocol = strings.Join(protos, ",")
	} else if j := strings.Join(protos, ","); j != "" && j != a.s.Protocol {
		a.s.Protocol += "," + j
	}
	for _, c := range a.cmds {
		if c.inTrace == int32(i)+1 {
			c.spanNS += span
		}
	}
	// every round trip of the trace is in by now (raw exchanges and tracer pairs included)
	if a.rtt.N() > a.clientBefore {
		a.clientDurNS += span
	}
	if a.nServed > a.servedBefore {
		a.servedDurNS += span
	}
	a.clientBefore, a.servedBefore = a.rtt.N(), a.nServed
}

// isVenusFamily reports whether proto is Venus's (venusd's or real Venus's), where the
// per-100-message summaries of VENUS_TRACE_NET mean something.
func isVenusFamily(proto string) bool { return strings.HasPrefix(proto, "venus") }

// errnoName names errno e. The kernel's own restart codes (512-516), which a system call's
// exit shows when a signal interrupted it (the program then sees the call restarted, or EINTR),
// are named as the kernel names them.
func errnoName(e uint32) string {
	switch e {
	case 11:
		return "EAGAIN"
	case 512:
		return "ERESTARTSYS"
	case 513:
		return "ERESTARTNOINTR"
	case 514:
		return "ERESTARTNOHAND"
	case 516:
		return "ERESTART_RESTARTBLOCK"
	}
	s := syscall.Errno(e).Error()
	return strings.ToUpper(strings.ReplaceAll(s, " ", "_"))
}
