package protocol

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/perflab/perflab/fixtures"
	"github.com/perflab/perflab/trace"
)

// connectionsTrace writes a trace of n short connections (fixtures.Connections) in dir.
func connectionsTrace(tb testing.TB, dir string, n int, heads bool) string {
	tb.Helper()
	path := filepath.Join(dir, "conns-"+strconv.Itoa(n)+"-"+strconv.FormatBool(heads)+".plt")
	w, err := trace.Create(path, fixtures.Meta("ebpf", "venus"), fixtures.Options())
	if err != nil {
		tb.Fatal(err)
	}
	if err := fixtures.Connections(w, n, heads); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return path
}

// TestTrialEarlyDecision: with more connections than maxTrialConns short of trialEvents, the
// oldest are decided early, so that the candidates' state stays bounded; every connection still
// gets its protocol, and the records held for the trial never outnumber those of maxTrialConns
// connections.
func TestTrialEarlyDecision(t *testing.T) {
	path := connectionsTrace(t, t.TempDir(), 3*maxTrialConns, false)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := trace.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var msgs int
	sink := &msgSink{fn: func(*Message) error { msgs++; return nil }}
	d, err := NewDecoder(0, nil, sink)
	if err != nil {
		t.Fatal(err)
	}
	p, err := newAutoPass(0, path, r.Meta(), d, sink)
	if err != nil {
		t.Fatal(err)
	}
	p.retires = false // the trial's own bound, without retirement
	tr := p.trial
	held := 0
	var rec trace.Record
	for r.Next(&rec) == nil {
		p.record(&rec)
		held = max(held, len(p.held)-p.head)
		for _, c := range tr.decs {
			if len(c.conns) > maxTrialConns {
				t.Fatalf("a candidate holds %d connections, more than %d", len(c.conns), maxTrialConns)
			}
		}
	}
	p.finish()
	p.end()
	// A connection record and two events per connection.
	if held > 3*(maxTrialConns+1) {
		t.Errorf("%d records held at most, want at most %d", held, 3*(maxTrialConns+1))
	}
	conns := 0
	d.Conns(func(ci *ConnInfo) {
		if ci.Spec == nil {
			t.Errorf("connection %d: no protocol", ci.ID)
		}
		conns += ci.Count
	})
	if conns != 3*maxTrialConns || msgs != 2*conns {
		t.Fatalf("%d connections decoded, %d messages, want %d and %d", conns, msgs, 3*maxTrialConns, 6*maxTrialConns)
	}
}

// endSink keeps the decoder a scan ends with.
type endSink struct {
	msgSink
	d *Decoder
}

func (s *endSink) End(_ int, _ trace.Recovery, d *Decoder) { s.d = d }

// TestFramersReleased: the framers of connections between frames go back to the trace's
// spares with their request queues, so a trace of many short connections ends with none held
// by a connection and only the few that were in use at once made, and what they counted is kept.
func TestFramersReleased(t *testing.T) {
	const n = 3000
	path := connectionsTrace(t, t.TempDir(), n, true)
	msgs := 0
	s := &endSink{msgSink: msgSink{fn: func(*Message) error { msgs++; return nil }}}
	if err := Scan(Files([]string{path}, nil), nil, s); err != nil {
		t.Fatal(err)
	}
	if msgs != 2*n {
		t.Fatalf("%d messages, want %d", msgs, 2*n)
	}
	held, queues := 0, 0
	for _, c := range s.d.conns {
		for _, f := range c.framers {
			if f != nil {
				held++
			}
		}
		if c.pairs.q != nil {
			queues++
		}
	}
	if held != 0 || len(s.d.spare) > 4 {
		t.Errorf("%d framers held by connections, %d spare: want 0 and at most 4", held, len(s.d.spare))
	}
	if queues != 0 || len(s.d.spareQ) > 2 {
		t.Errorf("%d request queues held by connections, %d spare: want 0 and at most 2", queues, len(s.d.spareQ))
	}
	lost, seen := s.d.Undecoded()
	if want := int64(2 * n * (fixtures.FrameHeaderSize + 16)); seen != want || lost != 0 {
		t.Errorf("framers saw %d bytes (%d undecoded), want %d (0)", seen, lost, want)
	}
}

