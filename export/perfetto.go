package export

import (
	"bufio"
	"container/heap"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// Perfetto writes the traces ins as one Chrome trace JSON timeline (the "traceEvents"
// format) that ui.perfetto.dev and chrome://tracing open:
//
//   - a track per traced thread (pid/tid), named by metadata events ("ph":"M");
//   - a complete slice ("ph":"X") per system call or tracer operation, with args bytes, conn,
//     direction, errno and command (connection addresses are listed once, in otherData);
//   - an async slice ("ph":"b"/"e", category "round_trip") per round trip, on the thread that
//     waited for the reply; async slices may overlap, as pipelined requests do;
//   - a counter ("ph":"C", "in flight" with arg "requests") per process;
//   - an instant ("ph":"i") per marker (token, phase), and an async slice per marker span;
//   - on a merged trace of several hosts (perflab merge), processes named after their host, and
//     a flow ("ph":"s"/"t"/"f", category "host_flow") per round trip seen at both hosts, from
//     the client's request through the server's receipt and reply to the client's receipt.
//
// Timestamps are the traces' monotonic clock in microseconds with nanosecond decimals. The
// output is streamed: memory grows with the number of threads, connections and round trips
// outstanding at once, not with the length of the traces. opt selects the protocol decoder
// that finds round trips.
func Perfetto(w io.Writer, ins []protocol.Input, opt analyzers.Options) error {
	_, err := perfetto(w, ins, opt)
	return err
}

// PerfettoTrace writes the trace in like Perfetto and returns what its reader recovered,
// for callers that warn about a damaged or cut trace.
func PerfettoTrace(w io.Writer, in protocol.Input, opt analyzers.Options) (trace.Recovery, error) {
	rc, err := perfetto(w, []protocol.Input{in}, opt)
	if len(rc) == 0 {
		return trace.Recovery{}, err
	}
	return rc[0], err
}

// perfetto opens each trace once and reads it once. The timeline lists every trace's records
// first, then the round trips the decoder pairs (and, for a merged trace, the flows between
// its hosts): the records are written as they are read, and the messages the round trips come
// from wait in a temporary file (messageLog) until the records are all written.
func perfetto(w io.Writer, ins []protocol.Input, opt analyzers.Options) ([]trace.Recovery, error) {
	if len(ins) == 0 {
		return nil, errors.New("write perfetto: no trace given")
	}
	held, done, err := holdTraces(ins)
	if err != nil {
		return nil, err
	}
	defer done()
	// Check the decoder options (a protocol spec file, say) before writing anything: with no
	// paths, Messages only resolves them.
	if err := analyzers.Messages(nil, opt, func(*protocol.Message) error { return nil }); err != nil {
		return nil, fmt.Errorf("write perfetto: %w", err)
	}
	pw := &perfettoWriter{w: bufio.NewWriterSize(w, 64<<10), procs: map[uint32]bool{},
		threads: map[uint64]bool{}, lanes: map[uint64][]*lane{}}
	// No displayTimeUnit: Perfetto ignores it and flags it in the trace's info page.
	pw.raw(`{"traceEvents":[` + "\n")
	pp, err := newPerfettoPass(pw)
	if err != nil {
		return nil, fmt.Errorf("write perfetto: %w", err)
	}
	defer pp.log.close()
	if err := analyzers.Visit(held, opt, protocol.Tee(pp, pp.flows)); err != nil {
		return pp.recs, err
	}
	if pw.err != nil {
		return pp.recs, fmt.Errorf("write perfetto: %w", pw.err)
	}
	if err := pw.roundTrips(pp.log); err != nil {
		return pp.recs, err
	}
	if err := pw.hostFlows(pp.flows); err != nil {
		return pp.recs, fmt.Errorf("write perfetto: %w", err)
	}
	pw.raw("\n],\n" + `"otherData":{`)
	for i, o := range pp.other {
		if i > 0 {
			pw.raw(",")
		}
		pw.raw(`"trace` + strconv.Itoa(i) + `":`)
		pw.str(o)
	}
	pw.raw("}}\n")
	if pw.err != nil {
		return pp.recs, fmt.Errorf("write perfetto: %w", pw.err)
	}
	if err := pw.w.Flush(); err != nil {
		return pp.recs, fmt.Errorf("write perfetto: %w", err)
	}
	return pp.recs, nil
}

// perfettoWriter streams trace events. The first write error sticks in err.
type perfettoWriter struct {
	w       *bufio.Writer
	err     error
	n       int                // events written
	procs   map[uint32]bool    // processes already named
	threads map[uint64]bool    // pid<<32|tid of tracks already named
	lanes   map[uint64][]*lane // pid<<32|tid → the tracks its complete slices are spread over
	buf     []byte
	ids     uint64 // async slice ids handed out
	// hostNamed holds the pids already named after their host (merged traces), clocks each
	// trace's clocks (several for a merged trace).
	hostNamed map[uint32]bool
	clocks    [][]trace.Clock
}

func (pw *perfettoWriter) raw(s string) {
	if pw.err == nil {
		_, pw.err = pw.w.WriteString(s)
	}
}

// str writes s as a JSON string; invalid UTF-8 becomes U+FFFD, and <, >, & are escaped, so
// hostile text from a trace stays inert.
func (pw *perfettoWriter) str(s string) {
	if pw.err != nil {
		return
	}
	if plainJSON(s) {
		pw.w.WriteByte('"')
		pw.w.WriteString(s)
		_, pw.err = pw.w.WriteString(`"`)
		return
	}
	b, _ := json.Marshal(s) // a string always marshals
	_, pw.err = pw.w.Write(b)
}

// plainJSON reports whether s can be written between quotes as it is: printable ASCII without
// quote, backslash or the characters json.Marshal escapes for HTML.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// begin starts a new element of traceEvents.
func (pw *perfettoWriter) begin() {
	if pw.n > 0 {
		pw.raw(",\n")
	}
	pw.n++
}

// us writes ns as microseconds with three decimals.
func (pw *perfettoWriter) us(ns int64) {
	pw.buf = appendUS(pw.buf[:0], ns)
	if pw.err == nil {
		_, pw.err = pw.w.Write(pw.buf)
	}
}

// appendUS appends ns in microseconds with exactly three decimals ("12.345").
func appendUS(b []byte, ns int64) []byte {
	u := uint64(ns)
	if ns < 0 {
		b = append(b, '-')
		u = uint64(-ns)
	}
	b = strconv.AppendUint(b, u/1000, 10)
	f := u % 1000
	return append(b, '.', byte('0'+f/100), byte('0'+f/10%10), byte('0'+f%10))
}

func (pw *perfettoWriter) int(v int64) {
	pw.buf = strconv.AppendInt(pw.buf[:0], v, 10)
	if pw.err == nil {
		_, pw.err = pw.w.Write(pw.buf)
	}
}

func (pw *perfettoWriter) uint(v uint64) {
	pw.buf = strconv.AppendUint(pw.buf[:0], v, 10)
	if pw.err == nil {
		_, pw.err = pw.w.Write(pw.buf)
	}
}

// head writes the fields every event has.
func (pw *perfettoWriter) head(ph, cat, name string, pid, tid uint32, ts int64) {
	pw.begin()
	pw.raw(`{"ph":"` + ph + `","cat":"` + cat + `","name":`)
	pw.str(name)
	pw.raw(`,"pid":`)
	pw.uint(uint64(pid))
	pw.raw(`,"tid":`)
	pw.uint(uint64(tid))
	pw.raw(`,"ts":`)
	pw.us(ts)
}

// traceState is what the writer keeps about one trace while streaming it.
type traceState struct {
	index           int
	path            string
	meta            trace.Meta
	conns           map[uint64]string // id → "tcp 127.0.0.1:40000 → 127.0.0.1:5556"
	events, markers uint64
	lost            map[string]uint64 // by source
}

// record writes one record of the trace st: a slice, a marker, thread names; it keeps the
// trace's connections, counts and losses for its description.
func (pw *perfettoWriter) record(st *traceState, rec *trace.Record) {
	switch rec.Kind {
	case trace.KindConnection:
		c := rec.Conn
		st.conns[c.ID] = c.Family.String() + " " + c.Local + " → " + c.Remote
	case trace.KindEvent:
		pw.nameHost(st, &rec.Event)
		pw.name(st, rec.Event.PID, rec.Event.TID)
		pw.event(st, &rec.Event)
		st.events++
	case trace.KindMarker:
		pw.name(st, rec.Marker.PID, rec.Marker.TID)
		pw.marker(&rec.Marker)
		st.markers++
	case trace.KindLost:
		st.lost[rec.Lost.Source] = rec.Lost.Count // cumulative: the latest is the total
	}
}

// describeTrace returns a one-line description of the trace st, read as rc says, for otherData.
func describeTrace(st *traceState, rc trace.Recovery) string {
	m := st.meta
	// A strings.Builder: the description grows by one entry per connection, and adding to a
	// string would copy it each time (quadratic in connections).
	var info strings.Builder
	fmt.Fprintf(&info, "%s: %d events, %d markers, %d connections; host %s, kernel %s, source %s, started %s",
		filepath.Base(st.path), st.events, st.markers, len(st.conns), m.Host, m.Kernel, m.Source, m.Start.UTC().Format("2006-01-02T15:04:05.000Z"))
	if len(m.Command) > 0 {
		info.WriteString(", command " + strings.Join(m.Command, " "))
	}
	if l := labels(m.Labels); l != "" {
		info.WriteString(", labels " + l)
	}
	srcs := make([]string, 0, len(st.lost))
	for k := range st.lost {
		srcs = append(srcs, k)
	}
	slices.Sort(srcs)
	for _, k := range srcs {
		fmt.Fprintf(&info, "; lost %s: %d", k, st.lost[k])
	}
	ids := make([]uint64, 0, len(st.conns))
	for id := range st.conns {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		info.WriteString("; conn ")
		info.WriteString(strconv.FormatUint(id, 10))
		info.WriteString(": ")
		info.WriteString(st.conns[id])
	}
	if rc.Damaged() {
		info.WriteString("; recovery: " + rc.String())
	}
	return info.String()
}

// labels formats labels as sorted K=V pairs.
func labels(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + m[k]
	}
	return strings.Join(keys, ",")
}

