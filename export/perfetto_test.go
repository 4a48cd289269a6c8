package export

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/internal/testutil"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// chromeTrace is the part of the Chrome trace JSON format the tests read.
type chromeTrace struct {
	TraceEvents []chromeEvent     `json:"traceEvents"`
	OtherData   map[string]string `json:"otherData"`
}

type chromeEvent struct {
	Ph   string         `json:"ph"`
	Cat  string         `json:"cat"`
	Name string         `json:"name"`
	PID  *uint32        `json:"pid"`
	TID  *uint32        `json:"tid"`
	TS   *float64       `json:"ts"`
	Dur  *float64       `json:"dur"`
	ID   *uint64        `json:"id"`
	S    string         `json:"s"`
	Args map[string]any `json:"args"`
}

func runPerfetto(t *testing.T, paths []string, opt analyzers.Options) ([]byte, chromeTrace) {
	t.Helper()
	var buf bytes.Buffer
	if err := Perfetto(&buf, protocol.Files(paths, nil), opt); err != nil {
		t.Fatalf("Perfetto: %v", err)
	}
	var ct chromeTrace
	dec := json.NewDecoder(bytes.NewReader(buf.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ct); err != nil {
		t.Fatalf("output is not valid Chrome trace JSON: %v\n%s", err, buf.String())
	}
	return buf.Bytes(), ct
}

// checkChrome checks the rules the Perfetto UI relies on: every event has a phase and a pid,
// timed events have a ts, complete slices a non-negative dur, async begins and ends pair up by
// id, and each process's counter runs forward in time. It returns the events counted by
// phase, and by category for async begins.
func checkChrome(t *testing.T, ct chromeTrace) (byPh, asyncByCat map[string]int) {
	t.Helper()
	byPh, asyncByCat = map[string]int{}, map[string]int{}
	open := map[uint64]chromeEvent{}
	lastCounter := map[string]float64{}
	for i, e := range ct.TraceEvents {
		byPh[e.Ph]++
		if e.PID == nil {
			t.Fatalf("event %d has no pid: %+v", i, e)
		}
		if e.Ph != "M" && e.TS == nil {
			t.Fatalf("event %d has no ts: %+v", i, e)
		}
		switch e.Ph {
		case "X":
			if e.Dur == nil || *e.Dur < 0 || e.TID == nil {
				t.Fatalf("complete event %d without dur/tid: %+v", i, e)
			}
		case "b":
			if e.ID == nil {
				t.Fatalf("async begin %d without id", i)
			}
			if _, dup := open[*e.ID]; dup {
				t.Fatalf("async id %d begun twice", *e.ID)
			}
			open[*e.ID] = e
			asyncByCat[e.Cat]++
		case "e":
			b, ok := open[*e.ID]
			if !ok || b.Cat != e.Cat || b.Name != e.Name || *e.TS < *b.TS {
				t.Fatalf("async end %d does not match its begin: %+v vs %+v", i, e, b)
			}
			delete(open, *e.ID)
		case "C":
			k := fmt.Sprint(*e.PID, e.Name)
			if *e.TS < lastCounter[k] {
				t.Fatalf("counter %q of pid %d runs backwards at event %d", e.Name, *e.PID, i)
			}
			lastCounter[k] = *e.TS
			if n, ok := e.Args["requests"].(float64); !ok || n < 0 {
				t.Fatalf("counter event %d has no requests >= 0: %+v", i, e)
			}
		case "i", "M":
		default:
			t.Fatalf("event %d has unexpected phase %q", i, e.Ph)
		}
	}
	if len(open) != 0 {
		t.Fatalf("%d async slices never end", len(open))
	}
	checkNesting(t, ct)
	return byPh, asyncByCat
}

// checkNesting checks that the complete slices of each track nest, as Perfetto needs: sorted by
// start (in input order at equal starts), each slice ends before the slice it starts in ends.
func checkNesting(t *testing.T, ct chromeTrace) {
	t.Helper()
	tracks := map[[2]uint32][][2]float64{}
	for _, e := range ct.TraceEvents {
		if e.Ph == "X" {
			k := [2]uint32{*e.PID, *e.TID}
			tracks[k] = append(tracks[k], [2]float64{*e.TS, *e.TS + *e.Dur})
		}
	}
	for k, sl := range tracks {
		sort.SliceStable(sl, func(i, j int) bool { return sl[i][0] < sl[j][0] })
		var stack []float64
		for _, x := range sl {
			for len(stack) > 0 && stack[len(stack)-1] <= x[0]+1e-6 {
				stack = stack[:len(stack)-1]
			}
			if len(stack) > 0 && x[1] > stack[len(stack)-1]+1e-6 {
				t.Fatalf("track pid %d tid %d: slice [%v, %v] overlaps its parent ending at %v", k[0], k[1], x[0], x[1], stack[len(stack)-1])
			}
			stack = append(stack, x[1])
		}
	}
}

// TestPerfettoOverlaps writes a tracer trace whose operations overlap on one thread id (as
// goroutines of a pipelined client do): they are spread over extra tracks so that every track
// nests, and no slice is lost.
func TestPerfettoOverlaps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "overlap.plt")
	w, err := trace.Create(path, trace.Meta{Source: "tracer"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := func(ts, dur int64, op trace.Op) {
		if err := w.WriteEvent(&trace.Event{TS: ts, Dur: dur, PID: 7, Op: op, Source: trace.SourceTracer}); err != nil {
			t.Fatal(err)
		}
	}
	ev(100, 100, trace.OpCall)      // [100, 200]
	ev(110, 20, trace.OpFrameSend)  // nests in the call
	ev(150, 100, trace.OpFrameRecv) // [150, 250] overlaps the call's end: overlap lane 1
	ev(160, 10, trace.OpFrameSend)  // nests in the call again
	ev(170, 100, trace.OpFrameRecv) // [170, 270] overlaps both: lane 2
	ev(300, 10, trace.OpCall)       // after everything: back on the thread's own track
	ev(50, 10, trace.OpFrameSend)   // out of order: before lane 0's latest start
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_, ct := runPerfetto(t, []string{path}, analyzers.Options{})
	byPh, _ := checkChrome(t, ct)
	if byPh["X"] != 7 {
		t.Errorf("%d slices, want 7", byPh["X"])
	}
	lanes := map[uint32]int{}
	names := map[string]bool{}
	for _, e := range ct.TraceEvents {
		if e.Ph == "X" {
			lanes[*e.TID]++
		}
		if e.Ph == "M" && e.Name == "thread_name" {
			names[e.Args["name"].(string)] = true
		}
	}
	if lanes[0] != 4 || len(lanes) != 4 {
		t.Errorf("slices per track %v; want 4 on the thread and one on each of three overlap tracks", lanes)
	}
	for _, n := range []string{"tid 0", "tid 0 (overlap 1)", "tid 0 (overlap 2)", "tid 0 (overlap 3)"} {
		if !names[n] {
			t.Errorf("no track named %q (have %v)", n, names)
		}
	}
}

func TestPerfettoEventCounts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tracer bool
	}{{"ebpf", false}, {"tracer", true}} {
		t.Run(tc.name, func(t *testing.T) {
			const tokens = 4
			path := synthTrace{tokens: tokens, tracer: tc.tracer}.write(t, t.TempDir(), "venus.plt")
			_, ct := runPerfetto(t, []string{path}, analyzers.Options{Protocol: "venus"})
			byPh, async := checkChrome(t, ct)
			// 6 loads, tokens-1 synchronous waits and 2 pipelined ones.
			const roundTrips = 6 + (tokens - 1) + 2
			// Calls: each round trip is a send and a receive, each token adds a flush and a
			// submit, plus one failed receive and one write on the second thread.
			const calls = 2*roundTrips + 2*tokens + 2
			if byPh["X"] != calls {
				t.Errorf("complete slices = %d, want %d (one per call)", byPh["X"], calls)
			}
			if byPh["i"] != tokens+2 {
				t.Errorf("instants = %d, want %d token markers and 2 phase starts", byPh["i"], tokens)
			}
			if async["marker"] != 2 {
				t.Errorf("marker spans = %d, want 2 phases", async["marker"])
			}
			if async["round_trip"] != roundTrips {
				t.Errorf("round-trip slices = %d, want %d", async["round_trip"], roundTrips)
			}
			wantTracer := 0
			if tc.tracer {
				wantTracer = roundTrips
			}
			if async["tracer_round_trip"] != wantTracer {
				t.Errorf("tracer round-trip slices = %d, want %d", async["tracer_round_trip"], wantTracer)
			}
			if byPh["b"] != byPh["e"] {
				t.Errorf("async begins %d != ends %d", byPh["b"], byPh["e"])
			}
			// In-flight counter: peaks at 2 (the pipelined token), ends at 0.
			peak, final := 0.0, -1.0
			for _, e := range ct.TraceEvents {
				if e.Ph == "C" {
					n := e.Args["requests"].(float64)
					peak, final = max(peak, n), n
				}
			}
			if peak != 2 || final != 0 {
				t.Errorf("in-flight counter peak %v final %v, want 2 and 0", peak, final)
			}
			names := map[string]bool{}
			for _, e := range ct.TraceEvents {
				if e.Ph == "M" {
					n, _ := e.Args["name"].(string)
					names[e.Name+"="+n] = true
				}
			}
			for _, n := range []string{"process_name=venus-client (pid 100)", "thread_name=main tid 100", "thread_name=tid 101"} {
				if !names[n] {
					t.Errorf("missing metadata %s; have %v", n, names)
				}
			}
		})
	}
}

