package export

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

var (
	perfettoDescOnce sync.Once
	perfettoDesc     protoreflect.MessageDescriptor
	perfettoDescErr  error
)

// perfettoTraceDesc compiles Perfetto's own trace protos (testdata/perfetto) and returns the
// descriptor of perfetto.protos.Trace.
func perfettoTraceDesc(t *testing.T) protoreflect.MessageDescriptor {
	t.Helper()
	perfettoDescOnce.Do(func() {
		c := protocompile.Compiler{Resolver: &protocompile.SourceResolver{ImportPaths: []string{"testdata/perfetto"}}}
		files, err := c.Compile(context.Background(), "perfetto_trace.proto")
		if err != nil {
			perfettoDescErr = err
			return
		}
		perfettoDesc = files[0].Messages().ByName("Trace")
	})
	if perfettoDescErr != nil || perfettoDesc == nil {
		t.Fatalf("compile perfetto_trace.proto: %v", perfettoDescErr)
	}
	return perfettoDesc
}

// noUnknown fails when m or a message inside it holds a field its descriptor does not define.
func noUnknown(t *testing.T, m protoreflect.Message, path string) {
	t.Helper()
	if u := m.GetUnknown(); len(u) > 0 {
		num, _, _ := protowire.ConsumeTag(u)
		t.Fatalf("%s: %d bytes of fields the official protos do not define (field %d first)", path, len(u), num)
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
			return true
		}
		switch {
		case fd.IsList():
			for i := 0; i < v.List().Len(); i++ {
				noUnknown(t, v.List().Get(i).Message(), path+"."+string(fd.Name()))
			}
		case fd.IsMap():
		default:
			noUnknown(t, v.Message(), path+"."+string(fd.Name()))
		}
		return true
	})
}

// pmsg reads fields of a dynamic message by name.
type pmsg struct{ m protoreflect.Message }

func (p pmsg) has(name string) bool {
	fd := p.m.Descriptor().Fields().ByName(protoreflect.Name(name))
	return fd != nil && p.m.Has(fd)
}
func (p pmsg) get(name string) protoreflect.Value {
	return p.m.Get(p.m.Descriptor().Fields().ByName(protoreflect.Name(name)))
}
func (p pmsg) msg(name string) pmsg { return pmsg{p.get(name).Message()} }
func (p pmsg) uint(name string) uint64 {
	v := p.get(name)
	switch x := v.Interface().(type) {
	case uint64:
		return x
	case uint32:
		return uint64(x)
	case int64:
		return uint64(x)
	case int32:
		return uint64(x)
	case protoreflect.EnumNumber:
		return uint64(x)
	}
	return 0
}
func (p pmsg) list(name string) []protoreflect.Value {
	l := p.get(name).List()
	out := make([]protoreflect.Value, l.Len())
	for i := range out {
		out[i] = l.Get(i)
	}
	return out
}

// decodedSlice is a slice rebuilt from the packets, as trace_processor would.
type decodedSlice struct {
	track      uint64
	name       string
	begin, end int64
	args       map[string]int64
	flows      []uint64
	terms      []uint64
	counter    map[uint64][]int64 // counter track → values set at begin and end
}

// decodedTrace is what a perfetto-proto file says, decoded with the official protos.
type decodedTrace struct {
	procs    map[uint64]int64 // track → pid
	threads  map[uint64][2]int64
	named    map[uint64]string // track → name (non-thread, non-process tracks)
	parents  map[uint64]uint64
	counters map[uint64]string // counter track → unit name
	slices   []*decodedSlice
	packets  int
}

