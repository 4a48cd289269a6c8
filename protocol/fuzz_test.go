package protocol

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/perflab/perflab/trace"
)

// callStream builds feed's input one call at a time (a call of up to 128 bytes).
type callStream struct{ data, cuts []byte }

// add appends a call carrying s, received when recv, else sent.
func (st *callStream) add(s string, recv bool) {
	st.data = append(st.data, s...)
	c := byte(len(s) - 1)
	if recv {
		c |= 0x80
	}
	st.cuts = append(st.cuts, c)
}

// feed decodes data as one connection's byte stream, cut into calls by cuts (each byte: a
// call's length 1..128, and its top bit the direction), keeping head bytes of each call as the
// payload head, and returns the messages.
func feed(t testing.TB, spec *Spec, data, cuts []byte, head int) []Message {
	var got []Message
	out := &msgSink{fn: func(m *Message) error { got = append(got, *m); return nil }}
	d, err := NewDecoder(0, spec, out)
	if err != nil {
		t.Fatal(err)
	}
	if len(cuts) == 0 {
		cuts = []byte{0x7f}
	}
	var ts int64
	for i, pos := 0, 0; pos < len(data); i++ {
		c := cuts[i%len(cuts)]
		n := int(c&0x7f) + 1
		n = min(n, len(data)-pos)
		dir := trace.DirSend
		if c&0x80 != 0 {
			dir = trace.DirRecv
		}
		chunk := data[pos : pos+n]
		ev := trace.Event{TS: ts, Dur: 10, PID: 1, Conn: 7, Dir: dir, Op: trace.OpSendto, Source: trace.SourceEBPF,
			Bytes: int64(n), Payload: chunk[:min(head, n)]}
		d.Event(&ev)
		ts += 100
		pos += n
	}
	d.Flush()
	return got
}

func checkMessages(t *testing.T, data []byte, msgs []Message) {
	var total int64
	for _, m := range msgs {
		if m.Size < 0 || m.End < m.TS && !m.Truncated {
			t.Fatalf("message with size %d, ts %d..%d", m.Size, m.TS, m.End)
		}
		if !m.Truncated {
			total += m.Size
		}
	}
	if total > int64(len(data)) {
		t.Fatalf("messages hold %d bytes, the stream only %d", total, len(data))
	}
	if len(msgs) > len(data) {
		t.Fatalf("%d messages from %d bytes", len(msgs), len(data))
	}
}

func fuzzDecoder(f *testing.F, proto string, seeds [][]byte) {
	spec, err := BuiltinSpec(proto)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range seeds {
		f.Add(s, []byte{0x7f}, uint8(64))
		f.Add(s, []byte{0, 7, 0x7f, 0x81}, uint8(16))
	}
	f.Fuzz(func(t *testing.T, data, cuts []byte, head uint8) {
		if len(data) > 1<<16 {
			return
		}
		checkMessages(t, data, feed(t, spec, data, cuts, int(head)))
	})
}

func venusFrame(size uint32, cmd, flags uint32) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 0x56504C53)
	b = binary.LittleEndian.AppendUint32(b, size)
	p := binary.LittleEndian.AppendUint32(nil, cmd)
	p = binary.LittleEndian.AppendUint32(p, flags)
	p = binary.LittleEndian.AppendUint32(p, 0)
	p = binary.LittleEndian.AppendUint32(p, 1)
	n := int(min(size, 4096)) // a hostile size: only the head is built
	p = append(p, make([]byte, max(0, n-len(p)))...)
	return append(b, p[:n]...)
}

func ggmlReq(cmd byte, payload []byte) []byte {
	b := []byte{cmd}
	b = binary.LittleEndian.AppendUint64(b, uint64(len(payload)))
	return append(b, payload...)
}

func FuzzDecodeVenus(f *testing.F) {
	fuzzDecoder(f, "venus", [][]byte{
		venusFrame(16, 39, 1),
		append(venusFrame(24, 18, 1), venusFrame(16, 39, 0)...),
		venusFrame(0xffffff00, 18, 1)[:40],
		[]byte("SLPVxxxxgarbage"),
	})
}

