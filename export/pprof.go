package export

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/google/pprof/profile"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// Sample types of the pprof profile, in value order. A message sample counts a protocol
// message (frame) and the time and bytes of the calls that carried it; a round-trip sample
// counts a reply paired with its request and the time from the request's start to the reply's
// end.
var pprofSampleTypes = []*profile.ValueType{
	{Type: "messages", Unit: "count"},
	{Type: "latency", Unit: "nanoseconds"},
	{Type: "bytes", Unit: "bytes"},
	{Type: "round_trips", Unit: "count"},
	{Type: "rtt", Unit: "nanoseconds"},
}

// Pprof writes the messages of the traces ins as a gzipped pprof profile that
// `go tool pprof` opens. Each sample sits on a synthetic call stack
// process → thread → connection → direction → command, so a flame graph shows which
// processes, threads, connections and commands the messages and round trips belong to.
// The sample types are messages/count, latency/nanoseconds (time of the calls that carried
// each message), bytes/bytes, round_trips/count and rtt/nanoseconds; the default is rtt when
// the traces have round trips, latency otherwise. opt selects the protocol decoder. Memory
// grows with the number of distinct stacks, not with the traces' length.
func Pprof(w io.Writer, ins []protocol.Input, opt analyzers.Options) error {
	p, _, err := buildProfile(ins, opt)
	if err != nil {
		return err
	}
	if err := p.Write(w); err != nil {
		return fmt.Errorf("write pprof: %w", err)
	}
	return nil
}

// PprofTrace writes the trace in like Pprof and returns what its reader recovered, for
// callers that warn about a damaged or cut trace.
func PprofTrace(w io.Writer, in protocol.Input, opt analyzers.Options) (trace.Recovery, error) {
	p, infos, err := buildProfile([]protocol.Input{in}, opt)
	if err != nil {
		return trace.Recovery{}, err
	}
	if err := p.Write(w); err != nil {
		return infos[0].recovery, fmt.Errorf("write pprof: %w", err)
	}
	return infos[0].recovery, nil
}

// stackKey identifies one synthetic call stack.
type stackKey struct {
	trace int
	pid   uint32
	tid   uint32
	conn  uint64
	dir   string // "send", "recv", "round trip"
	cmd   string
}

// traceInfo is what the profile needs of a trace besides its messages: names for processes
// and connections, and the time span.
type traceInfo struct {
	name       string
	meta       trace.Meta
	conns      map[uint64]string
	first, end int64
	recovery   trace.Recovery
}

