package analyzers

import (
	"strings"
	"testing"

	"github.com/perflab/perflab/fixtures"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// streamTrace writes one connection's calls: each string one call, sent when its first byte
// is '>', received when '<' (the marker is not part of the data); head bytes are kept.
func streamTrace(t *testing.T, head int, calls ...string) string {
	t.Helper()
	return writeTrace(t, "s.plt", fixtures.Meta("ebpf", "test"), func(w *trace.Writer) error {
		_, err := writeCalls(w, 3, head, int64(1e6), calls...)
		return err
	})
}

// writeCalls writes calls on connection conn of pid 9, one every 10 µs from ts: each a string
// whose first byte is '>' (sent) or '<' (received), its payload head the first head bytes of
// the rest. It returns the time after the last.
func writeCalls(w *trace.Writer, conn uint64, head int, ts int64, calls ...string) (int64, error) {
	for _, c := range calls {
		dir := trace.DirSend
		if c[0] == '<' {
			dir = trace.DirRecv
		}
		data := c[1:]
		ev := trace.Event{TS: ts, Dur: 1000, PID: 9, TID: 9, Conn: conn, Dir: dir, Op: trace.OpWrite, Source: trace.SourceEBPF,
			Bytes: int64(len(data)), Payload: []byte(data[:min(head, len(data))])}
		if err := w.WriteEvent(&ev); err != nil {
			return ts, err
		}
		ts += 10000
	}
	return ts, nil
}

func hasWarningWith(s *Summary, parts ...string) bool {
	for _, w := range s.Warnings {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(w, p)
		}
		if ok {
			return true
		}
	}
	return false
}

