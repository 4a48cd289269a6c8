package export

import (
	"bufio"
	"container/heap"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// PerfettoProto writes the traces ins as one Perfetto trace in its native protobuf format
// (a perfetto.protos.Trace: a stream of TracePackets, protos/perfetto/trace/trace.proto), which
// ui.perfetto.dev and trace_processor open:
//
//   - a track per process (ProcessDescriptor), per thread (ThreadDescriptor) and per
//     connection (a child of its process, named by family and addresses);
//   - a slice per system call or tracer operation on its thread's track, with debug
//     annotations bytes, errno, conn and command;
//   - a slice per round trip, named by its command, on its connection's track (pipelined round
//     trips overlap, so they are spread over child tracks "round trips", "round trips (overlap 1)");
//   - a flow from the system call that sent a request to the one that received its reply;
//   - a counter track "in flight" (unit: requests) per process;
//   - markers: an instant on the thread's track, and a slice on a "markers" track of the
//     process when the marker has a duration.
//
// Names are interned, and timestamps are deltas on a sequence-scoped incremental clock whose
// snapshot ties it to CLOCK_MONOTONIC (the traces' clock); a packet that would go back in time
// carries an absolute CLOCK_MONOTONIC timestamp instead. Packets are written in time order
// within a window of at least 10 ms (four times the longest round trip seen), so memory grows
// with that window, the threads and the connections, not with the length of the traces.
func PerfettoProto(w io.Writer, ins []protocol.Input, opt analyzers.Options) ([]trace.Recovery, error) {
	if len(ins) == 0 {
		return nil, errors.New("write perfetto-proto: no trace given")
	}
	held, done, err := holdTraces(ins)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := analyzers.Messages(nil, opt, func(*protocol.Message) error { return nil }); err != nil {
		return nil, fmt.Errorf("write perfetto-proto: %w", err)
	}
	pp := newProtoWriter(w)
	pp.opt = opt
	err = analyzers.Visit(held, opt, pp)
	if err == nil {
		pp.flushPending()
		pp.drain(math.MaxInt64)
		err = pp.err
		if err == nil {
			err = pp.w.Flush()
		}
	}
	if err != nil {
		var re *protocol.ReadError
		if errors.As(err, &re) {
			return pp.recs, err
		}
		return pp.recs, fmt.Errorf("write perfetto-proto: %w", err)
	}
	return pp.recs, nil
}

// PerfettoProtoTrace writes the trace in like PerfettoProto and returns what its reader
// recovered.
func PerfettoProtoTrace(w io.Writer, in protocol.Input, opt analyzers.Options) (trace.Recovery, error) {
	rc, err := PerfettoProto(w, []protocol.Input{in}, opt)
	if len(rc) == 0 {
		return trace.Recovery{}, err
	}
	return rc[0], err
}

// Field numbers of perfetto.protos messages (protos/perfetto/trace/...).
const (
	pfTracePacket = 1 // Trace.packet

	pfTimestamp        = 8  // TracePacket.timestamp
	pfClockSnapshot    = 6  // TracePacket.clock_snapshot
	pfSequenceID       = 10 // TracePacket.trusted_packet_sequence_id
	pfTrackEvent       = 11 // TracePacket.track_event
	pfInternedData     = 12 // TracePacket.interned_data
	pfSequenceFlags    = 13 // TracePacket.sequence_flags
	pfTimestampClockID = 58 // TracePacket.timestamp_clock_id
	pfPacketDefaults   = 59 // TracePacket.trace_packet_defaults
	pfTrackDescriptor  = 60 // TracePacket.track_descriptor

	pfClocks       = 1 // ClockSnapshot.clocks
	pfPrimaryClock = 2 // ClockSnapshot.primary_trace_clock
	pfClockID      = 1 // ClockSnapshot.Clock.clock_id
	pfClockTS      = 2 // ClockSnapshot.Clock.timestamp
	pfClockIncr    = 3 // ClockSnapshot.Clock.is_incremental

	pfDefaultsClockID    = 58 // TracePacketDefaults.timestamp_clock_id
	pfDefaultsTrackEvent = 11 // TracePacketDefaults.track_event_defaults
	pfTEDTrack           = 11 // TrackEventDefaults.track_uuid

	pfTDUUID    = 1 // TrackDescriptor.uuid
	pfTDName    = 2 // TrackDescriptor.name
	pfTDProcess = 3 // TrackDescriptor.process
	pfTDThread  = 4 // TrackDescriptor.thread
	pfTDParent  = 5 // TrackDescriptor.parent_uuid
	pfTDCounter = 8 // TrackDescriptor.counter

	pfPDPid    = 1 // ProcessDescriptor.pid
	pfPDCmd    = 2 // ProcessDescriptor.cmdline
	pfPDName   = 6 // ProcessDescriptor.process_name
	pfPDLabels = 8 // ProcessDescriptor.process_labels

	pfThPid  = 1 // ThreadDescriptor.pid
	pfThTid  = 2 // ThreadDescriptor.tid
	pfThName = 5 // ThreadDescriptor.thread_name

	pfCDUnit     = 3 // CounterDescriptor.unit
	pfCDUnitName = 6 // CounterDescriptor.unit_name

	pfTECategories         = 22 // TrackEvent.categories
	pfTEDebug              = 4  // TrackEvent.debug_annotations
	pfTEType               = 9  // TrackEvent.type
	pfTENameIID            = 10 // TrackEvent.name_iid
	pfTETrack              = 11 // TrackEvent.track_uuid
	pfTEExtraCounterTracks = 31 // TrackEvent.extra_counter_track_uuids
	pfTEExtraCounterValues = 12 // TrackEvent.extra_counter_values
	// TrackEvent.flow_ids_old and terminating_flow_ids_old: varints, where flow_ids (47, 48)
	// are fixed64. trace_processor reads both; ids numbered from 1 take 2 bytes where a fixed64
	// takes 8, which is what keeps this format 5x smaller than the JSON on eBPF traces.
	pfTEFlows     = 36
	pfTETermFlows = 42

	pfDANameIID     = 1 // DebugAnnotation.name_iid
	pfDAIntValue    = 4 // DebugAnnotation.int_value
	pfDAStringValue = 6 // DebugAnnotation.string_value

	pfIDEventNames = 2 // InternedData.event_names
	pfIDDebugNames = 3 // InternedData.debug_annotation_names
	pfIIDIID       = 1 // EventName.iid, DebugAnnotationName.iid
	pfIIDName      = 2 // EventName.name, DebugAnnotationName.name

	teSliceBegin = 1 // TrackEvent.Type
	teSliceEnd   = 2
	teInstant    = 3

	seqIncrementalStateCleared = 1 // TracePacket.SequenceFlags
	seqNeedsIncrementalState   = 2

	clockMonotonic   = 3  // BUILTIN_CLOCK_MONOTONIC
	clockIncremental = 64 // the first sequence-scoped clock id

	unitCount = 9 // CounterDescriptor.UNIT_COUNT

	protoSequence = 1 // trusted_packet_sequence_id of every timed packet
)

// protoArg is a debug annotation: an integer, or a string when str is set.
type protoArg struct {
	name string
	v    int64
	str  string
	isS  bool
}

// protoEvent is a TrackEvent waiting in the time-ordered queue.
type protoEvent struct {
	ts    int64
	seq   uint64
	typ   uint8
	track uint64
	name  string
	args  []protoArg
	flows []uint64
	terms []uint64
	delta int64    // the change of ctr at this event
	ctr   *counter // the in-flight counter this event changes, nil when none
}

type protoQueue []*protoEvent

func (q protoQueue) Len() int { return len(q) }
func (q protoQueue) Less(i, j int) bool {
	return q[i].ts < q[j].ts || q[i].ts == q[j].ts && q[i].seq < q[j].seq
}
func (q protoQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *protoQueue) Push(x any)   { *q = append(*q, x.(*protoEvent)) }
func (q *protoQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return x
}

// counter is the in-flight counter of one process.
type counter struct {
	track uint64
	n     int64
}

// protoLane is one track of slices that must not overlap.
type protoLane struct {
	uuid  uint64
	start int64 // latest slice start
	end   int64 // latest slice end
}

// protoMaxLanes bounds the lanes of one thread or connection; slices beyond share the last.
const protoMaxLanes = 16

// protoWriter is the protocol.Visitor that writes the packets. The first error sticks in err.
type protoWriter struct {
	w    *bufio.Writer
	err  error
	buf  []byte // the packet being built
	body []byte // a nested message being built
	recs []trace.Recovery

	started  bool   // the clock snapshot and defaults are written
	defTrack uint64 // the track of events that name none (TrackEventDefaults)
	lastTS   int64  // the incremental clock's value
	queue    protoQueue
	seq      uint64
	now      int64 // latest event start seen
	slack    int64 // how far behind now the queue is written, ns

	nextUUID  uint64
	flows     map[[2]uint64]uint64 // (connection, request start) → flow id, of requests awaiting a reply
	nextFlow  uint64
	names     map[string]uint64 // interned event names
	argNames  map[string]uint64 // interned debug annotation names
	procs     map[uint64]uint64 // trace<<32|pid → track uuid
	threads   map[uint64][]*protoLane
	conns     map[uint64][]*protoLane // trace<<48|conn → lanes of round trips (lane 0: the connection's first child)
	connTrack map[uint64]uint64       // trace<<48|conn → the connection's track
	connName  map[uint64]string
	counters  map[uint64]*counter
	markLanes map[uint64][]*protoLane

	// the trace being read
	index   int
	meta    trace.Meta
	pending *protoEvent // the latest event's slice begin, open to flows until the next record
	pendEnd int64
	spec    *protocol.Spec // names the tracer's round-trip commands
	opt     analyzers.Options
}

func newProtoWriter(w io.Writer) *protoWriter {
	return &protoWriter{w: bufio.NewWriterSize(w, 64<<10), slack: inflightMinSlack,
		flows: map[[2]uint64]uint64{}, names: map[string]uint64{}, argNames: map[string]uint64{}, procs: map[uint64]uint64{},
		threads: map[uint64][]*protoLane{}, conns: map[uint64][]*protoLane{}, connTrack: map[uint64]uint64{},
		connName: map[uint64]string{}, counters: map[uint64]*counter{}, markLanes: map[uint64][]*protoLane{}}
}

func (pp *protoWriter) uuid() uint64 {
	pp.nextUUID++
	return pp.nextUUID
}

// packet writes pp.buf as one TracePacket.
func (pp *protoWriter) packet() {
	if pp.err != nil {
		return
	}
	var hdr [12]byte
	h := protowire.AppendTag(hdr[:0], pfTracePacket, protowire.BytesType)
	h = protowire.AppendVarint(h, uint64(len(pp.buf)))
	if _, err := pp.w.Write(h); err != nil {
		pp.err = err
		return
	}
	if _, err := pp.w.Write(pp.buf); err != nil {
		pp.err = err
	}
}

func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendStringField(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, strings.ToValidUTF8(s, "\uFFFD"))
}