func TestPerfettoGolden(t *testing.T) {
	for _, tc := range []struct {
		golden string
		tracer bool
	}{{"perfetto_ebpf.json", false}, {"perfetto_tracer.json", true}} {
		path := synthTrace{tokens: 2, tracer: tc.tracer}.write(t, t.TempDir(), "venus.plt")
		got, ct := runPerfetto(t, []string{path}, analyzers.Options{Protocol: "venus"})
		checkChrome(t, ct)
		testutil.Golden(t, tc.golden, got)
	}
}

func TestPerfettoTwoTraces(t *testing.T) {
	dir := t.TempDir()
	a := synthTrace{tokens: 2}.write(t, dir, "a.plt")
	b := synthTrace{tokens: 3, tracer: true}.write(t, dir, "b.plt")
	_, ct := runPerfetto(t, []string{a, b}, analyzers.Options{Protocol: "venus"})
	byPh, _ := checkChrome(t, ct)
	if len(ct.OtherData) != 2 {
		t.Errorf("otherData has %d traces, want 2: %v", len(ct.OtherData), ct.OtherData)
	}
	if byPh["X"] == 0 {
		t.Error("no slices")
	}
}

func TestPerfettoBadInput(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.plt")
	if err := os.WriteFile(junk, []byte("not a trace at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := synthTrace{tokens: 1}.write(t, dir, "good.plt")
	for _, tc := range []struct {
		name  string
		paths []string
		opt   analyzers.Options
	}{
		{"none", nil, analyzers.Options{}},
		{"missing", []string{filepath.Join(dir, "missing.plt")}, analyzers.Options{}},
		{"junk", []string{junk}, analyzers.Options{}},
		{"unknown protocol", []string{good}, analyzers.Options{Protocol: "no-such-protocol"}},
		{"missing spec", []string{good}, analyzers.Options{SpecFile: filepath.Join(dir, "missing.json")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := Perfetto(&buf, protocol.Files(tc.paths, nil), tc.opt)
			if err == nil {
				t.Fatal("no error")
			}
			if buf.Len() != 0 {
				t.Errorf("wrote %d bytes before failing", buf.Len())
			}
			var re *protocol.ReadError
			if len(tc.paths) > 0 && tc.opt == (analyzers.Options{}) && (!errors.As(err, &re) || re.Path != tc.paths[0]) {
				t.Errorf("error %v does not name the trace as an *protocol.ReadError", err)
			}
		})
	}
	var fe *trace.FormatError
	if err := Perfetto(io.Discard, protocol.Files([]string{junk}, nil), analyzers.Options{}); !errors.As(err, &fe) || fe.Offset != 0 {
		t.Errorf("junk trace: %v, want a *trace.FormatError at offset 0", err)
	}
}

// failWriter fails every write after n bytes.
type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		return 0, errors.New("disk full")
	}
	f.n -= len(p)
	return len(p), nil
}