// TestRetiredConnections: each connection's state goes once its last data event is decoded, so
// a trace of many short connections ends with none held, and what they counted is kept: every
// connection is still reported (Conns, RawStats), and the raw exchanges are all delivered.
func TestRetiredConnections(t *testing.T) {
	const n = 3000
	for _, heads := range []bool{true, false} {
		path := connectionsTrace(t, t.TempDir(), n, heads)
		msgs, replies := 0, 0
		s := &endSink{msgSink: msgSink{fn: func(m *Message) error {
			msgs++
			if m.IsReply && m.Answered > 0 {
				replies++
			}
			return nil
		}}}
		if err := Scan(Files([]string{path}, nil), nil, s); err != nil {
			t.Fatal(err)
		}
		if len(s.d.conns) != 0 {
			t.Errorf("heads %v: %d connections still held at the end, want 0", heads, len(s.d.conns))
		}
		if msgs != 2*n || replies != n {
			t.Errorf("heads %v: %d messages, %d answered replies, want %d and %d", heads, msgs, replies, 2*n, n)
		}
		conns := 0
		var data int64
		s.d.Conns(func(ci *ConnInfo) { conns += ci.Count; data += ci.Data })
		if want := int64(2 * n * (fixtures.FrameHeaderSize + 16)); conns != n || data != want {
			t.Errorf("heads %v: Conns gave %d connections, %d bytes, want %d and %d", heads, conns, data, n, want)
		}
		if raw, _, ex, _ := s.d.RawStats(); !heads && (raw != n || ex != n) {
			t.Errorf("raw connections %d, exchanges %d, want %d and %d", raw, ex, n, n)
		}
		if paired, unpaired, _ := s.d.Pairing(); !heads && (unpaired != 0 || paired == 0) {
			t.Errorf("paired %d, unpaired %d", paired, unpaired)
		}
	}
}