func appendMessageField(b []byte, num protowire.Number, msg []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, msg)
}

// start writes the first timed packet's preamble: a clock snapshot that ties the incremental
// clock to CLOCK_MONOTONIC at 0, and the defaults that make every packet use it.
func (pp *protoWriter) start() {
	pp.started = true
	var snap, clk []byte
	clk = appendVarintField(clk[:0], pfClockID, clockMonotonic)
	clk = appendVarintField(clk, pfClockTS, 0)
	snap = appendMessageField(snap, pfClocks, clk)
	clk = appendVarintField(clk[:0], pfClockID, clockIncremental)
	clk = appendVarintField(clk, pfClockTS, 0)
	clk = appendVarintField(clk, pfClockIncr, 1)
	snap = appendMessageField(snap, pfClocks, clk)
	snap = appendVarintField(snap, pfPrimaryClock, clockMonotonic)
	b := appendMessageField(pp.buf[:0], pfClockSnapshot, snap)
	b = appendVarintField(b, pfSequenceID, protoSequence)
	b = appendVarintField(b, pfSequenceFlags, seqIncrementalStateCleared|seqNeedsIncrementalState)
	defs := appendVarintField(nil, pfDefaultsClockID, clockIncremental)
	// The default track: the busiest of the events queued so far (the main thread, usually),
	// whose events then carry no track_uuid.
	n := map[uint64]int{}
	for _, e := range pp.queue {
		n[e.track]++
		if n[e.track] > n[pp.defTrack] {
			pp.defTrack = e.track
		}
	}
	if pp.defTrack != 0 {
		defs = appendMessageField(defs, pfDefaultsTrackEvent, appendVarintField(nil, pfTEDTrack, pp.defTrack))
	}
	b = appendMessageField(b, pfPacketDefaults, defs)
	pp.buf = b
	pp.packet()
}

