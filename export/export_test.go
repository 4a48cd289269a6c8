package export

import (
	"bytes"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/perflab/perflab/fixtures"
	"github.com/perflab/perflab/trace"
)

func exportVenusTrace(t *testing.T, extra func(w *trace.Writer) error) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, fixtures.Meta("tracer", "venus"), fixtures.Options())
	if err != nil {
		t.Fatal(err)
	}
	if err := fixtures.Venus(w, fixtures.VenusOptions{Tokens: 5, Uploads: 3, Seed: 9}); err != nil {
		t.Fatal(err)
	}
	if extra != nil {
		if err := extra(w); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func exportReader(t *testing.T, data []byte) *trace.Reader {
	t.Helper()
	r, err := trace.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// exportAwkward strings: quotes, separators, newlines, non-ASCII and invalid UTF-8.
var exportAwkward = []string{`say "hi", then leave`, "two\nlines", "tab\there", "ünï", "\xff\xfe"}

func exportWithAwkward(w *trace.Writer) error {
	for i, s := range exportAwkward {
		if err := w.WriteMarker(&trace.Marker{TS: int64(i), Name: "phase", Text: s}); err != nil {
			return err
		}
	}
	// An event as eBPF records it: no command, no request id; and one on no known connection.
	if err := w.WriteEvent(&trace.Event{TS: 10, Dur: 5, PID: 1, TID: 1, Conn: 9, Dir: trace.DirRecv, Op: trace.OpRead, Source: trace.SourceEBPF, Bytes: 4, Payload: []byte("abcd")}); err != nil {
		return err
	}
	if err := w.WriteEvent(&trace.Event{TS: 11, Dur: 5, PID: 1, TID: 1, Dir: trace.DirSend, Op: trace.OpRead, Source: trace.SourceEBPF, Bytes: 2}); err != nil {
		return err
	}
	return w.WriteConnection(&trace.Connection{ID: 9, Family: trace.FamilyUnix, Local: exportAwkward[0], Remote: exportAwkward[1]})
}

func TestJSONL(t *testing.T) {
	data := exportVenusTrace(t, exportWithAwkward)
	f, err := trace.Read(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := JSONL(&out, exportReader(t, data)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	counts := map[string]int{}
	var events []map[string]any
	var texts []string
	for i, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %d is not JSON: %v: %s", i+1, err, l)
		}
		typ, _ := m["type"].(string)
		counts[typ]++
		if i == 0 && (typ != "meta" || m["source"] != "tracer") {
			t.Fatalf("first line is not the meta: %s", l)
		}
		switch typ {
		case "event":
			events = append(events, m)
		case "marker":
			if m["name"] == "phase" {
				texts = append(texts, m["text"].(string))
			}
		}
	}
	if counts["event"] != len(f.Events) || counts["marker"] != len(f.Markers) || counts["footer"] != 1 || counts["lost"] != 1 || counts["recovery"] != 0 {
		t.Fatalf("line counts %v; the trace has %d events and %d markers", counts, len(f.Events), len(f.Markers))
	}
	unfilled := 0
	for i, m := range events {
		e := f.Events[i]
		if int64(m["ts_ns"].(float64)) != e.TS || m["op"] != e.Op.String() || m["dir"] != e.Dir.String() ||
			m["payload_hex"] != hex.EncodeToString(e.Payload) {
			t.Fatalf("event %d: %v, want %+v", i, m, e)
		}
		// Fields the source did not fill (0) are left out, never written as 0.
		for _, fld := range []struct {
			key string
			v   uint64
		}{{"req_id", e.ReqID}, {"command", uint64(e.Command)}, {"conn", e.Conn}} {
			got, ok := m[fld.key].(float64)
			if ok != (fld.v != 0) || (ok && uint64(got) != fld.v) {
				t.Fatalf("event %d: %s %v, want %d (absent when 0): %v", i, fld.key, m[fld.key], fld.v, m)
			}
			if !ok {
				unfilled++
			}
		}
	}
	if unfilled == 0 {
		t.Error("no event with an unfilled field: the test checks nothing of them")
	}
	for i, s := range exportAwkward[:4] { // the invalid UTF-8 one becomes U+FFFD, as encoding/json does
		if !exportContains(texts, s) {
			t.Errorf("marker text %d %q lost in JSON", i, s)
		}
	}
}

// exportCell is what a CSV cell holds for a field a source may leave unfilled: empty for 0.
func exportCell(v uint64) string {
	if v == 0 {
		return ""
	}
	return strconv.FormatUint(v, 10)
}

func exportContains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestCSV(t *testing.T) {
	data := exportVenusTrace(t, exportWithAwkward)
	f, err := trace.Read(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := CSV(&out, exportReader(t, data)); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&out).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rows[0], ",") != strings.Join(CSVColumns, ",") {
		t.Fatalf("header %v", rows[0])
	}
	col := map[string]int{}
	for i, c := range CSVColumns {
		col[c] = i
	}
	var nev, nmark int
	var texts []string
	for _, r := range rows[1:] {
		if len(r) != len(CSVColumns) {
			t.Fatalf("row of %d columns: %v", len(r), r)
		}
		switch r[0] {
		case "event":
			e := f.Events[nev]
			if r[col["ts_ns"]] != strconv.FormatInt(e.TS, 10) || r[col["bytes"]] != strconv.FormatInt(e.Bytes, 10) ||
				r[col["command"]] != exportCell(uint64(e.Command)) || r[col["req_id"]] != exportCell(e.ReqID) || r[col["op"]] != e.Op.String() {
				t.Fatalf("event row %d: %v, want %+v", nev, r, e)
			}
			nev++
		case "marker":
			nmark++
			texts = append(texts, r[col["text"]])
		case "connection":
			if r[col["conn"]] == "9" && (r[col["local"]] != exportAwkward[0] || r[col["remote"]] != exportAwkward[1]) {
				t.Fatalf("connection row %v", r)
			}
		}
	}
	if nev != len(f.Events) || nmark != len(f.Markers) {
		t.Fatalf("%d event rows, %d marker rows; want %d, %d", nev, nmark, len(f.Events), len(f.Markers))
	}
	for _, s := range exportAwkward {
		if !exportContains(texts, s) {
			t.Errorf("marker text %q lost in CSV", s)
		}
	}
}

// TestExportDamaged checks that a cut trace exports the records of its complete chunks and says
// so in the JSONL recovery line.
func TestExportDamaged(t *testing.T) {
	data := exportVenusTrace(t, nil)
	cut := data[:len(data)-10]
	var out bytes.Buffer
	if err := JSONL(&out, exportReader(t, cut)); err != nil {
		t.Fatal(err)
	}
	last := out.String()[strings.LastIndex(strings.TrimSuffix(out.String(), "\n"), "\n")+1:]
	if !strings.Contains(last, `"type":"recovery"`) || !strings.Contains(last, `"truncated_bytes":`) {
		t.Fatalf("last line %q is no recovery", last)
	}
}

func BenchmarkJSONL(b *testing.B) {
	var buf bytes.Buffer
	w, _ := trace.NewWriter(&buf, fixtures.Meta("ebpf", "venus"), fixtures.Options())
	if err := fixtures.PingPong(w, 50_000, 1); err != nil {
		b.Fatal(err)
	}
	w.Close()
	data := buf.Bytes()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r, _ := trace.NewReader(bytes.NewReader(data))
		var cw exportCountingWriter
		if err := JSONL(&cw, r); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*100_000)/b.Elapsed().Seconds(), "events/s")
}

type exportCountingWriter struct{ n int }

func (c *exportCountingWriter) Write(p []byte) (int, error) { c.n += len(p); return len(p), nil }