// bareTrace writes, in dir, connections whose first data events carry no captured byte and
// whose later ones carry heads of Venus, RESP and HTTP messages (and ones bare throughout),
// interleaved, more of them than maxTrialConns so that some are decided early.
func bareTrace(tb testing.TB, dir string) string {
	tb.Helper()
	path := filepath.Join(dir, "bare.plt")
	w, err := trace.Create(path, fixtures.Meta("ebpf", "venus"), fixtures.Options())
	if err != nil {
		tb.Fatal(err)
	}
	type call struct {
		dir  trace.Dir
		n    int64
		head []byte
	}
	venusReq, venusRep := fixtures.Frame(16, fixtures.CmdWaitForFences, fixtures.FlagReplyWanted, 16), fixtures.Frame(16, fixtures.CmdWaitForFences, 0, 16)
	kinds := [][]call{
		{{trace.DirSend, 40, nil}, {trace.DirRecv, 40, nil}},
		{{trace.DirSend, 24, nil}, {trace.DirSend, 24, venusReq}, {trace.DirRecv, 24, venusRep}, {trace.DirSend, 24, venusReq}, {trace.DirRecv, 24, venusRep}},
		{{trace.DirRecv, 10, nil}, {trace.DirSend, 14, []byte("*1\r\n$4\r\nPING\r\n")}, {trace.DirRecv, 7, []byte("+PONG\r\n")}},
		{{trace.DirSend, 18, nil}, {trace.DirSend, 18, []byte("GET / HTTP/1.1\r\n\r\n")}, {trace.DirRecv, 38, []byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")}},
		{{trace.DirSend, 14, []byte("*1\r\n$4\r\nPING\r\n")}, {trace.DirRecv, 7, nil}, {trace.DirRecv, 7, []byte("+PONG\r\n")}},
	}
	const n = maxTrialConns + 500
	ts := fixtures.Base
	for round := 0; round < 6; round++ { // each connection's calls spread over rounds, interleaved
		for i := 0; i < n; i++ {
			calls := kinds[i%len(kinds)]
			if round >= len(calls) {
				continue
			}
			c := calls[round]
			ev := trace.Event{TS: ts, Dur: 1000, PID: uint32(100 + i%7), TID: 1, Conn: uint64(i + 1), Dir: c.dir,
				Op: trace.OpSendto, Source: trace.SourceEBPF, Bytes: c.n, Payload: c.head}
			if c.dir == trace.DirRecv {
				ev.Op = trace.OpRecvfrom
			}
			if err := w.WriteEvent(&ev); err != nil {
				tb.Fatal(err)
			}
			ts += 1000
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return path
}

// TestTrialBare: a connection whose data events carry no captured byte is not fed to the
// candidates until one does (then its earlier events are, first), and one that never does is
// raw; the messages, protocols and counts are exactly those of feeding every event at once.
func TestTrialBare(t *testing.T) {
	path := bareTrace(t, t.TempDir())
	run := func(eager bool) (string, *trial) {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		r, err := trace.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		sink := &msgSink{fn: func(m *Message) error {
			fmt.Fprintf(&out, "%d %d %d %d %s %d %d %v %v %s\n", m.Conn, m.Dir, m.TS, m.End, m.Protocol, m.Size, m.Calls, m.LostSync, m.Truncated, m.Name)
			return nil
		}}
		d, err := NewDecoder(0, nil, sink)
		if err != nil {
			t.Fatal(err)
		}
		p, err := newAutoPass(0, path, r.Meta(), d, sink)
		if err != nil {
			t.Fatal(err)
		}
		tr := p.trial
		tr.eager = eager
		var rec trace.Record
		for r.Next(&rec) == nil {
			p.record(&rec)
		}
		p.finish()
		p.end()
		var conns []string // Conns gives the retired ones summed by protocol
		d.Conns(func(ci *ConnInfo) {
			conns = append(conns, fmt.Sprintf("conns %s %d %d %d %d\n", ci.Spec.Name, ci.ID, ci.Count, ci.Data, ci.Decoded))
		})
		slices.Sort(conns)
		out.WriteString(strings.Join(conns, ""))
		lost, dropped, waiting := d.Stats()
		fmt.Fprintf(&out, "stats %d %d %d\n", lost, dropped, waiting)
		return out.String(), tr
	}
	want, _ := run(true)
	got, tr := run(false)
	if got != want {
		t.Errorf("fed only once bytes come, the decoding differs from feeding every event:\n%s", firstDiff(got, want))
	}
	if len(tr.bare) != 0 {
		t.Errorf("%d connections left bare after the trace", len(tr.bare))
	}
	for _, p := range []string{"venus", "resp", "http", "raw"} {
		if !strings.Contains(got, "conns "+p+" ") {
			t.Errorf("no %s connection: the trace does not test what it should\n%s", p, got[max(0, len(got)-400):])
		}
	}
}

// firstDiff returns the first line where a and b differ.
func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return fmt.Sprintf("line %d: %q, want %q", i+1, la[i], lb[i])
		}
	}
	return fmt.Sprintf("%d lines, want %d", len(la), len(lb))
}

// TestHeldBounded: a connection on trial that goes quiet after one event while another talks
// holds back no more than maxHeld records: it is decided early, and every message still comes
// out.
func TestHeldBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "quiet.plt")
	w, err := trace.Create(path, fixtures.Meta("ebpf", "venus"), fixtures.Options())
	if err != nil {
		t.Fatal(err)
	}
	req := []byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	ev := trace.Event{TS: fixtures.Base, Dur: 1000, PID: 7, TID: 7, Conn: 1, Dir: trace.DirSend, Op: trace.OpSendto,
		Source: trace.SourceEBPF, Bytes: int64(len(req)), Payload: req}
	if err := w.WriteEvent(&ev); err != nil {
		t.Fatal(err)
	}
	const pairs = maxHeld // two events each: twice as many as may wait
	for i := 0; i < pairs; i++ {
		ts := fixtures.Base + int64(i+1)*10_000
		rq := trace.Event{TS: ts, Dur: 1000, PID: 8, TID: 8, Conn: 2, Dir: trace.DirSend, Op: trace.OpSendto, Source: trace.SourceEBPF,
			Bytes: fixtures.FrameHeaderSize + 16, Payload: fixtures.Frame(16, fixtures.CmdWaitForFences, fixtures.FlagReplyWanted, 16)}
		rp := trace.Event{TS: ts + 5000, Dur: 1000, PID: 8, TID: 8, Conn: 2, Dir: trace.DirRecv, Op: trace.OpRecvfrom, Source: trace.SourceEBPF,
			Bytes: fixtures.FrameHeaderSize + 16, Payload: fixtures.Frame(16, fixtures.CmdWaitForFences, 0, 16)}
		if err := w.WriteEvent(&rq); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteEvent(&rp); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := trace.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	msgs := 0
	sink := &msgSink{fn: func(*Message) error { msgs++; return nil }}
	d, err := NewDecoder(0, nil, sink)
	if err != nil {
		t.Fatal(err)
	}
	p, err := newAutoPass(0, path, r.Meta(), d, sink)
	if err != nil {
		t.Fatal(err)
	}
	tr := p.trial
	held := 0
	var rec trace.Record
	for r.Next(&rec) == nil {
		p.record(&rec)
		held = max(held, len(p.held)-p.head)
	}
	if held > maxHeld {
		t.Errorf("%d records held at once, want at most %d", held, maxHeld)
	}
	if tr.waiting(1) {
		t.Error("the quiet connection is still on trial after the trace")
	}
	p.finish()
	p.end()
	if want := 2*pairs + 1; msgs != want {
		t.Errorf("%d messages, want %d", msgs, want)
	}
}