// descriptor writes a TrackDescriptor packet.
func (pp *protoWriter) descriptor(td []byte) {
	pp.buf = appendMessageField(pp.buf[:0], pfTrackDescriptor, td)
	pp.packet()
}

// processTrack returns the track of process pid of the current trace, describing it first.
func (pp *protoWriter) processTrack(pid uint32) uint64 {
	k := uint64(pp.index)<<32 | uint64(pid)
	if u, ok := pp.procs[k]; ok {
		return u
	}
	u := pp.uuid()
	pp.procs[k] = u
	m := pp.meta
	name := "pid " + strconv.FormatUint(uint64(pid), 10)
	if len(m.Command) > 0 && (len(m.PIDs) == 0 || containsPID(m.PIDs, pid)) {
		name = filepath.Base(m.Command[0]) + " (" + name + ")"
	} else if m.Source != "" {
		name = m.Source + " (" + name + ")"
	}
	if pp.index > 0 {
		name += " [trace " + strconv.Itoa(pp.index) + "]"
	}
	var pd []byte
	pd = appendVarintField(pd, pfPDPid, uint64(pid))
	pd = appendStringField(pd, pfPDName, name)
	if len(m.Command) > 0 && containsPID(m.PIDs, pid) {
		for _, a := range m.Command {
			pd = appendStringField(pd, pfPDCmd, a)
		}
	}
	if l := labels(m.Labels); l != "" {
		for _, kv := range strings.Split(l, ",") {
			pd = appendStringField(pd, pfPDLabels, kv)
		}
	}
	td := appendVarintField(nil, pfTDUUID, u)
	td = appendMessageField(td, pfTDProcess, pd)
	pp.descriptor(td)
	return u
}