// name writes the metadata events naming pid and tid the first time they appear.
func (pw *perfettoWriter) name(st *traceState, pid, tid uint32) {
	if !pw.procs[pid] {
		pw.procs[pid] = true
		n := "pid " + strconv.FormatUint(uint64(pid), 10)
		if len(st.meta.Command) > 0 && (len(st.meta.PIDs) == 0 || containsPID(st.meta.PIDs, pid)) {
			n = filepath.Base(st.meta.Command[0]) + " (" + n + ")"
		} else if st.meta.Source != "" {
			n = st.meta.Source + " (" + n + ")"
		}
		pw.meta("process_name", pid, 0, n)
		if l := labels(st.meta.Labels); l != "" {
			pw.begin()
			pw.raw(`{"ph":"M","name":"process_labels","pid":`)
			pw.uint(uint64(pid))
			pw.raw(`,"args":{"labels":`)
			pw.str(l)
			pw.raw("}}")
		}
	}
	pw.nameThread(pid, tid, 0)
}

// nameThread names the track of lane i of thread tid the first time it appears.
func (pw *perfettoWriter) nameThread(pid, tid uint32, i int) {
	track := laneTID(tid, i)
	tk := uint64(pid)<<32 | uint64(track)
	if pw.threads[tk] {
		return
	}
	pw.threads[tk] = true
	n := "tid " + strconv.FormatUint(uint64(tid), 10)
	if tid == pid {
		n = "main " + n
	}
	if i > 0 {
		n += " (overlap " + strconv.Itoa(i) + ")"
	}
	pw.meta("thread_name", pid, track, n)
}

