package analyzers

import (
	"fmt"
	"strings"
	"testing"

	"github.com/perflab/perflab/protocol"
)

// bulk is a RESP array of bulk strings.
func bulk(words ...string) string {
	s := fmt.Sprintf("*%d\r\n", len(words))
	for _, w := range words {
		s += fmt.Sprintf("$%d\r\n%s\r\n", len(w), w)
	}
	return s
}

// confirm is a subscription confirmation: kind, channel, channels subscribed after it.
func confirm(kind, channel string, n int) string {
	return fmt.Sprintf("*3\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n:%d\r\n", len(kind), kind, len(channel), channel, n)
}

// TestRESPPubSub: what a Redis server sends a subscribed client of its own accord (published
// messages, the confirmations of a SUBSCRIBE's further channels, RESP3 pushes, MONITOR's
// lines) is a push: it
// answers no request, is no round trip and is not counted unpaired; the requests a subscribed
// client does send (PING, UNSUBSCRIBE) still pair with their replies, and once the client left
// its last channel an array that looks like a message is a reply again.
func TestRESPPubSub(t *testing.T) {
	msg := func(i int) string { return bulk("message", "ch", fmt.Sprintf("m%d", i)) }
	for _, c := range []struct {
		name               string
		calls              []string
		roundTrips, pushes uint64
		rows               map[string]uint64 // "name kind" → count, recv direction
	}{
		{"subscribe then messages, one and three a call",
			[]string{">" + bulk("SUBSCRIBE", "ch"), "<" + confirm("subscribe", "ch", 1), "<" + msg(1), "<" + msg(2) + msg(3) + msg(4)},
			1, 4, map[string]uint64{"SUBSCRIBE reply": 1, "message push": 4}},
		{"a SUBSCRIBE of two channels: one reply, one further confirmation",
			[]string{">" + bulk("SUBSCRIBE", "a", "b"), "<" + confirm("subscribe", "a", 1) + confirm("subscribe", "b", 2), "<" + bulk("pmessage", "a*", "a", "x")},
			1, 2, map[string]uint64{"SUBSCRIBE reply": 1, "subscribe push": 1, "pmessage push": 1}},
		{"PING while subscribed is answered",
			[]string{">" + bulk("SUBSCRIBE", "ch"), "<" + confirm("subscribe", "ch", 1), "<" + msg(1), ">" + bulk("PING"), "<" + msg(2) + bulk("pong", ""), "<" + msg(3)},
			2, 3, map[string]uint64{"PING reply": 1, "message push": 3}},
		{"after the last UNSUBSCRIBE, a reply shaped as a message is a reply",
			[]string{">" + bulk("SUBSCRIBE", "ch"), "<" + confirm("subscribe", "ch", 1), ">" + bulk("UNSUBSCRIBE"), "<" + confirm("unsubscribe", "ch", 0),
				">" + bulk("LRANGE", "l", "0", "-1"), "<" + bulk("message", "ch", "x")},
			3, 0, map[string]uint64{"LRANGE reply": 1, "UNSUBSCRIBE reply": 1}},
		{"MONITOR: a line per command the server runs",
			[]string{">" + bulk("MONITOR"), "<+OK\r\n", "<+1700000000.1 [0 127.0.0.1:5] \"SET\" \"k\" \"v\"\r\n+1700000000.2 [0 127.0.0.1:5] \"GET\" \"k\"\r\n"},
			1, 2, map[string]uint64{"MONITOR reply": 1, "monitor push": 2}},
		{"the trace began after the SUBSCRIBE",
			[]string{"<" + msg(1), "<" + msg(2)},
			0, 2, map[string]uint64{"message push": 2}},
		{"an array shaped as a message answers a waiting request on a connection never subscribed",
			[]string{">" + bulk("LRANGE", "l", "0", "-1"), "<" + bulk("message", "ch", "x")},
			1, 0, map[string]uint64{"LRANGE reply": 1}},
		{"RESP3: a push while a GET waits, then the GET's reply",
			[]string{">" + bulk("GET", "k"), "<>2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n", "<$1\r\nv\r\n"},
			1, 1, map[string]uint64{"GET reply": 1, "invalidate push": 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Analyze(protocol.Files([]string{streamTrace(t, 256, c.calls...)}, nil), Options{Protocol: "resp"})
			if err != nil {
				t.Fatal(err)
			}
			if s.RoundTrips.Client != c.roundTrips || s.RoundTrips.Unpaired != 0 {
				t.Errorf("round trips %d, unpaired %d; want %d, 0", s.RoundTrips.Client, s.RoundTrips.Unpaired, c.roundTrips)
			}
			got := map[string]uint64{}
			var pushes uint64
			for _, cs := range s.Commands {
				if cs.Direction == "recv" {
					got[cs.Name+" "+cs.Kind] += cs.Count
				}
				if cs.Kind == "push" {
					pushes += cs.Count
				}
			}
			if pushes != c.pushes {
				t.Errorf("pushes %d, want %d; rows %v", pushes, c.pushes, got)
			}
			for k, n := range c.rows {
				if got[k] != n {
					t.Errorf("%s: %d, want %d; rows %v", k, got[k], n, got)
				}
			}
			for _, w := range s.Warnings {
				if strings.Contains(w, "answer no request seen") {
					t.Errorf("warning %q", w)
				}
			}
		})
	}
}