// lane returns the track of the lanes in *ls that can take a slice [from, to], creating one
// (described by describe) when none can. Slices of a lane do not overlap.
func (pp *protoWriter) lane(ls *[]*protoLane, from, to int64, describe func(i int, uuid uint64)) uint64 {
	for i, l := range *ls {
		if l.end <= from && from >= l.start || i == protoMaxLanes-1 {
			l.start, l.end = from, max(l.end, to)
			return l.uuid
		}
	}
	l := &protoLane{uuid: pp.uuid(), start: from, end: to}
	*ls = append(*ls, l)
	describe(len(*ls)-1, l.uuid)
	return l.uuid
}

// threadTrack returns the track of thread tid for a slice [from, to].
func (pp *protoWriter) threadTrack(pid, tid uint32, from, to int64) uint64 {
	proc := pp.processTrack(pid)
	k := uint64(pp.index)<<32 | uint64(pid)<<16 ^ uint64(tid)
	ls := pp.threads[k]
	u := pp.lane(&ls, from, to, func(i int, u uint64) {
		td := appendVarintField(nil, pfTDUUID, u)
		name := "tid " + strconv.FormatUint(uint64(tid), 10)
		if tid == pid {
			name = "main " + name
		}
		if i == 0 {
			var th []byte
			th = appendVarintField(th, pfThPid, uint64(pid))
			th = appendVarintField(th, pfThTid, uint64(tid))
			th = appendStringField(th, pfThName, name)
			td = appendMessageField(td, pfTDThread, th)
		} else {
			td = appendVarintField(td, pfTDParent, proc)
			td = appendStringField(td, pfTDName, name+" (overlap "+strconv.Itoa(i)+")")
		}
		pp.descriptor(td)
	})
	pp.threads[k] = ls
	return u
}

// connKey keys connection conn of the current trace.
func (pp *protoWriter) connKey(conn uint64) uint64 { return uint64(pp.index)<<48 ^ conn }

// connectionTrack returns the track of a connection, describing it (again, when its name
// changed: the connection record may come after its first events).
func (pp *protoWriter) connectionTrack(pid uint32, conn uint64, name string) uint64 {
	k := pp.connKey(conn)
	u, ok := pp.connTrack[k]
	if ok && (name == "" || pp.connName[k] == name) {
		return u
	}
	if !ok {
		u = pp.uuid()
		pp.connTrack[k] = u
	}
	if name == "" {
		name = "conn " + strconv.FormatUint(conn, 10)
	}
	pp.connName[k] = name
	td := appendVarintField(nil, pfTDUUID, u)
	td = appendVarintField(td, pfTDParent, pp.processTrack(pid))
	td = appendStringField(td, pfTDName, name)
	pp.descriptor(td)
	return u
}