// lane is one track of a thread's complete slices: slices on a track must nest, so a slice
// that overlaps another without nesting in it (a tracer's operations from goroutines that
// share a thread id) goes to the next lane that can take it.
type lane struct {
	last int64   // start of the latest slice, ns
	ends []int64 // ends of the slices open at last, outermost first
}

// maxLanes bounds the lanes of one thread; slices beyond it share the last lane.
const maxLanes = 64

// laneTID returns the track id of lane i of thread tid: the thread itself for lane 0, else a
// synthetic id with bit 31 set (above every Linux tid, whose maximum is 2^22).
func laneTID(tid uint32, i int) uint32 {
	if i == 0 {
		return tid
	}
	return 1<<31 | uint32(i)<<22 | tid&(1<<22-1)
}

// place returns the lane of thread (pid, tid) that can take a slice [ts, end].
func (pw *perfettoWriter) place(pid, tid uint32, ts, end int64) int {
	k := uint64(pid)<<32 | uint64(tid)
	ls := pw.lanes[k]
	for i, l := range ls {
		if ts < l.last && i < maxLanes-1 {
			continue // out of order on this lane: try the next
		}
		for len(l.ends) > 0 && l.ends[len(l.ends)-1] <= ts {
			l.ends = l.ends[:len(l.ends)-1]
		}
		if len(l.ends) == 0 || end <= l.ends[len(l.ends)-1] || i == maxLanes-1 {
			l.ends = append(l.ends, end)
			l.last = max(l.last, ts)
			return i
		}
	}
	pw.lanes[k] = append(ls, &lane{last: ts, ends: []int64{end}})
	return len(ls)
}

