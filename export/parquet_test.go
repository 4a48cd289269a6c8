package export

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/fixtures"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// readTable reads every part of table name in dir, in order.
func readTable[T any](t *testing.T, dir, name string) []T {
	t.Helper()
	parts, err := filepath.Glob(filepath.Join(dir, name, "part-*.parquet"))
	if err != nil || len(parts) == 0 {
		t.Fatalf("%s: no part files (%v)", name, err)
	}
	var all []T
	for _, p := range parts {
		rows, err := parquet.ReadFile[T](p)
		if err != nil {
			t.Fatalf("read %s: %v", p, err)
		}
		all = append(all, rows...)
	}
	return all
}

// TestParquetAgreesWithAnalyze exports traces of each source and checks every table against the
// trace as read and as analyze sums it: events, messages (frames), round trips as analyze
// counts them, connections, markers, units, and the traces table with its labels.
func TestParquetAgreesWithAnalyze(t *testing.T) {
	dir := t.TempDir()
	paths := []string{
		venusTrace(t, dir, "tracer.plt", trace.SourceTracer, 6),
		venusTrace(t, dir, "ebpf.plt", trace.SourceEBPF, 5),
		pingpongTrace(t, dir),
	}
	out := filepath.Join(dir, "tables")
	recs, err := Parquet(out, protocol.Files(paths, nil), ParquetOptions{Labels: map[string]string{"mode": "baseline", "host": "ci"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(paths) {
		t.Fatalf("%d recoveries for %d traces", len(recs), len(paths))
	}
	traces := readTable[traceRow](t, out, "traces")
	events := readTable[eventRow](t, out, "events")
	msgs := readTable[messageRow](t, out, "messages")
	rts := readTable[roundTripRow](t, out, "round_trips")
	conns := readTable[connectionRow](t, out, "connections")
	marks := readTable[markerRow](t, out, "markers")
	units := readTable[unitRow](t, out, "units")
	if len(traces) != len(paths) {
		t.Fatalf("traces has %d rows, want %d", len(traces), len(paths))
	}
	count := func(n int, id string, f func(i int) string) int {
		c := 0
		for i := 0; i < n; i++ {
			if f(i) == id {
				c++
			}
		}
		return c
	}
	for i, p := range paths {
		tr := traces[i]
		f, err := trace.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		s, err := analyzers.Analyze(protocol.Files([]string{p}, nil), analyzers.Options{})
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(p)
		if tr.File != name || tr.TraceID != traceID(p, f.Meta) || !tr.Clean {
			t.Errorf("%s: traces row %+v", name, tr)
		}
		if tr.Labels["mode"] != "baseline" || tr.Labels["host"] != "ci" {
			t.Errorf("%s: labels %v, want the --label ones", name, tr.Labels)
		}
		id := tr.TraceID
		if n := count(len(events), id, func(i int) string { return events[i].TraceID }); n != len(f.Events) || tr.Events != int64(n) {
			t.Errorf("%s: %d event rows (traces says %d), the trace has %d", name, n, tr.Events, len(f.Events))
		}
		k := 0
		for _, e := range events {
			if e.TraceID != id {
				continue
			}
			if k >= len(f.Events) {
				break
			}
			want := f.Events[k]
			if e.TS != want.TS || e.Dur != want.Dur || e.Bytes != want.Bytes || string(e.Payload) != string(want.Payload) || e.Op != want.Op.String() {
				t.Fatalf("%s: event %d is %+v, the trace has %+v", name, k, e, want)
			}
			k++
		}
		frames := s.Totals.Send.Frames + s.Totals.Recv.Frames
		if n := count(len(msgs), id, func(i int) string { return msgs[i].TraceID }); uint64(n) != frames {
			t.Errorf("%s: %d message rows, analyze decoded %d frames", name, n, frames)
		}
		// analyze's round trips: a client's, from the tracer's own events when it wrote any,
		// else from the frames or system calls decoded
		byOrigin := map[string]uint64{}
		for _, r := range rts {
			if r.TraceID == id && r.Side == "client" {
				byOrigin[r.Origin]++
			}
		}
		got := byOrigin["decoded"] + byOrigin["tracer_event"]
		if byOrigin["tracer_event"] == 0 {
			got += byOrigin["tracer_frames"]
		}
		if got != s.RoundTrips.Count || s.RoundTrips.Count == 0 {
			t.Errorf("%s: client round trips %v, analyze counts %d", name, byOrigin, s.RoundTrips.Count)
		}
		if n := count(len(conns), id, func(i int) string { return conns[i].TraceID }); n != len(f.Connections) {
			t.Errorf("%s: %d connection rows, the trace has %d", name, n, len(f.Connections))
		}
		if n := count(len(marks), id, func(i int) string { return marks[i].TraceID }); n != len(f.Markers) {
			t.Errorf("%s: %d marker rows, the trace has %d", name, n, len(f.Markers))
		}
		var markerUnits uint64
		for _, u := range units {
			if u.TraceID == id && u.Source == "marker" {
				markerUnits++
			}
		}
		if len(s.Units) > 0 && s.Units[0].Name == "token" && markerUnits != s.Units[0].Count {
			t.Errorf("%s: %d marker units, analyze counts %d %ss", name, markerUnits, s.Units[0].Count, s.Units[0].Name)
		}
	}
	for _, r := range rts {
		if r.RTT <= 0 || r.End-r.ReqTS != r.RTT {
			t.Fatalf("round trip %+v: end - start is not the rtt", r)
		}
	}
}

// TestParquetParts cuts a table into part files of at most PartRows rows, and reads back
// every row.
func TestParquetParts(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "tables")
	if _, err := Parquet(out, protocol.Files([]string{pingpongTrace(t, dir)}, nil), ParquetOptions{PartRows: 64, RowGroupRows: 16}); err != nil {
		t.Fatal(err)
	}
	parts, _ := filepath.Glob(filepath.Join(out, "events", "part-*.parquet"))
	events := readTable[eventRow](t, out, "events")
	if len(parts) != 5 || len(events) != 300 {
		t.Fatalf("%d parts of %d events, want 5 parts of 300 (64 rows a part)", len(parts), len(events))
	}
	for i := 1; i < len(events); i++ {
		if events[i].TS < events[i-1].TS {
			t.Fatalf("event %d out of order across parts", i)
		}
	}
}

// TestParquetBadTrace leaves no file behind when a trace cannot be read, and names it.
func TestParquetBadTrace(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.plt")
	if err := os.WriteFile(bad, []byte("not a trace at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "tables")
	_, err := Parquet(out, protocol.Files([]string{pingpongTrace(t, dir), bad}, nil), ParquetOptions{})
	var re *protocol.ReadError
	if !errors.As(err, &re) || re.Path != bad {
		t.Fatalf("err = %v, want a ReadError naming %s", err, bad)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Fatalf("files left behind: %v", ents)
	}
}

// TestParquetPushKind: what a server sends of its own accord (Redis pub/sub messages) is a
// message of kind "push" in the messages table, as analyze's commands[].kind says; the SUBSCRIBE
// and its confirmation stay a request and a reply.
func TestParquetPushKind(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub.plt")
	w, err := trace.Create(path, fixtures.Meta("ebpf", "test"), fixtures.Options())
	if err != nil {
		t.Fatal(err)
	}
	msg := "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nx\r\n"
	calls := []string{">*2\r\n$9\r\nSUBSCRIBE\r\n$2\r\nch\r\n", "<*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n", "<" + msg, "<" + msg + msg}
	for i, c := range calls {
		dir := trace.DirSend
		if c[0] == '<' {
			dir = trace.DirRecv
		}
		ev := trace.Event{TS: int64(1e6 + 1e4*i), Dur: 1000, PID: 9, TID: 9, Conn: 3, Dir: dir, Op: trace.OpWrite, Source: trace.SourceEBPF,
			Bytes: int64(len(c) - 1), Payload: []byte(c[1:])}
		if err := w.WriteEvent(&ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "tables")
	if _, err := Parquet(out, protocol.Files([]string{path}, nil), ParquetOptions{Analyzers: analyzers.Options{Protocol: "resp"}}); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, m := range readTable[messageRow](t, out, "messages") {
		kinds[m.Kind]++
	}
	if kinds["request"] != 1 || kinds["reply"] != 1 || kinds["push"] != 3 {
		t.Errorf("kinds %v, want 1 request, 1 reply, 3 pushes", kinds)
	}
}