// roundTripTrack returns the track of a connection's round trip [from, to].
func (pp *protoWriter) roundTripTrack(pid uint32, conn uint64, from, to int64) uint64 {
	parent := pp.connectionTrack(pid, conn, "")
	k := pp.connKey(conn)
	ls := pp.conns[k]
	u := pp.lane(&ls, from, to, func(i int, u uint64) {
		name := "round trips"
		if i > 0 {
			name += " (overlap " + strconv.Itoa(i) + ")"
		}
		td := appendVarintField(nil, pfTDUUID, u)
		td = appendVarintField(td, pfTDParent, parent)
		td = appendStringField(td, pfTDName, name)
		pp.descriptor(td)
	})
	pp.conns[k] = ls
	return u
}

// counterOf returns the in-flight counter of process pid.
func (pp *protoWriter) counterOf(pid uint32) *counter {
	k := uint64(pp.index)<<32 | uint64(pid)
	if c := pp.counters[k]; c != nil {
		return c
	}
	c := &counter{track: pp.uuid()}
	pp.counters[k] = c
	cd := appendVarintField(nil, pfCDUnit, unitCount)
	cd = appendStringField(cd, pfCDUnitName, "requests")
	td := appendVarintField(nil, pfTDUUID, c.track)
	td = appendVarintField(td, pfTDParent, pp.processTrack(pid))
	td = appendStringField(td, pfTDName, "in flight")
	td = appendMessageField(td, pfTDCounter, cd)
	pp.descriptor(td)
	return c
}

// push queues a track event.
func (pp *protoWriter) push(e *protoEvent) {
	pp.seq++
	e.seq = pp.seq
	heap.Push(&pp.queue, e)
}

// advance moves stream time to ts and writes what the window has passed.
func (pp *protoWriter) advance(ts int64) {
	if ts > pp.now {
		pp.now = ts
	}
	pp.drain(pp.now - pp.slack)
}

// drain writes the queued events at or before upTo, in time order.
func (pp *protoWriter) drain(upTo int64) {
	for len(pp.queue) > 0 && pp.queue[0].ts <= upTo && pp.err == nil {
		e := heap.Pop(&pp.queue).(*protoEvent)
		if e.ctr != nil {
			e.ctr.n += e.delta
		}
		pp.write(e)
	}
}

// intern returns the iid of s in m, and appends its definition to defs when it is new.
func intern(m map[string]uint64, s string, defs *[]byte, field protowire.Number) uint64 {
	if id, ok := m[s]; ok {
		return id
	}
	id := uint64(len(m) + 1)
	m[s] = id
	en := appendVarintField(nil, pfIIDIID, id)
	en = appendStringField(en, pfIIDName, s)
	*defs = appendMessageField(*defs, field, en)
	return id
}