func containsPID(ps []uint32, p uint32) bool {
	for _, x := range ps {
		if x == p {
			return true
		}
	}
	return false
}

func (pw *perfettoWriter) meta(kind string, pid, tid uint32, name string) {
	pw.begin()
	pw.raw(`{"ph":"M","name":"` + kind + `","pid":`)
	pw.uint(uint64(pid))
	pw.raw(`,"tid":`)
	pw.uint(uint64(tid))
	pw.raw(`,"args":{"name":`)
	pw.str(name)
	pw.raw("}}")
}

// event writes one system call or tracer operation. A tracer's round trip becomes an async
// slice, because round trips of a pipelined client overlap; everything else is a complete
// slice on its thread.
func (pw *perfettoWriter) event(st *traceState, e *trace.Event) {
	name := e.Op.String()
	if e.Command != 0 {
		name += " " + commandHex(e.Command)
	}
	if e.Op == trace.OpRoundTrip {
		pw.async("tracer_round_trip", name, e.PID, e.TID, e.TS, e.Dur, func() { pw.eventArgs(st, e) })
		return
	}
	i := pw.place(e.PID, e.TID, e.TS, e.TS+max(e.Dur, 0))
	if i > 0 {
		pw.nameThread(e.PID, e.TID, i)
	}
	pw.head("X", e.Source.String(), name, e.PID, laneTID(e.TID, i), e.TS)
	pw.raw(`,"dur":`)
	pw.us(max(e.Dur, 0))
	pw.raw(`,"args":{`)
	pw.eventArgs(st, e)
	pw.raw("}}")
}

func commandHex(c uint32) string { return "0x" + strconv.FormatUint(uint64(c), 16) }