// decodePerfettoProto decodes data as a perfetto.protos.Trace and rebuilds its tracks, slices,
// flows and counters: timestamps from the incremental clock (or an absolute CLOCK_MONOTONIC one),
// interned names, default tracks, and slice ends matched to begins per track in time order.
func decodePerfettoProto(t *testing.T, data []byte) *decodedTrace {
	t.Helper()
	msg := dynamicpb.NewMessage(perfettoTraceDesc(t))
	if err := proto.Unmarshal(data, msg); err != nil {
		t.Fatalf("decode with perfetto_trace.proto: %v", err)
	}
	noUnknown(t, msg, "Trace")
	d := &decodedTrace{procs: map[uint64]int64{}, threads: map[uint64][2]int64{}, named: map[uint64]string{},
		parents: map[uint64]uint64{}, counters: map[uint64]string{}}
	names, argNames := map[uint64]string{}, map[uint64]string{}
	var incr int64
	var defTrack uint64
	clockOK := false
	type ev struct {
		ts   int64
		seq  int
		typ  uint64
		s    *decodedSlice
		ctrs map[uint64]int64
	}
	var evs []ev
	for i, pv := range (pmsg{msg}).list("packet") {
		p := pmsg{pv.Message()}
		d.packets++
		if p.has("clock_snapshot") {
			for _, c := range p.msg("clock_snapshot").list("clocks") {
				cm := pmsg{c.Message()}
				if cm.uint("clock_id") == 64 && cm.get("is_incremental").Bool() {
					incr, clockOK = int64(cm.uint("timestamp")), true
				}
			}
			if p.msg("clock_snapshot").uint("primary_trace_clock") != 3 {
				t.Fatal("the clock snapshot does not make CLOCK_MONOTONIC the trace's clock")
			}
		}
		if p.has("trace_packet_defaults") {
			df := p.msg("trace_packet_defaults")
			if df.uint("timestamp_clock_id") != 64 {
				t.Fatalf("defaults use clock %d", df.uint("timestamp_clock_id"))
			}
			if df.has("track_event_defaults") {
				defTrack = df.msg("track_event_defaults").uint("track_uuid")
			}
		}
		if p.has("interned_data") {
			id := p.msg("interned_data")
			for _, e := range id.list("event_names") {
				names[pmsg{e.Message()}.uint("iid")] = pmsg{e.Message()}.get("name").String()
			}
			for _, e := range id.list("debug_annotation_names") {
				argNames[pmsg{e.Message()}.uint("iid")] = pmsg{e.Message()}.get("name").String()
			}
		}
		if p.has("track_descriptor") {
			td := p.msg("track_descriptor")
			u := td.uint("uuid")
			switch {
			case td.has("process"):
				d.procs[u] = int64(td.msg("process").uint("pid"))
			case td.has("thread"):
				th := td.msg("thread")
				d.threads[u] = [2]int64{int64(th.uint("pid")), int64(th.uint("tid"))}
			default:
				d.named[u] = td.get("name").String()
				d.parents[u] = td.uint("parent_uuid")
				if td.has("counter") {
					d.counters[u] = td.msg("counter").get("unit_name").String()
				}
			}
		}
		if !p.has("track_event") {
			continue
		}
		if !clockOK || p.uint("trusted_packet_sequence_id") != 1 {
			t.Fatalf("packet %d: a track event before the clock snapshot, or off its sequence", i)
		}
		var ts int64
		switch p.uint("timestamp_clock_id") {
		case 0:
			incr += int64(p.uint("timestamp"))
			ts = incr
		case 3:
			ts = int64(p.uint("timestamp"))
		default:
			t.Fatalf("packet %d: clock %d", i, p.uint("timestamp_clock_id"))
		}
		te := p.msg("track_event")
		track := defTrack
		if te.has("track_uuid") {
			track = te.uint("track_uuid")
		}
		e := ev{ts: ts, seq: i, typ: te.uint("type")}
		ctrTracks, ctrVals := te.list("extra_counter_track_uuids"), te.list("extra_counter_values")
		if len(ctrTracks) != len(ctrVals) {
			t.Fatalf("packet %d: %d counter tracks, %d values", i, len(ctrTracks), len(ctrVals))
		}
		if len(ctrTracks) > 0 {
			e.ctrs = map[uint64]int64{}
			for k := range ctrTracks {
				e.ctrs[ctrTracks[k].Uint()] = ctrVals[k].Int()
			}
		}
		switch e.typ {
		case 1, 3:
			s := &decodedSlice{track: track, begin: ts, end: ts, args: map[string]int64{}, counter: map[uint64][]int64{}}
			n, ok := names[te.uint("name_iid")]
			if !ok {
				t.Fatalf("packet %d: name iid %d not interned before", i, te.uint("name_iid"))
			}
			s.name = n
			for _, a := range te.list("debug_annotations") {
				am := pmsg{a.Message()}
				an, ok := argNames[am.uint("name_iid")]
				if !ok {
					t.Fatalf("packet %d: annotation name iid %d not interned", i, am.uint("name_iid"))
				}
				s.args[an] = am.get("int_value").Int()
			}
			for _, f := range te.list("flow_ids_old") {
				s.flows = append(s.flows, f.Uint())
			}
			for _, f := range te.list("terminating_flow_ids_old") {
				s.terms = append(s.terms, f.Uint())
			}
			e.s = s
			d.slices = append(d.slices, s)
		case 2:
			e.s = &decodedSlice{track: track}
		default:
			t.Fatalf("packet %d: track event type %d", i, e.typ)
		}
		evs = append(evs, e)
	}
	// trace_processor sorts by time, keeping the file's order at equal times; then a track's
	// slices must nest: every end closes the latest open slice of its track.
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].ts < evs[j].ts })
	open := map[uint64][]*decodedSlice{}
	for _, e := range evs {
		switch e.typ {
		case 1:
			open[e.s.track] = append(open[e.s.track], e.s)
			for c, v := range e.ctrs {
				e.s.counter[c] = append(e.s.counter[c], v)
			}
		case 2:
			st := open[e.s.track]
			if len(st) == 0 {
				t.Fatalf("a slice end at %d on track %d closes nothing", e.ts, e.s.track)
			}
			s := st[len(st)-1]
			open[e.s.track] = st[:len(st)-1]
			s.end = e.ts
			for c, v := range e.ctrs {
				s.counter[c] = append(s.counter[c], v)
			}
		}
	}
	for tr, st := range open {
		if len(st) > 0 {
			t.Fatalf("track %d: %d slices never end", tr, len(st))
		}
	}
	return d
}