// write encodes one queued event as a TracePacket.
func (pp *protoWriter) write(e *protoEvent) {
	if !pp.started {
		pp.start()
	}
	var defs []byte
	te := pp.body[:0]
	te = appendVarintField(te, pfTEType, uint64(e.typ))
	if e.track != pp.defTrack {
		te = appendVarintField(te, pfTETrack, e.track)
	}
	if e.name != "" {
		te = appendVarintField(te, pfTENameIID, intern(pp.names, e.name, &defs, pfIDEventNames))
	}
	for _, a := range e.args {
		var da []byte
		da = appendVarintField(da, pfDANameIID, intern(pp.argNames, a.name, &defs, pfIDDebugNames))
		if a.isS {
			da = appendStringField(da, pfDAStringValue, a.str)
		} else {
			da = appendVarintField(da, pfDAIntValue, uint64(a.v))
		}
		te = appendMessageField(te, pfTEDebug, da)
	}
	if e.ctr != nil {
		// The in-flight counter's value from this instant, carried by the round trip's own
		// begin or end: no packet of its own.
		te = appendVarintField(te, pfTEExtraCounterTracks, e.ctr.track)
		te = appendVarintField(te, pfTEExtraCounterValues, uint64(max(e.ctr.n, 0)))
	}
	for _, f := range e.flows {
		te = appendVarintField(te, pfTEFlows, f)
	}
	for _, f := range e.terms {
		te = appendVarintField(te, pfTETermFlows, f)
	}
	pp.body = te
	b := pp.buf[:0]
	if e.ts >= pp.lastTS {
		b = appendVarintField(b, pfTimestamp, uint64(e.ts-pp.lastTS))
		pp.lastTS = e.ts
	} else { // back in time: an absolute CLOCK_MONOTONIC time, the incremental clock unmoved
		b = appendVarintField(b, pfTimestamp, uint64(e.ts))
		b = appendVarintField(b, pfTimestampClockID, clockMonotonic)
	}
	// Only the first packet of the sequence carries its flags: trace_processor reads
	// SEQ_NEEDS_INCREMENTAL_STATE only to drop packets whose sequence lost data, which a file
	// written in one go never does, and two bytes a packet are a tenth of the file.
	b = appendVarintField(b, pfSequenceID, protoSequence)
	if len(defs) > 0 {
		b = appendMessageField(b, pfInternedData, defs)
	}
	b = appendMessageField(b, pfTrackEvent, te)
	pp.buf = b
	pp.packet()
}

// slice queues a slice [ts, ts+dur] on track; with c, the slice is a request in flight that
// counts in c from its begin to its end.
func (pp *protoWriter) slice(track uint64, ts, dur int64, name string, args []protoArg, c *counter) {
	b := &protoEvent{ts: ts, typ: teSliceBegin, track: track, name: name, args: args}
	e := &protoEvent{ts: ts + max(dur, 0), typ: teSliceEnd, track: track}
	if c != nil {
		b.ctr, b.delta = c, +1
		e.ctr, e.delta = c, -1
	}
	pp.push(b)
	pp.push(e)
}

// protoMaxFlows bounds the requests awaiting a reply that keep their flow; past it, the
// waiting flows are forgotten (their replies get no arrow).
const protoMaxFlows = 1 << 20

// startFlow numbers the flow of a request that started at reqTS on connection conn.
func (pp *protoWriter) startFlow(conn uint64, reqTS int64) uint64 {
	if len(pp.flows) >= protoMaxFlows {
		clear(pp.flows)
	}
	pp.nextFlow++
	pp.flows[[2]uint64{pp.connKey(conn), uint64(reqTS)}] = pp.nextFlow
	return pp.nextFlow
}

// endFlow returns the flow of the request that started at reqTS on connection conn, and
// forgets it; 0 when there is none.
func (pp *protoWriter) endFlow(conn uint64, reqTS int64) uint64 {
	k := [2]uint64{pp.connKey(conn), uint64(reqTS)}
	id := pp.flows[k]
	delete(pp.flows, k)
	return id
}

// flushPending queues the latest event's slice, which no message can reach any more.
func (pp *protoWriter) flushPending() {
	if e := pp.pending; e != nil {
		pp.pending = nil
		pp.push(e)
		pp.push(&protoEvent{ts: pp.pendEnd, typ: teSliceEnd, track: e.track})
	}
}

// Begin starts a trace.
func (pp *protoWriter) Begin(i int, path string, meta trace.Meta) {
	pp.index, pp.meta = i, meta
	pp.now = math.MinInt64
	pp.spec = pp.opt.Spec
	if pp.spec == nil && pp.opt.SpecFile != "" {
		pp.spec, _ = protocol.LoadSpec(pp.opt.SpecFile)
	}
	if p := pp.opt.Protocol; pp.spec == nil && p != "" && p != "auto" {
		pp.spec, _ = protocol.BuiltinSpec(p)
	}
	if pp.spec == nil {
		pp.spec, _ = protocol.BuiltinSpec("venus") // the tracer that writes round-trip events
	}
}

