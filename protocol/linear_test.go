package protocol

import (
	"os"
	"path/filepath"
	"strconv"
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
	d.chosen = map[uint64]*Spec{}
	tr, err := newTrial(0, r.Meta(), d.chosen)
	if err != nil {
		t.Fatal(err)
	}
	p := &pass{d: d, out: sink, cf: NewCipherFilter(r.Meta()), trial: tr}
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
