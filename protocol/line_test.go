package protocol

import (
	"fmt"
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

// TestRESPXReadBlock: XREAD and XREADGROUP wait on the server when BLOCK is among their
// arguments before STREAMS; the request and the reply that answers it carry Blocks, so that
// the round trip's wait is not taken for the network's or the server's work. Without BLOCK, or
// with BLOCK only as a stream's name, or past the captured head, they are reads.
func TestRESPXReadBlock(t *testing.T) {
	spec, err := BuiltinSpec("resp")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, req string
		head      int
		want      bool
	}{
		{"XREAD BLOCK", "*6\r\n$5\r\nXREAD\r\n$5\r\nBLOCK\r\n$4\r\n1000\r\n$7\r\nSTREAMS\r\n$1\r\ns\r\n$1\r\n$\r\n", 128, true},
		{"xreadgroup block, lower case", "*9\r\n$10\r\nxreadgroup\r\n$5\r\ngroup\r\n$1\r\ng\r\n$1\r\nc\r\n$5\r\nblock\r\n$1\r\n0\r\n$7\r\nstreams\r\n$1\r\ns\r\n$1\r\n>\r\n", 128, true},
		{"XREAD COUNT, no BLOCK", "*6\r\n$5\r\nXREAD\r\n$5\r\nCOUNT\r\n$1\r\n1\r\n$7\r\nSTREAMS\r\n$1\r\ns\r\n$1\r\n0\r\n", 128, false},
		{"a stream named block", "*4\r\n$5\r\nXREAD\r\n$7\r\nSTREAMS\r\n$5\r\nblock\r\n$1\r\n0\r\n", 128, false},
		{"BLOCK past the head", "*6\r\n$5\r\nXREAD\r\n$5\r\nBLOCK\r\n$4\r\n1000\r\n$7\r\nSTREAMS\r\n$1\r\ns\r\n$1\r\n$\r\n", 16, false},
		{"GET block", "*2\r\n$3\r\nGET\r\n$5\r\nBLOCK\r\n", 128, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var st callStream
			st.add(c.req, false)
			st.add("*-1\r\n", true)
			msgs := feed(t, spec, st.data, st.cuts, c.head)
			if len(msgs) != 2 {
				t.Fatalf("%d messages, want 2", len(msgs))
			}
			for _, m := range msgs {
				if m.Blocks != c.want {
					t.Errorf("%s (reply %v): Blocks %v, want %v", m.Name, m.IsReply, m.Blocks, c.want)
				}
			}
			if msgs[1].RTT == 0 {
				t.Error("the reply is not paired")
			}
		})
	}
}

// TestRESPPastHeadPairing: a RESP value whose length lies past the captured head runs to the
// next call that starts a value. A request left so must still be answered by the reply that
// follows it, and a big reply's later calls that happen to start like a value must not answer
// the requests after it; with several requests waiting (pipelining), a call that starts a value
// starts the next reply, as before.
func TestRESPPastHeadPairing(t *testing.T) {
	spec, err := BuiltinSpec("resp")
	if err != nil {
		t.Fatal(err)
	}
	const head = 24
	setEX := "*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$20\r\n01234567890123456789\r\n$2\r\nEX\r\n$3\r\n100\r\n" // EX past the head
	get := "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
	big1 := "*3\r\n*2\r\n$4\r\nname\r\n$20\r\n01234567890123456789\r\n" // its length lies past the head
	big2 := "*2\r\n$4\r\nname\r\n$3\r\nabc\r\n*1\r\n:1\r\n"             // goes on with it, shaped as values
	type reply struct {
		name string
		size int64
	}
	for _, c := range []struct {
		name  string
		calls []string // ">" sent, "<" received
		want  []reply
	}{
		{"a request past the head, serial", []string{">" + setEX, "<+OK\r\n", ">" + get, "<$1\r\nv\r\n", ">" + setEX, "<+OK\r\n"},
			[]reply{{"SET", 5}, {"GET", 7}, {"SET", 5}}},
		{"a big reply in two calls, then a request", []string{">" + get, "<" + big1, "<" + big2, ">" + setEX, "<+OK\r\n"},
			[]reply{{"GET", int64(len(big1) + len(big2))}, {"SET", 5}}},
		{"pipelined: two waiting, a call that starts a value starts a reply", []string{">" + get, ">" + get, "<" + big1, "<$1\r\nv\r\n"},
			[]reply{{"GET", int64(len(big1))}, {"GET", 7}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var st callStream
			for _, s := range c.calls {
				st.add(s[1:], s[0] == '<')
			}
			var got []reply
			for _, m := range feed(t, spec, st.data, st.cuts, head) {
				if m.IsReply {
					if m.RTT <= 0 {
						t.Errorf("reply %q of %d bytes not paired", m.Name, m.Size)
					}
					got = append(got, reply{m.Name, m.Size})
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("replies %v, want %v", got, c.want)
			}
		})
	}
}