// Record takes one record.
func (pp *protoWriter) Record(rec *trace.Record) {
	pp.flushPending()
	if pp.err != nil {
		return
	}
	switch rec.Kind {
	case trace.KindEvent:
		e := &rec.Event
		pp.advance(e.TS)
		name := e.Op.String()
		if e.Op == trace.OpRoundTrip {
			cmd := pp.spec.CommandName(uint64(e.Command))
			if cmd == "" {
				cmd = "cmd" + strconv.FormatUint(uint64(e.Command), 10)
			}
			pp.slowDown(e.Dur)
			track := pp.roundTripTrack(e.PID, e.Conn, e.TS, e.TS+e.Dur)
			pp.slice(track, e.TS, e.Dur, cmd, nil, nil)
			return
		}
		args := []protoArg{{name: "bytes", v: e.Bytes}}
		if e.Errno != 0 {
			args = append(args, protoArg{name: "errno", v: int64(e.Errno)})
		}
		if e.Command != 0 {
			args = append(args, protoArg{name: "command", v: int64(e.Command)})
		}
		end := e.TS + max(e.Dur, 0)
		pp.pending = &protoEvent{ts: e.TS, typ: teSliceBegin, track: pp.threadTrack(e.PID, e.TID, e.TS, end), name: name, args: args}
		pp.pendEnd = end
	case trace.KindConnection:
		c := &rec.Conn
		pp.connectionTrack(c.PID, c.ID, "conn "+strconv.FormatUint(c.ID, 10)+": "+c.Family.String()+" "+c.Local+" → "+c.Remote)
	case trace.KindMarker:
		m := &rec.Marker
		pp.advance(m.TS)
		name := m.Name
		if m.Text != "" {
			name += " " + m.Text
		}
		args := []protoArg{{name: "value", v: m.Value}}
		if m.Dur > 0 {
			proc := pp.processTrack(m.PID)
			k := uint64(pp.index)<<32 | uint64(m.PID)
			ls := pp.markLanes[k]
			track := pp.lane(&ls, m.TS, m.TS+m.Dur, func(i int, u uint64) {
				td := appendVarintField(nil, pfTDUUID, u)
				td = appendVarintField(td, pfTDParent, proc)
				n := "markers"
				if i > 0 {
					n += " (overlap " + strconv.Itoa(i) + ")"
				}
				td = appendStringField(td, pfTDName, n)
				pp.descriptor(td)
			})
			pp.markLanes[k] = ls
			pp.slice(track, m.TS, m.Dur, name, args, nil)
			return
		}
		pp.push(&protoEvent{ts: m.TS, typ: teInstant, track: pp.threadTrack(m.PID, m.TID, m.TS, m.TS), name: name, args: args})
	}
}

// slowDown widens the window so that a round trip of rtt ns is queued before its start is
// written.
func (pp *protoWriter) slowDown(rtt int64) {
	pp.slack = max(pp.slack, 4*rtt)
}

// Message takes a decoded message: flows to and from the system call that completed it, and
// for a reply its round trip and the in-flight counter.
func (pp *protoWriter) Message(m *protocol.Message) {
	if pp.err != nil {
		return
	}
	if m.WantsReply && !m.IsReply && pp.pending != nil {
		pp.pending.flows = append(pp.pending.flows, pp.startFlow(m.Conn, m.TS))
	}
	if !m.IsReply || m.RTT <= 0 {
		return
	}
	if id := pp.endFlow(m.Conn, m.ReqTS); id != 0 && pp.pending != nil {
		pp.pending.terms = append(pp.pending.terms, id)
	}
	pp.slowDown(max(m.RTT, m.End-m.TS))
	name := m.Name
	if name == "" {
		name = m.Protocol + " command " + strconv.FormatUint(m.Command, 10)
	}
	args := []protoArg{{name: "reply_bytes", v: m.Size}}
	if m.ReqID != 0 {
		args = append(args, protoArg{name: "req_id", v: int64(m.ReqID)})
	}
	pp.slice(pp.roundTripTrack(m.PID, m.Conn, m.ReqTS, m.ReqTS+m.RTT), m.ReqTS, m.RTT, name, args, pp.counterOf(m.PID))
}

// Answered takes a further request answered by a batched reply: its flow ends there too.
func (pp *protoWriter) Answered(m *protocol.Message, req protocol.Answered) {
	if id := pp.endFlow(m.Conn, req.ReqTS); id != 0 && pp.pending != nil {
		pp.pending.terms = append(pp.pending.terms, id)
	}
}

// End closes a trace.
func (pp *protoWriter) End(i int, rec trace.Recovery) {
	pp.flushPending()
	pp.drain(math.MaxInt64) // the next trace has a clock of its own
	pp.recs = append(pp.recs, rec)
}