// buildProfile reads the traces once each: their names, connections and spans, and their
// messages, which it lays out as a profile.
func buildProfile(ins []protocol.Input, opt analyzers.Options) (*profile.Profile, []*traceInfo, error) {
	if len(ins) == 0 {
		return nil, nil, errors.New("build pprof: no trace given")
	}
	held, done, err := holdTraces(ins)
	if err != nil {
		return nil, nil, err
	}
	defer done()
	pv := &pprofPass{st: stacks{values: map[stackKey]*[5]int64{}}}
	if err := analyzers.Visit(held, opt, pv); err != nil {
		var re *protocol.ReadError
		if errors.As(err, &re) {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("build pprof: %w", err)
	}
	infos, st := pv.infos, pv.st
	p := newProfile(infos, st.proto, st.rtts)
	addSamples(p, infos, st.values)
	if err := p.CheckValid(); err != nil {
		return nil, nil, fmt.Errorf("build pprof: %w", err)
	}
	return p, infos, nil
}

// stacks sums the sample values (messages, latency ns, bytes, round trips, rtt ns) of each
// synthetic call stack.
type stacks struct {
	values map[stackKey]*[5]int64
	proto  string // the protocol of the last message
	rtts   bool   // whether any reply carried a round-trip time
}

func (st *stacks) add(k stackKey, v [5]int64) {
	a := st.values[k]
	if a == nil {
		a = new([5]int64)
		st.values[k] = a
	}
	for i := range v {
		a[i] += v[i]
	}
}

// message counts m on its command's stack, and its round trip when it is a reply that has one.
func (st *stacks) message(m *protocol.Message) error {
	st.proto = m.Protocol
	name := m.Name
	if name == "" {
		name = m.Protocol + " command " + strconv.FormatUint(m.Command, 10)
	}
	if m.IsReply {
		name += " reply"
	}
	st.add(stackKey{m.Trace, m.PID, m.TID, m.Conn, m.Dir.String(), name},
		[5]int64{1, max(m.End-m.TS, 0), max(m.Size, 0), 0, 0})
	if m.IsReply && m.RTT > 0 {
		st.rtts = true
		st.add(stackKey{m.Trace, m.PID, m.TID, m.Conn, "round trip", m.Name},
			[5]int64{0, 0, 0, 1, m.RTT})
	}
	return nil
}

// newProfile returns an empty profile with the sample types, the traces and protocol as
// comments, and the first trace's start and span; its default sample is rtt when there are
// round trips.
func newProfile(infos []*traceInfo, proto string, rtts bool) *profile.Profile {
	p := &profile.Profile{
		SampleType:        pprofSampleTypes,
		DefaultSampleType: "latency",
		PeriodType:        &profile.ValueType{Type: "messages", Unit: "count"},
		Period:            1,
	}
	if rtts {
		p.DefaultSampleType = "rtt"
	}
	first, end := int64(0), int64(0)
	for i, ti := range infos {
		p.Comments = append(p.Comments, "trace "+ti.name)
		if proto != "" && i == 0 {
			p.Comments = append(p.Comments, "protocol "+proto)
		}
		if i == 0 {
			if !ti.meta.Start.IsZero() {
				p.TimeNanos = ti.meta.Start.UnixNano()
			}
			first, end = ti.first, ti.end
		}
	}
	p.DurationNanos = max(end-first, 0)
	return p
}

// addSamples adds one sample per stack to p, in a stable order, with one mapping per trace and
// one location per distinct frame.
func addSamples(p *profile.Profile, infos []*traceInfo, values map[stackKey]*[5]int64) {
	keys := make([]stackKey, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b stackKey) int {
		return cmp.Or(cmp.Compare(a.trace, b.trace), cmp.Compare(a.pid, b.pid), cmp.Compare(a.tid, b.tid),
			cmp.Compare(a.conn, b.conn), cmp.Compare(a.dir, b.dir), cmp.Compare(a.cmd, b.cmd))
	})
	// One mapping per trace, marked as already symbolized, so that pprof neither looks for a
	// binary nor tries to symbolize the synthetic frames.
	for i, ti := range infos {
		p.Mapping = append(p.Mapping, &profile.Mapping{ID: uint64(i + 1), File: ti.name,
			HasFunctions: true, HasFilenames: true})
	}
	locs := map[string]*profile.Location{}
	loc := func(name, file string, m *profile.Mapping) *profile.Location {
		key := file + "\x00" + name
		if l, ok := locs[key]; ok {
			return l
		}
		fn := &profile.Function{ID: uint64(len(p.Function) + 1), Name: name, SystemName: name, Filename: file}
		p.Function = append(p.Function, fn)
		l := &profile.Location{ID: uint64(len(p.Location) + 1), Mapping: m, Line: []profile.Line{{Function: fn}}}
		p.Location = append(p.Location, l)
		locs[key] = l
		return l
	}
	for _, k := range keys {
		ti := infos[k.trace]
		file, m := ti.name, p.Mapping[k.trace]
		proc := processName(ti, k.pid)
		if len(infos) > 1 {
			proc = ti.name + ": " + proc
		}
		// Leaf first, as pprof wants.
		stack := []*profile.Location{
			loc(k.cmd, file, m),
			loc(k.dir, file, m),
			loc(connName(ti, k.conn), file, m),
			loc(proc+" tid "+strconv.FormatUint(uint64(k.tid), 10), file, m),
			loc(proc, file, m),
		}
		p.Sample = append(p.Sample, &profile.Sample{Location: stack, Value: values[k][:]})
	}
}

// connName names a connection frame: "conn 3 tcp 127.0.0.1:40000 → 127.0.0.1:5556".
func connName(ti *traceInfo, conn uint64) string {
	if conn == 0 {
		return "no connection"
	}
	name := "conn " + strconv.FormatUint(conn, 10)
	if c, ok := ti.conns[conn]; ok {
		name += " " + c
	}
	return name
}

// processName names a process by the recorded command when it is one of the target pids.
func processName(ti *traceInfo, pid uint32) string {
	n := "pid " + strconv.FormatUint(uint64(pid), 10)
	m := ti.meta
	if len(m.Command) > 0 && (len(m.PIDs) == 0 || containsPID(m.PIDs, pid)) {
		return filepath.Base(m.Command[0]) + " " + n
	}
	return n
}

// pprofPass gathers, in one pass over the traces (a protocol.Visitor), each trace's
// metadata, connections and time span, and the stacks of its messages.
type pprofPass struct {
	infos []*traceInfo
	ti    *traceInfo
	seen  bool // ti has its first event
	st    stacks
}

func (pv *pprofPass) Begin(_ int, path string, meta trace.Meta) {
	pv.ti = &traceInfo{name: filepath.Base(path), meta: meta, conns: map[uint64]string{}}
	pv.infos = append(pv.infos, pv.ti)
	pv.seen = false
}

func (pv *pprofPass) Record(rec *trace.Record) {
	ti := pv.ti
	switch rec.Kind {
	case trace.KindConnection:
		c := rec.Conn
		ti.conns[c.ID] = c.Family.String() + " " + c.Local + " → " + c.Remote
	case trace.KindEvent:
		e := &rec.Event
		if !pv.seen || e.TS < ti.first {
			ti.first = e.TS
		}
		if !pv.seen || e.TS+e.Dur > ti.end {
			ti.end = e.TS + e.Dur
		}
		pv.seen = true
	}
}

func (pv *pprofPass) Message(m *protocol.Message)                   { pv.st.message(m) }
func (pv *pprofPass) Answered(*protocol.Message, protocol.Answered) {}
func (pv *pprofPass) End(_ int, rec trace.Recovery)                 { pv.ti.recovery = rec }