// auto tries every decoder on each connection and keeps the one that explains the most bytes:
// an HTTP conversation and a memcached one are found although no first-bytes rule names
// them, and the choice and its share are reported. Forcing a protocol that explains little
// warns with the share.
func TestDetectByBytesExplained(t *testing.T) {
	http := []string{">GET /a/1 HTTP/1.1\r\nHost: x\r\n\r\n", "<HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
		">GET /a/2 HTTP/1.1\r\nHost: x\r\n\r\n", "<HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"}
	mc := []string{">set k 0 0 5\r\nhello\r\n", "<STORED\r\n", ">get k\r\n", "<VALUE k 0 5\r\nhello\r\nEND\r\n"}
	for _, c := range []struct {
		name  string
		calls []string
	}{{"http", http}, {"memcached", mc}} {
		path := streamTrace(t, 256, c.calls...)
		s, err := Analyze(protocol.Files([]string{path}, nil), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if s.Protocol != c.name || s.Decoding == nil || s.Decoding.Mode != "auto" || s.Decoding.Share != 1 || s.RoundTrips.Count != 2 {
			t.Errorf("%s: protocol %q, decoding %+v, %d round trips", c.name, s.Protocol, s.Decoding, s.RoundTrips.Count)
		}
		forced, err := Analyze(protocol.Files([]string{path}, nil), Options{Protocol: "resp"})
		if err != nil {
			t.Fatal(err)
		}
		if forced.Decoding == nil || forced.Decoding.Mode != "forced" || forced.Decoding.Share >= 0.9 || !hasWarningWith(forced, "protocol resp decoded", "%") {
			t.Errorf("%s forced as resp: decoding %+v, warnings %q", c.name, forced.Decoding, forced.Warnings)
		}
	}
}

// RESP pipelining: commands in one call are counted each; commands past the captured head
// are counted as "at least", with a warning naming the connection.
func TestRESPPipelinedAtLeast(t *testing.T) {
	cmd := "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n" // 33 bytes
	path := streamTrace(t, 256, ">"+strings.Repeat(cmd, 4), "<"+strings.Repeat("+OK\r\n", 4))
	s, err := Analyze(protocol.Files([]string{path}, nil), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Protocol != "resp" || s.Totals.Send.Frames != 4 || s.RoundTrips.Count != 4 {
		t.Errorf("whole heads: protocol %q, %d commands, %d round trips, want 4", s.Protocol, s.Totals.Send.Frames, s.RoundTrips.Count)
	}
	// 20 commands in one call: the head holds 7 whole ones
	path = streamTrace(t, 256, ">"+strings.Repeat(cmd, 20), "<"+strings.Repeat("+OK\r\n", 20))
	s, err = Analyze(protocol.Files([]string{path}, nil), Options{Protocol: "resp"})
	if err != nil {
		t.Fatal(err)
	}
	// the head ends inside the eighth, whose length it does not show: more may follow it, or none
	if s.Totals.Send.Frames != 8 || !hasWarningWith(s, "connection 3", "send commands: at least 8", "may have followed it unseen") {
		t.Errorf("cut heads: %d commands, warnings %q", s.Totals.Send.Frames, s.Warnings)
	}
}

// Pipelined GETs past a 64-byte head, as redis-benchmark -P 16 sends them: auto detection
// still finds resp (the bytes past the heads, which no decoder saw, count neither way), the
// summary says its counts are lower bounds, and the replies to requests past the heads are
// explained by them, not by a trace begun mid-conversation.
func TestRESPPipelinedPastHead(t *testing.T) {
	get := "*2\r\n$3\r\nGET\r\n$16\r\nkey:__rand_int__\r\n" // 36 bytes
	var calls []string
	for range 10 {
		calls = append(calls, ">"+strings.Repeat(get, 16), "<"+strings.Repeat("$3\r\nxxx\r\n", 16))
	}
	s, err := Analyze(protocol.Files([]string{streamTrace(t, 64, calls...)}, nil), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Protocol != "resp" {
		t.Fatalf("protocol %q, want resp; decoding %+v", s.Protocol, s.Decoding)
	}
	if s.CallsPastHead != 20 || s.Decoding == nil || s.Decoding.UnseenBytes == 0 {
		t.Errorf("calls past the head %d, want 20; decoding %+v", s.CallsPastHead, s.Decoding)
	}
	if !hasWarningWith(s, "replies answer no request seen", "captured payload heads ended before the pipelined messages did") {
		t.Errorf("warnings %q", s.Warnings)
	}
	forced, err := Analyze(protocol.Files([]string{streamTrace(t, 64, calls...)}, nil), Options{Protocol: "resp"})
	if err != nil {
		t.Fatal(err)
	}
	if hasWarningWith(forced, "protocol resp decoded") {
		t.Errorf("forced resp warned that the traffic is not resp: %q", forced.Warnings)
	}
}

// Two GETs a call, a head that shows only the first: each call looks like one request in flight
// when two were. The counts are lower bounds, so perflab does not call the round trips serial.
func TestLowerBoundsNotSerial(t *testing.T) {
	get := "*2\r\n$3\r\nGET\r\n$16\r\nkey:__rand_int__\r\n" // 36 bytes
	var calls []string
	for range 150 {
		calls = append(calls, ">"+strings.Repeat(get, 2), "<"+strings.Repeat("$3\r\nxxx\r\n", 2))
	}
	s, err := Analyze(protocol.Files([]string{streamTrace(t, 36, calls...)}, nil), Options{Protocol: "resp"})
	if err != nil {
		t.Fatal(err)
	}
	if !s.CountsLowerBound() {
		t.Fatalf("counts not lower bounds: calls past the head %d, blind %d, unpaired %d", s.CallsPastHead, s.CallsBlind, s.RoundTrips.Unpaired)
	}
	if s.BytesPastHead != 150*uint64(len(get)) { // each call's second GET, unseen
		t.Errorf("bytes past the head %d, want %d", s.BytesPastHead, 150*len(get))
	}
	if s.Evidence != nil {
		for _, f := range s.Evidence.Findings {
			if f.Kind == "serial_round_trips" {
				t.Errorf("finding %q on requests pipelined two to a call", f.Title)
			}
		}
	}
}

// TestHeadAdvice: the advice on bytes past the heads asks for the largest head only of traces
// recorded with less; traces that kept the most say that the calls are longer.
func TestHeadAdvice(t *testing.T) {
	for _, c := range []struct {
		heads []int
		want  string
	}{
		{[]int{64}, "record with --payload-bytes 256 to see more"},
		{[]int{256, 64}, "record with --payload-bytes 256 to see more"},
		{[]int{256}, "already kept the most"},
		{[]int{256, 256}, "already kept the most"},
	} {
		var metas []trace.Meta
		for _, h := range c.heads {
			metas = append(metas, trace.Meta{PayloadBytes: h})
		}
		if got := HeadAdvice(metas, "see more"); !strings.Contains(got, c.want) {
			t.Errorf("heads %v: %q, want %q", c.heads, got, c.want)
		}
	}
}

// TestTextBlindWarning: a text protocol's line past the head delimits its message by the call;
// the warning calls the counts lower bounds only when replies answer requests not seen (the
// requests were pipelined behind it), and says they stand when every reply found its request.
func TestTextBlindWarning(t *testing.T) {
	get := ">get keykeykey01\r\n"                                                    // 17 bytes: a second in the call is past a 24-byte head
	value := "<VALUE keykeykey01 0 30\r\n" + strings.Repeat("v", 30) + "\r\nEND\r\n" // its END past the head
	for _, c := range []struct {
		name  string
		head  int
		calls []string
		want  string
	}{
		{"one request a call", 24, []string{get, value, get, value}, "the counts stand"},
		{"two requests a call", 24, []string{get + get[1:], value, value}, "counts are lower bounds"},
	} {
		s, err := Analyze(protocol.Files([]string{streamTrace(t, c.head, c.calls...)}, nil), Options{Protocol: "memcached"})
		if err != nil {
			t.Fatal(err)
		}
		if !hasWarningWith(s, "line lay past the captured payload head", c.want) {
			t.Errorf("%s: warnings %q, want one saying %q", c.name, s.Warnings, c.want)
		}
	}
}