func FuzzDecodeGGMLRPC(f *testing.F) {
	fuzzDecoder(f, "ggml-rpc", [][]byte{
		ggmlReq(14, nil),
		append(ggmlReq(14, nil), ggmlReq(8, make([]byte, 56))...),
		append(ggmlReq(6, make([]byte, 300)), ggmlReq(10, make([]byte, 20))...),
		{14, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
	})
}

func FuzzDecodeRESP(f *testing.F) {
	fuzzDecoder(f, "resp", [][]byte{
		[]byte("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"),
		[]byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n+OK\r\n"),
		[]byte("PING\r\n"),
		[]byte("*1\r\n$99999999999\r\n"),
		// pub/sub: a SUBSCRIBE, its confirmation, published messages; a RESP3 push
		[]byte("*2\r\n$9\r\nSUBSCRIBE\r\n$2\r\nch\r\n*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nx\r\n*4\r\n$8\r\npmessage\r\n$2\r\nc*\r\n$2\r\nch\r\n$1\r\ny\r\n"),
		[]byte("*3\r\n$11\r\nunsubscribe\r\n$2\r\nch\r\n:0\r\n>2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n"),
		// XREAD BLOCK; a SET whose EX lies past a short head, its +OK; a nested reply
		[]byte("*6\r\n$5\r\nXREAD\r\n$5\r\nBLOCK\r\n$3\r\n100\r\n$7\r\nSTREAMS\r\n$1\r\ns\r\n$1\r\n$\r\n*-1\r\n"),
		[]byte("*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$20\r\n01234567890123456789\r\n$2\r\nEX\r\n$3\r\n100\r\n+OK\r\n*3\r\n*2\r\n$4\r\nname\r\n$3\r\nabc\r\n*1\r\n:1\r\n"),
	})
}

// FuzzDecodeHTTP: the committed corpus (testdata/fuzz/FuzzDecodeHTTP) holds byte streams
// captured from real servers and clients (Go's net/http, nginx with curl).
func FuzzDecodeHTTP(f *testing.F) {
	fuzzDecoder(f, "http", [][]byte{
		[]byte("GET /users/42 HTTP/1.1\r\nHost: x\r\n\r\n"),
		[]byte("POST /u HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
		[]byte("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999\r\n\r\nabc"),
	})
}

// FuzzDecodeMemcached: the committed corpus holds streams captured from a real memcached.
func FuzzDecodeMemcached(f *testing.F) {
	fuzzDecoder(f, "memcached", [][]byte{
		[]byte("set k 0 0 5\r\nhello\r\nget k\r\n"),
		[]byte("VALUE k 0 5\r\nhello\r\nEND\r\n"),
		[]byte("set k 0 0 99999999999999999\r\n"),
		// quiet meta commands: a hit answered, a miss not, mn's MN
		[]byte("mg hit v q\r\nmg miss v q\r\nmn\r\nVA 5\r\nhello\r\nMN\r\n"),
	})
}

func FuzzParseSpec(f *testing.F) {
	for _, n := range Builtins() {
		b, err := builtinFS.ReadFile("protocols/" + n + ".json")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"name":"x","request":{"bytes":4,"size":{"offset":0,"size":4}}}`))
	f.Add([]byte(`{"name":"x","request":{"bytes":4,"size":{"offset":2,"size":8}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseSpec(bytes.NewReader(b))
		if err != nil {
			if s != nil {
				t.Fatal("spec and error")
			}
			return
		}
		// a spec that parses must decode any stream without panicking
		data := append(ggmlReq(14, nil), venusFrame(16, 39, 1)...)
		checkMessages(t, data, feed(t, s, data, []byte{3, 0x85, 9}, 32))
	})
}

// The framer handles one frame split over many calls and many frames in one call.
func TestFramerSplitsAndJoins(t *testing.T) {
	spec, _ := BuiltinSpec("venus")
	var stream []byte
	for i := 0; i < 5; i++ {
		stream = append(stream, venusFrame(40, 39, 1)...)
	}
	for _, tc := range []struct {
		name string
		cuts []byte
	}{
		{"one byte per call", []byte{0}},
		{"7 bytes per call", []byte{6}},
		{"all in one call", []byte{0x7f}},
		{"frame per call", []byte{47}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs := feed(t, spec, stream, tc.cuts, 256)
			if len(msgs) != 5 {
				t.Fatalf("%d messages, want 5", len(msgs))
			}
			for _, m := range msgs {
				if m.Size != 48 || m.Name != "vkWaitForFences" || !m.WantsReply || m.LostSync {
					t.Errorf("message %+v", m)
				}
			}
		})
	}
}

// A header past the captured head loses sync; the framer recovers at the next call that starts
// with a valid header and counts the loss.
func TestFramerLostSync(t *testing.T) {
	spec, _ := BuiltinSpec("venus")
	var got []Message
	out := &msgSink{fn: func(m *Message) error { got = append(got, *m); return nil }}
	d, _ := NewDecoder(0, spec, out)
	two := append(venusFrame(100, 18, 0), venusFrame(100, 18, 0)...)
	send := func(b []byte, head int) {
		ev := trace.Event{Conn: 1, PID: 1, Dir: trace.DirSend, Op: trace.OpSendmsg, Bytes: int64(len(b)), Payload: b[:min(head, len(b))]}
		d.Event(&ev)
	}
	send(two, 64)                      // the second header lies at byte 108, past the 64-byte head
	send(venusFrame(10, 18, 0), 64)    // resync here
	send(venusFrame(10, 39, 1)[:5], 5) // a cut header at the end of the stream
	d.Flush()
	ls, _, _ := d.Stats()
	if ls < 1 {
		t.Errorf("lost sync counted %d times, want ≥ 1", ls)
	}
	if len(got) != 2 || !got[1].LostSync || got[1].Size != 18 {
		t.Fatalf("messages %+v, want the first frame and the resynchronised one", got)
	}
}

// RESP: commands named from the first bulk string, every request answered in order.
func TestDecodeRESP(t *testing.T) {
	spec, _ := BuiltinSpec("resp")
	var st callStream
	add := st.add
	add("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", false)
	add("$1\r\nv\r\n", true)
	add("*3\r\n$3\r\nset\r\n$1\r\nk\r\n$1\r\nw\r\n", false)
	add("+OK\r\n", true)
	add("PING\r\n", false)
	add("+PONG\r\n", true)
	msgs := feed(t, spec, st.data, st.cuts, 64)
	want := []struct {
		name  string
		reply bool
	}{{"GET", false}, {"GET", true}, {"SET", false}, {"SET", true}, {"PING", false}, {"PING", true}}
	if len(msgs) != len(want) {
		t.Fatalf("%d messages: %+v", len(msgs), msgs)
	}
	for i, w := range want {
		m := msgs[i]
		if m.Name != w.name || m.IsReply != w.reply || (w.reply && m.RTT <= 0) || (!w.reply && !m.WantsReply) {
			t.Errorf("message %d: %+v, want %s reply=%v", i, m, w.name, w.reply)
		}
	}
}

// FuzzDecodeRaw cuts arbitrary bytes into calls of both directions: every byte lands in
// exactly one message, and an exchange's times are ordered.
func FuzzDecodeRaw(f *testing.F) {
	spec, err := BuiltinSpec("raw")
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte("GET / HTTP/1.1\r\n\r\nHTTP/1.1 200 OK\r\n\r\n"), []byte{0x10, 0x90, 0x05}, uint8(64))
	f.Add([]byte("ping pong ping pong"), []byte{0x04, 0x84}, uint8(2))
	f.Fuzz(func(t *testing.T, data, cuts []byte, head uint8) {
		if len(data) > 1<<16 {
			return
		}
		msgs := feed(t, spec, data, cuts, int(head))
		checkMessages(t, data, msgs)
		var total int64
		for _, m := range msgs {
			total += m.Size
			if m.IsReply && m.RTT > 0 && (m.ReqTS > m.TS || m.ReqEnd > m.TS || m.FirstEnd > m.End) {
				t.Fatalf("exchange out of order: %+v", m)
			}
		}
		if total != int64(len(data)) {
			t.Fatalf("messages hold %d bytes, the calls moved %d", total, len(data))
		}
	})
}