func TestPerfettoWriteError(t *testing.T) {
	path := synthTrace{tokens: 2}.write(t, t.TempDir(), "v.plt")
	if err := Perfetto(&failWriter{n: 100}, protocol.Files([]string{path}, nil), analyzers.Options{}); err == nil {
		t.Fatal("a failing writer gave no error")
	}
}

func TestAppendUS(t *testing.T) {
	for _, tc := range []struct {
		ns   int64
		want string
	}{{0, "0.000"}, {1, "0.001"}, {999, "0.999"}, {1000, "1.000"}, {1234567, "1234.567"}, {-1500, "-1.500"}} {
		if got := string(appendUS(nil, tc.ns)); got != tc.want {
			t.Errorf("appendUS(%d) = %q, want %q", tc.ns, got, tc.want)
		}
	}
}

// TestPerfettoFixtures golden-tests the timeline of the committed fixture trace and of the
// fixtures package's venus-like traces (kernel and tracer view).
func TestPerfettoFixtures(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		golden string
		path   string
	}{
		{"perfetto_pingpong.json", pingpongTrace(t, dir)},
		{"perfetto_venus_ebpf.json", venusTrace(t, dir, "venus-ebpf.plt", trace.SourceEBPF, 3)},
		{"perfetto_venus_tracer.json", venusTrace(t, dir, "venus-tracer.plt", trace.SourceTracer, 3)},
	} {
		got, ct := runPerfetto(t, []string{tc.path}, analyzers.Options{})
		byPh, async := checkChrome(t, ct)
		if byPh["X"] == 0 || async["round_trip"] == 0 || byPh["C"] == 0 {
			t.Errorf("%s: no slices, round trips or counter: %v %v", tc.golden, byPh, async)
		}
		testutil.Golden(t, tc.golden, got)
	}
}