// eventArgs writes the args of an event (without braces).
func (pw *perfettoWriter) eventArgs(st *traceState, e *trace.Event) {
	pw.raw(`"bytes":`)
	pw.int(e.Bytes)
	pw.raw(`,"dir":"` + e.Dir.String() + `"`)
	if e.Conn != 0 {
		pw.raw(`,"conn":`)
		pw.uint(e.Conn)
	}
	if e.Errno != 0 {
		pw.raw(`,"errno":`)
		pw.uint(uint64(e.Errno))
	}
	if e.Command != 0 {
		pw.raw(`,"command":`)
		pw.uint(uint64(e.Command))
	}
	if e.ReqID != 0 {
		pw.raw(`,"req_id":`)
		pw.uint(e.ReqID)
	}
	if st.index > 0 {
		pw.raw(`,"trace":`)
		pw.int(int64(st.index))
	}
}

// async writes a begin/end pair of an async slice with a fresh id; args writes the begin
// event's args (without braces) and may be nil.
func (pw *perfettoWriter) async(cat, name string, pid, tid uint32, ts, dur int64, args func()) {
	pw.ids++
	id := strconv.FormatUint(pw.ids, 10)
	pw.head("b", cat, name, pid, tid, ts)
	pw.raw(`,"id":` + id)
	if args != nil {
		pw.raw(`,"args":{`)
		args()
		pw.raw("}")
	}
	pw.raw("}")
	pw.head("e", cat, name, pid, tid, ts+max(dur, 0))
	pw.raw(`,"id":` + id + "}")
}

// marker writes a marker as an instant on its thread's track, and a marker with a duration also
// as an async slice. Perfetto gives each name of async slice its own track, so a span is named
// by the marker's name and text ("token", "phase load"), never by its value (17 is in its
// args); the instant carries the value in its name ("token 17").
func (pw *perfettoWriter) marker(m *trace.Marker) {
	name := m.Name
	if m.Text != "" {
		name += " " + m.Text
	}
	args := func() {
		pw.raw(`"value":`)
		pw.int(m.Value)
		if m.Text != "" {
			pw.raw(`,"text":`)
			pw.str(m.Text)
		}
	}
	if m.Dur > 0 {
		// The span on its own track, and an instant where it starts on the thread's track,
		// which carries the value in its name ("token 17") for reading the timeline.
		pw.async("marker", name, m.PID, m.TID, m.TS, m.Dur, args)
	}
	if m.Text == "" && (m.Value != 0 || m.Name == "token") {
		name += " " + strconv.FormatInt(m.Value, 10)
	}
	pw.head("i", "marker", name, m.PID, m.TID, m.TS)
	pw.raw(`,"s":"t","args":{`)
	args()
	pw.raw("}}")
}

// roundTrips writes the round trips the protocol decoder paired, from the messages of the
// pass (log), and the requests in flight of each process as a counter: up at a request that
// wants a reply, down at the end of its reply.
func (pw *perfettoWriter) roundTrips(log *messageLog) error {
	rt := &roundTripWriter{pw: pw, counters: map[[2]uint64]*inflight{}}
	if err := log.replay(rt.message); err != nil {
		return fmt.Errorf("write perfetto: %w", err)
	}
	rt.finish()
	return pw.err
}

// roundTripWriter writes the round trips and the in-flight counters, message by message.
type roundTripWriter struct {
	pw       *perfettoWriter
	counters map[[2]uint64]*inflight
	last     *inflight
}

// message writes the round trip that m, a reply, ends, and the counter changes that m's time
// lets go.
func (rt *roundTripWriter) message(m *protocol.Message) error {
	pw := rt.pw
	pid := m.PID
	if m.Trace < len(pw.clocks) && len(pw.clocks[m.Trace]) > 1 {
		pid = hostPID(pid, hostOf(pw.clocks[m.Trace], m.Conn)) // the host's process (merged traces)
	}
	k := [2]uint64{uint64(m.Trace), uint64(pid)}
	c := rt.last
	if c == nil || c.key != k {
		c = rt.counters[k]
		if c == nil {
			c = &inflight{key: k, pid: pid, name: "in flight"}
			if m.Trace > 0 {
				// Traces may reuse pids: keep their counters apart.
				c.name += " (trace " + strconv.Itoa(m.Trace) + ")"
			}
			rt.counters[k] = c
		}
		rt.last = c
	}
	if m.IsReply && m.RTT > 0 {
		c.slack = max(c.slack, inflightMinSlack, 4*m.RTT, 4*(m.End-m.TS))
		c.push(m.ReqTS, +1)
		c.push(m.ReqTS+m.RTT, -1)
		pw.roundTrip(m, pid)
	}
	c.flush(pw, m.TS-c.slack)
	return pw.err
}

