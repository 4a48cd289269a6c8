package protocol

import (
	"strings"
	"testing"
)

// memcached's text protocol through the built-in spec: storage commands with data blocks,
// multi-key gets answered by VALUE lines up to END, noreply, numbers from incr, pipelined
// requests in one call, and replies split across calls.
func TestDecodeMemcached(t *testing.T) {
	spec, err := BuiltinSpec("memcached")
	if err != nil {
		t.Fatal(err)
	}
	var data, cuts []byte
	add := func(s string, recv bool, pieces int) {
		data = append(data, s...)
		for k := 0; k < pieces; k++ {
			n := len(s) / pieces
			if k == pieces-1 {
				n = len(s) - n*(pieces-1)
			}
			for n > 0 {
				c := byte(min(n, 128) - 1)
				if recv {
					c |= 0x80
				}
				cuts = append(cuts, c)
				n -= min(n, 128)
			}
		}
	}
	add("set k1 0 0 5\r\nhello\r\n", false, 1)
	add("STORED\r\n", true, 1)
	add("get k1 k2\r\n", false, 1)
	add("VALUE k1 0 5\r\nhello\r\nVALUE k2 0 3\r\nabc\r\nEND\r\n", true, 3)
	add("set k3 0 0 2 noreply\r\nhi\r\nincr n 1\r\ndelete k1\r\n", false, 1)
	add("6\r\nDELETED\r\n", true, 1)
	add("get "+strings.Repeat("x", 200)+"\r\n", false, 1)
	add("END\r\n", true, 1)
	msgs := feed(t, spec, data, cuts, 256)
	want := []struct {
		name  string
		reply bool
	}{{"set", false}, {"set", true}, {"get", false}, {"get", true}, {"set", false}, {"incr", false}, {"delete", false},
		{"incr", true}, {"delete", true}, {"get", false}, {"get", true}}
	if len(msgs) != len(want) {
		t.Fatalf("%d messages, want %d: %+v", len(msgs), len(want), msgs)
	}
	for i, w := range want {
		m := msgs[i]
		if m.Name != w.name || m.IsReply != w.reply || m.LostSync || m.Truncated {
			t.Errorf("message %d: %q reply=%v lost=%v, want %q reply=%v", i, m.Name, m.IsReply, m.LostSync, w.name, w.reply)
		}
	}
	if msgs[4].WantsReply || !msgs[5].WantsReply {
		t.Errorf("noreply: set wants a reply %v, incr %v", msgs[4].WantsReply, msgs[5].WantsReply)
	}
	if msgs[3].Size != 45 || msgs[3].Calls != 3 || msgs[3].RTT <= 0 {
		t.Errorf("get reply: %d bytes in %d calls, rtt %d; want 45 in 3", msgs[3].Size, msgs[3].Calls, msgs[3].RTT)
	}
}

func TestParseLineSpec(t *testing.T) {
	for _, c := range []struct{ spec, err string }{
		{`{"name":"x","kind":"line"}`, "without a line section"},
		{`{"name":"x","kind":"line","line":{"requests":[]}}`, "no command words"},
		{`{"name":"x","kind":"line","line":{"terminator":";","requests":[{"word":"A"}]}}`, "terminator"},
		{`{"name":"x","kind":"line","line":{"requests":[{"word":"A B"}]}}`, "without blanks"},
		{`{"name":"x","kind":"line","line":{"requests":[{"word":"A"},{"word":"A"}]}}`, "twice"},
		{`{"name":"x","kind":"line","line":{"requests":[{"word":"A","length_arg":-1}]}}`, "length_arg"},
		{`{"name":"smtp","kind":"line","line":{"case_insensitive":true,"numeric_replies":true,"requests":[{"word":"HELO"},{"word":"QUIT"}]}}`, ""},
		{`{"name":"x","kind":"line","line":{"requests":[{"word":"A"}],"replies":[{"word":"OK","answers":["B"]}]}}`, "no command word"},
		{`{"name":"x","kind":"line","line":{"requests":[{"word":"A","answered_by":["NO"]}],"replies":[{"word":"OK"}]}}`, "no command word"},
		{`{"name":"x","kind":"line","line":{"requests":[{"word":"A","quiet_flag":"q q"}]}}`, "quiet_flag"},
	} {
		_, err := ParseSpec(strings.NewReader(c.spec))
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: error %v, want %q", c.spec, err, c.err)
		}
	}
}

// memcached's meta commands with the quiet flag, as a client batches them: "mg hit v q", "mg
// miss v q", "mn". The miss is not answered; the hit's VA answers the first mg, MN the mn, and
// the quiet mg between them got no reply. Before, VA and MN paired with the two mg and every
// later reply with a request one batch older, the RTTs growing without a warning.
func TestDecodeMemcachedMetaQuiet(t *testing.T) {
	spec, err := BuiltinSpec("memcached")
	if err != nil {
		t.Fatal(err)
	}
	var st callStream
	add := st.add
	for range 3 {
		add("mg hit v q\r\nmg miss v q\r\nmn\r\n", false)
		add("VA 5\r\nhello\r\nMN\r\n", true)
	}
	add("mg q v\r\n", false) // a key named q, not quiet: answered
	add("EN\r\n", true)
	add("ms k 2 q\r\nhi\r\nmn\r\n", false) // a quiet set that succeeded
	add("MN\r\n", true)
	msgs := feed(t, spec, st.data, st.cuts, 256)
	var pairs []string
	var quiet, wanting int
	for _, m := range msgs {
		switch {
		case m.IsReply:
			pairs = append(pairs, m.Name)
			if m.RTT <= 0 {
				t.Errorf("reply %q unpaired", m.Name)
			}
		case m.WantsReply:
			wanting++
		default:
			quiet++
		}
	}
	if got := strings.Join(pairs, " "); got != "mg mn mg mn mg mn mg mn" {
		t.Errorf("replies answer %q, want mg mn three times, mg, mn", got)
	}
	if quiet != 7 || wanting != 5 {
		t.Errorf("%d quiet requests, %d wanting a reply; want 7 and 5", quiet, wanting)
	}
	for i, m := range msgs { // each reply answers a request of its own batch
		if m.IsReply && m.ReqTS < msgs[max(i-3, 0)].TS {
			t.Errorf("reply %d (%s) answers a request of an earlier batch", i, m.Name)
		}
	}
}

// TestRESPPushShapeNoAllocs: the shape of every array a RESP client receives is looked at, so
// telling it allocates nothing, and a published message is told from a reply of the same
// length in any letter case.
func TestRESPPushShapeNoAllocs(t *testing.T) {
	msg := []byte("*3\r\n$7\r\nMESSAGE\r\n$2\r\nch\r\n$1\r\nx\r\n")
	lrange := []byte("*3\r\n$7\r\nmessag_\r\n$2\r\nch\r\n$1\r\nx\r\n")
	if shape, kind, _ := respPushShape(msg); shape != shapeMessage || kind != "message" {
		t.Errorf("published message: shape %d kind %q", shape, kind)
	}
	if shape, _, _ := respPushShape(lrange); shape != shapeReply {
		t.Errorf("a reply taken for shape %d", shape)
	}
	if n := testing.AllocsPerRun(100, func() { respPushShape(msg); respPushShape(lrange) }); n != 0 {
		t.Errorf("%.1f allocations per shape", n)
	}
}