// TestRESPPushesPastHead: calls of pushes longer than the head. A call whose bytes go on past
// a whole value holds at least one more; one whose head ends inside a value may hold no more.
// Only the first kind adds to "at least". Either way, on a subscribed connection waiting for no reply, the round trips are exact and
// the warning says so, and "at least" never exceeds what was sent.
func TestRESPPushesPastHead(t *testing.T) {
	msg := bulk("message", "ch", "0123456789") // 43 bytes
	calls := []string{">" + bulk("SUBSCRIBE", "ch"), "<" + confirm("subscribe", "ch", 1)}
	for range 10 {
		calls = append(calls, "<"+strings.Repeat(msg, 2)) // the head (64) ends inside the second
	}
	short := bulk("message", "ch", "x") // 32 bytes: two fill the head
	for range 5 {
		calls = append(calls, "<"+strings.Repeat(short, 3)) // a third whole past the head
	}
	sent := uint64(10*2 + 5*3)
	s, err := Analyze(protocol.Files([]string{streamTrace(t, 64, calls...)}, nil), Options{Protocol: "resp"})
	if err != nil {
		t.Fatal(err)
	}
	if s.CountsLowerBound() || s.CallsPastHead != 0 {
		t.Errorf("round-trip counts taken as lower bounds: calls past the head %d", s.CallsPastHead)
	}
	if s.PushesPastHead != 15 || s.RoundTrips.Client != 1 || s.RoundTrips.Unpaired != 0 {
		t.Errorf("pushes past the head %d, round trips %d, unpaired %d; want 15, 1, 0", s.PushesPastHead, s.RoundTrips.Client, s.RoundTrips.Unpaired)
	}
	found := false
	for _, w := range s.Warnings {
		var n, dec uint64
		if _, err := fmt.Sscanf(w[strings.Index(w, "pushes: ")+len("pushes: "):], "at least %d (%d decoded", &n, &dec); strings.Contains(w, "pushes: at least") && err == nil {
			found = true
			if n > sent || n != dec+5 || !strings.Contains(w, "round trips are counted exactly") {
				t.Errorf("at least %d of %d sent, %d decoded: %q", n, sent, dec, w)
			}
		}
	}
	if !found {
		t.Errorf("no pub/sub lower-bound warning: %q", s.Warnings)
	}
}

// TestErrnoName: the kernel's restart codes, which a call interrupted by a signal exits with,
// are named as the kernel names them, not "ERRNO_512".
func TestErrnoName(t *testing.T) {
	for _, c := range []struct {
		errno uint32
		want  string
	}{
		{11, "EAGAIN"},
		{512, "ERESTARTSYS"},
		{513, "ERESTARTNOINTR"},
		{514, "ERESTARTNOHAND"},
		{516, "ERESTART_RESTARTBLOCK"},
		{104, "CONNECTION_RESET_BY_PEER"},
	} {
		if got := errnoName(c.errno); got != c.want {
			t.Errorf("errnoName(%d) = %q, want %q", c.errno, got, c.want)
		}
	}
}