// TestPerfettoHostileStrings writes a trace whose strings carry quotes, control characters,
// markup and invalid UTF-8: the output must stay valid JSON with the text inert.
func TestPerfettoHostileStrings(t *testing.T) {
	const evil = "\"}]},{\"ph\":\"X\x00\n</script><script>alert(1)</script>\xff\xfe"
	path := filepath.Join(t.TempDir(), "evil.plt")
	w, err := trace.Create(path, trace.Meta{Host: evil, Command: []string{evil}, PIDs: []uint32{1},
		Labels: map[string]string{evil: evil}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.WriteConnection(&trace.Connection{ID: 1, Family: trace.FamilyUnix, Local: evil, Remote: evil}))
	must(w.WriteEvent(&trace.Event{TS: 10, Dur: 5, PID: 1, TID: 1, Conn: 1, Dir: trace.DirSend, Op: trace.OpWrite, Bytes: 3, Payload: []byte(evil)}))
	must(w.WriteMarker(&trace.Marker{TS: 12, PID: 1, TID: 1, Name: evil, Text: evil}))
	must(w.Close())
	out, ct := runPerfetto(t, []string{path}, analyzers.Options{})
	checkChrome(t, ct)
	if bytes.Contains(out, []byte("<script")) {
		t.Error("markup reached the output unescaped")
	}
	// encoding/json turns each invalid byte into U+FFFD.
	want := strings.ReplaceAll(evil, "\xff\xfe", "\uFFFD\uFFFD")
	found := false
	for _, e := range ct.TraceEvents {
		if e.Ph == "i" && e.Args["text"] == want {
			found = true
		}
	}
	if !found {
		t.Error("the marker text did not survive the round trip through JSON")
	}
}

// BenchmarkPerfetto measures the timeline writer on a venus-like trace of about 100,000
// events; it reports events per second of trace written.
func BenchmarkPerfetto(b *testing.B) {
	path := venusTrace(b, b.TempDir(), "big.plt", trace.SourceEBPF, 10_000)
	f, err := trace.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	var events int
	var rec trace.Record
	for f.Next(&rec) == nil {
		if rec.Kind == trace.KindEvent {
			events++
		}
	}
	f.Close()
	var n countWriter
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := Perfetto(&n, protocol.Files([]string{path}, nil), analyzers.Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(n)/float64(b.N)/float64(events), "B/event")
}

// countWriter counts the bytes written to it.
type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

// TestTraceRecovery checks that the one-trace writers report a cut trace as damaged, and
// still write what could be read.
func TestTraceRecovery(t *testing.T) {
	dir := t.TempDir()
	full := synthTrace{tokens: 4}.write(t, dir, "full.plt")
	b, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut.plt")
	if err := os.WriteFile(cut, b[:len(b)-10], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path    string
		damaged bool
	}{{full, false}, {cut, true}} {
		var buf bytes.Buffer
		rc, err := PerfettoTrace(&buf, protocol.Files([]string{tc.path}, nil)[0], analyzers.Options{})
		if err != nil || rc.Damaged() != tc.damaged || buf.Len() == 0 {
			t.Errorf("PerfettoTrace(%s) = %v, %v (%d bytes); want damaged=%v", filepath.Base(tc.path), rc, err, buf.Len(), tc.damaged)
		}
		buf.Reset()
		rc, err = PprofTrace(&buf, protocol.Files([]string{tc.path}, nil)[0], analyzers.Options{})
		if err != nil || rc.Damaged() != tc.damaged || buf.Len() == 0 {
			t.Errorf("PprofTrace(%s) = %v, %v (%d bytes); want damaged=%v", filepath.Base(tc.path), rc, err, buf.Len(), tc.damaged)
		}
	}
}