// roundTrip writes the round trip that reply m ends, on process pid.
func (pw *perfettoWriter) roundTrip(m *protocol.Message, pid uint32) {
	name := m.Name
	if name == "" {
		name = m.Protocol + " command " + strconv.FormatUint(m.Command, 10)
	}
	pw.async("round_trip", name, pid, m.TID, m.ReqTS, m.RTT, func() {
		pw.raw(`"conn":`)
		pw.uint(m.Conn)
		pw.raw(`,"command":`)
		pw.uint(m.Command)
		pw.raw(`,"reply_bytes":`)
		pw.int(m.Size)
		if m.ReqID != 0 {
			pw.raw(`,"req_id":`)
			pw.uint(m.ReqID)
		}
		pw.raw(`,"protocol":`)
		pw.str(m.Protocol)
	})
}

// finish writes every counter's changes still held, counter by counter.
func (rt *roundTripWriter) finish() {
	keys := make([][2]uint64, 0, len(rt.counters))
	for k := range rt.counters {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i][0] < keys[j][0] || keys[i][0] == keys[j][0] && keys[i][1] < keys[j][1]
	})
	for _, k := range keys {
		rt.counters[k].flush(rt.pw, math.MaxInt64)
	}
}

// inflightMinSlack is the least time a change of the in-flight counter is held back, ns: 10 ms
// covers the round trips of every system the seeds describe without holding much in memory.
const inflightMinSlack = 10_000_000

// inflight turns answered requests into a counter of requests in flight: up at the request's
// start, down at the end of its reply. A round trip is known only when its reply arrives, after
// its start, so each change is held until the stream has moved past it by more than four times
// the longest round trip seen (slack); memory holds the changes of that window only. A change
// that comes later than that anyway is written at the last time written, so the counter never
// runs backwards in time. Requests never answered are not counted.
type inflight struct {
	key     [2]uint64
	pid     uint32
	name    string
	slack   int64
	pending changeHeap
	n       int64
	lastTS  int64
	written bool
	seq     uint64
}

type change struct {
	ts    int64
	delta int64
	seq   uint64 // arrival order, to keep equal times stable
}

type changeHeap []change

func (h changeHeap) Len() int { return len(h) }
func (h changeHeap) Less(i, j int) bool {
	return h[i].ts < h[j].ts || h[i].ts == h[j].ts && h[i].seq < h[j].seq
}
func (h changeHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *changeHeap) Push(x any)   { *h = append(*h, x.(change)) }
func (h *changeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (c *inflight) push(ts, delta int64) {
	c.seq++
	heap.Push(&c.pending, change{ts, delta, c.seq})
}

// flush writes the changes at or before upTo, one counter event per distinct time.
func (c *inflight) flush(pw *perfettoWriter, upTo int64) {
	for len(c.pending) > 0 && c.pending[0].ts <= upTo {
		ch := heap.Pop(&c.pending).(change)
		c.n += ch.delta
		ts := ch.ts
		if c.written && ts < c.lastTS {
			ts = c.lastTS
		}
		if len(c.pending) > 0 && c.pending[0].ts <= upTo && c.pending[0].ts <= ts {
			continue // more changes at this instant: write the net value once
		}
		pw.head("C", "inflight", c.name, c.pid, 0, ts)
		pw.raw(`,"args":{"requests":`) // Perfetto names the track "in flight requests"
		pw.int(max(c.n, 0))
		pw.raw("}}")
		c.lastTS, c.written = ts, true
	}
}