// TestPerfettoProto decodes the export of traces of each source with Perfetto's own protos and
// checks it against the trace and its decoded messages: a process, thread and connection track
// each, a slice per system call with its bytes, a round-trip slice per answered request on
// its connection, a flow from each request to its reply, the in-flight counter, and a file at
// least 5x smaller than the JSON export.
func TestPerfettoProto(t *testing.T) {
	dir := t.TempDir()
	paths := []string{
		venusTrace(t, dir, "tracer.plt", trace.SourceTracer, 8),
		venusTrace(t, dir, "ebpf.plt", trace.SourceEBPF, 8),
		pingpongTrace(t, dir),
	}
	// real recordings, from the shared/ directory beside the repository when it is there
	for _, real := range []string{"llamacpp/client-default.plt", "venusplus/server-phase9.plt"} {
		for _, up := range []string{"../..", "../../.."} {
			if p := filepath.Join(up, "shared", "real", real); fileExists(p) {
				paths = append(paths, p)
				break
			}
		}
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			var pb, js bytes.Buffer
			rc, err := PerfettoProtoTrace(&pb, protocol.Files([]string{path}, nil)[0], analyzers.Options{})
			if err != nil || rc.Damaged() {
				t.Fatalf("export: %v (%v)", err, rc)
			}
			if _, err := PerfettoTrace(&js, protocol.Files([]string{path}, nil)[0], analyzers.Options{}); err != nil {
				t.Fatal(err)
			}
			if ratio := float64(js.Len()) / float64(pb.Len()); ratio < 5 {
				t.Errorf("%d bytes against %d of JSON: %.2fx smaller, want at least 5x", pb.Len(), js.Len(), ratio)
			}
			d := decodePerfettoProto(t, pb.Bytes())
			f, err := trace.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// what the trace and its decoder say
			pids, tids, conns := map[int64]bool{}, map[[2]int64]bool{}, map[uint64]bool{}
			var calls, callBytes int64
			tracerRTs := 0
			for _, e := range f.Events {
				pids[int64(e.PID)] = true
				if e.Op == trace.OpRoundTrip {
					tracerRTs++
					continue
				}
				tids[[2]int64{int64(e.PID), int64(e.TID)}] = true
				calls++
				callBytes += e.Bytes
			}
			for _, c := range f.Connections {
				conns[c.ID] = true
			}
			var replies, requests int
			err = analyzers.Messages(protocol.Files([]string{path}, nil), analyzers.Options{}, func(m *protocol.Message) error {
				if m.IsReply && m.RTT > 0 {
					replies++
				}
				if m.WantsReply && !m.IsReply {
					requests++
				}
				return nil
			})

			if err != nil {
				t.Fatal(err)
			}
			// tracks
			for pid := range pids {
				found := false
				for _, p := range d.procs {
					found = found || p == pid
				}
				if !found {
					t.Errorf("no process track for pid %d", pid)
				}
			}
			threadOf := map[uint64]bool{}
			for u, th := range d.threads {
				threadOf[u] = true
				if !tids[th] {
					t.Errorf("thread track %v for a thread without events", th)
				}
			}
			if len(d.threads) != len(tids) {
				t.Errorf("%d thread tracks, the trace has %d threads", len(d.threads), len(tids))
			}
			connTracks := 0
			for u, n := range d.named {
				if strings.HasPrefix(n, "conn ") {
					connTracks++
					if _, ok := d.procs[d.parents[u]]; !ok {
						t.Errorf("connection track %q is not under a process", n)
					}
				}
			}
			if connTracks != len(conns) {
				t.Errorf("%d connection tracks, the trace has %d connections", connTracks, len(conns))
			}
			// slices
			var gotCalls, gotBytes int64
			rts, flowsOut, flowsIn := 0, map[uint64]int{}, map[uint64]int{}
			var maxInflight int64
			for _, s := range d.slices {
				switch {
				case threadOf[s.track] || strings.Contains(d.named[s.track], "overlap") && threadOf[d.parents[s.track]] || strings.HasPrefix(d.named[s.track], "tid ") || strings.HasPrefix(d.named[s.track], "main tid "):
					if b, ok := s.args["bytes"]; ok {
						gotCalls++
						gotBytes += b
					}
				case strings.HasPrefix(d.named[s.track], "round trips"):
					rts++
					if !strings.HasPrefix(d.named[d.parents[s.track]], "conn ") {
						t.Errorf("round trip %q not under a connection", s.name)
					}
					if s.end <= s.begin {
						t.Errorf("round trip %q of %d ns", s.name, s.end-s.begin)
					}
					for c, vs := range s.counter {
						if d.counters[c] != "requests" {
							t.Errorf("round trip sets counter track %d, not an in-flight counter", c)
						}
						for _, v := range vs {
							if v < 0 {
								t.Errorf("in flight %d", v)
							}
							maxInflight = max(maxInflight, v)
						}
					}
				}
				for _, id := range s.flows {
					flowsOut[id]++
				}
				for _, id := range s.terms {
					flowsIn[id]++
				}
			}
			if gotCalls != calls || gotBytes != callBytes {
				t.Errorf("%d call slices of %d bytes, the trace has %d calls of %d bytes", gotCalls, gotBytes, calls, callBytes)
			}
			if rts != replies+tracerRTs || rts == 0 {
				t.Errorf("%d round-trip slices, want %d decoded and %d of the tracer", rts, replies, tracerRTs)
			}
			if maxInflight < 1 {
				t.Error("the in-flight counter never rises")
			}
			if len(flowsOut) != requests {
				t.Errorf("%d flows start, %d requests want a reply", len(flowsOut), requests)
			}
			ended := 0
			for id, n := range flowsIn {
				if n != 1 || flowsOut[id] != 1 {
					t.Errorf("flow %d ends %d times, starts %d times", id, n, flowsOut[id])
				}
				ended++
			}
			t.Logf("%d bytes (JSON %d): %d packets, %d processes, %d threads, %d connections, %d call slices, %d round trips, %d flows ended, at most %d in flight",
				pb.Len(), js.Len(), d.packets, len(d.procs), len(d.threads), connTracks, gotCalls, rts, ended, maxInflight)
			if ended == 0 || ended > replies {
				t.Errorf("%d flows end, %d replies were paired", ended, replies)
			}
		})
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
