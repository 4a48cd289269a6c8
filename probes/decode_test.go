package probes

import (
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/perflab/perflab/trace"
)

// eventBytes builds an event record as bpf/record.bpf.c writes it.
func eventBytes(op uint8, family uint16, ret int64, payload string) []byte {
	b := make([]byte, eventHeaderSize+len(payload))
	le := binary.LittleEndian
	b[0], b[1] = kindEvent, op
	le.PutUint16(b[2:], family)
	le.PutUint16(b[4:], uint16(len(payload)))
	le.PutUint16(b[6:], 1)
	le.PutUint32(b[8:], 100)
	le.PutUint32(b[12:], 101)
	le.PutUint64(b[16:], 5000)
	le.PutUint64(b[24:], 700)
	le.PutUint64(b[32:], 0xc00c1e)
	le.PutUint64(b[40:], uint64(ret))
	le.PutUint32(b[48:], 7)
	copy(b[eventHeaderSize:], payload)
	return b
}

// connBytes builds a connection record.
func connBytes(family, protocol, typ uint16, laddr, raddr []byte, lport, rport uint16, lpath, rpath string) []byte {
	b := make([]byte, connSize)
	le := binary.LittleEndian
	b[0] = kindConn
	le.PutUint16(b[2:], family)
	le.PutUint16(b[4:], protocol)
	le.PutUint16(b[6:], typ)
	le.PutUint32(b[8:], 100)
	le.PutUint16(b[12:], lport)
	le.PutUint16(b[14:], rport)
	le.PutUint64(b[16:], 0xc00c1e)
	le.PutUint64(b[24:], 4000)
	copy(b[32:48], laddr)
	copy(b[48:64], raddr)
	le.PutUint16(b[64:], uint16(len(lpath)))
	le.PutUint16(b[66:], uint16(len(rpath)))
	copy(b[72:], lpath)
	copy(b[72+unixPathMax:], rpath)
	return b
}

func TestToEvent(t *testing.T) {
	tests := []struct {
		name string
		rec  []byte
		want trace.Event
	}{
		{"write", eventBytes(8, afInet, 64, "SLPV"), trace.Event{TS: 5000, Dur: 700, PID: 100, TID: 101, Conn: 3,
			Dir: trace.DirSend, Op: trace.OpWrite, Source: trace.SourceEBPF, Bytes: 64, Payload: []byte("SLPV")}},
		{"eagain", eventBytes(7, afInet, -11, ""), trace.Event{TS: 5000, Dur: 700, PID: 100, TID: 101, Conn: 3,
			Dir: trace.DirRecv, Op: trace.OpRead, Source: trace.SourceEBPF, Errno: 11, Payload: []byte{}}},
		{"recvmmsg", eventBytes(6, afUnix, 300, "ab"), trace.Event{TS: 5000, Dur: 700, PID: 100, TID: 101, Conn: 3,
			Dir: trace.DirRecv, Op: trace.OpRecvmmsg, Source: trace.SourceEBPF, Bytes: 300, Payload: []byte("ab")}},
		{"bad op", eventBytes(99, afUnix, 1, ""), trace.Event{TS: 5000, Dur: 700, PID: 100, TID: 101, Conn: 3,
			Op: trace.OpUnknown, Source: trace.SourceEBPF, Bytes: 1, Payload: []byte{}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r rawEvent
			if err := decodeEvent(tc.rec, &r); err != nil {
				t.Fatal(err)
			}
			var e trace.Event
			toEvent(&r, 3, &e)
			if diff := cmp.Diff(tc.want, e); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestToConnection(t *testing.T) {
	v6 := []byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}
	mapped := []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1}
	tests := []struct {
		name string
		rec  []byte
		want trace.Connection
	}{
		{"tcp4", connBytes(afInet, ipprotoTCP, sockStream, []byte{127, 0, 0, 1}, []byte{10, 0, 0, 2}, 5556, 40000, "", ""),
			trace.Connection{Family: trace.FamilyTCP, Local: "127.0.0.1:5556", Remote: "10.0.0.2:40000"}},
		{"tcp6", connBytes(afInet6, ipprotoTCP, sockStream, v6, mapped, 443, 50000, "", ""),
			trace.Connection{Family: trace.FamilyTCP, Local: "[2001:db8::1]:443", Remote: "127.0.0.1:50000"}},
		{"udp", connBytes(afInet, ipprotoUDP, sockDgram, []byte{0, 0, 0, 0}, []byte{0, 0, 0, 0}, 53, 0, "", ""),
			trace.Connection{Family: trace.FamilyUDP, Local: "0.0.0.0:53", Remote: "0.0.0.0:0"}},
		{"unix", connBytes(afUnix, 0, sockStream, nil, nil, 0, 0, "/run/venus.sock\x00", ""),
			trace.Connection{Family: trace.FamilyUnix, Local: "/run/venus.sock", Remote: ""}},
		{"abstract", connBytes(afUnix, 0, sockSeqpack, nil, nil, 0, 0, "", "\x00venus"),
			trace.Connection{Family: trace.FamilyUnix, Local: "", Remote: "@venus"}},
		{"netlink", connBytes(16, 0, 3, nil, nil, 0, 0, "", ""), trace.Connection{Family: trace.FamilyNetlink}},
		{"other", connBytes(40, 0, 1, nil, nil, 0, 0, "", ""), trace.Connection{Family: trace.FamilyUnknown}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r rawConn
			if err := decodeConn(tc.rec, &r); err != nil {
				t.Fatal(err)
			}
			var c trace.Connection
			toConnection(&r, 9, &c)
			tc.want.ID, tc.want.PID, tc.want.FirstSeen, tc.want.LastSeen = 9, 100, 4000, 4000
			if diff := cmp.Diff(tc.want, c); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// uEventBytes builds a uprobe record as bpf/uprobe.bpf.c writes it.
func uEventBytes(op uint8, cookie uint64, n int64, payload string) []byte {
	b := make([]byte, uEventSize+len(payload))
	le := binary.LittleEndian
	b[0], b[1] = kindUEvent, op
	le.PutUint16(b[2:], uint16(len(payload)))
	le.PutUint32(b[4:], 100)
	le.PutUint32(b[8:], 101)
	le.PutUint32(b[12:], 0)
	le.PutUint64(b[16:], 5000)
	le.PutUint64(b[24:], 900)
	le.PutUint64(b[32:], cookie)
	le.PutUint64(b[40:], 0x5550)
	le.PutUint64(b[48:], uint64(n))
	copy(b[uEventSize:], payload)
	return b
}

func TestToUEvent(t *testing.T) {
	for _, c := range []struct {
		op  uint8
		top trace.Op
		dir trace.Dir
	}{{uopTLSWrite, trace.OpTLSWrite, trace.DirSend}, {uopTLSRead, trace.OpTLSRead, trace.DirRecv},
		{uopSend, trace.OpUprobeSend, trace.DirSend}, {uopRecv, trace.OpUprobeRecv, trace.DirRecv}} {
		var r rawUEvent
		if err := decodeUEvent(uEventBytes(c.op, 0xc00c1e, 18, "GET / HTTP/1.1\r\n"), &r); err != nil {
			t.Fatal(err)
		}
		var e trace.Event
		toUEvent(&r, 3, &e)
		want := trace.Event{TS: 5000, Dur: 900, PID: 100, TID: 101, Conn: 3, Dir: c.dir, Op: c.top,
			Source: trace.SourceEBPF, Bytes: 18, Payload: []byte("GET / HTTP/1.1\r\n")}
		if diff := cmp.Diff(want, e); diff != "" {
			t.Errorf("op %d (-want +got):\n%s", c.op, diff)
		}
		if r.Cookie != 0xc00c1e || r.Key != 0x5550 {
			t.Errorf("cookie %#x key %#x", r.Cookie, r.Key)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	long := eventBytes(8, afInet, 1, "x")
	binary.LittleEndian.PutUint16(long[4:], 300)
	past := eventBytes(8, afInet, 1, "xy")
	binary.LittleEndian.PutUint16(past[4:], 3)
	badPath := connBytes(afUnix, 0, 1, nil, nil, 0, 0, "", "")
	binary.LittleEndian.PutUint16(badPath[64:], 109)
	var e rawEvent
	var c rawConn
	var u rawUEvent
	longU := uEventBytes(uopSend, 0, 1, "x")
	binary.LittleEndian.PutUint16(longU[2:], 2)
	for name, err := range map[string]error{
		"short uevent":           decodeUEvent(longU[:uEventSize-1], &u),
		"uevent payload past":    decodeUEvent(longU, &u),
		"uevent payload over n":  decodeUEvent(uEventBytes(uopSend, 0, 1, "xy"), &u),
		"uevent negative length": decodeUEvent(uEventBytes(uopRecv, 0, -1, ""), &u),
		"uevent bad op":          decodeUEvent(uEventBytes(9, 0, 1, ""), &u),
		"uevent wrong kind":      decodeUEvent(append(eventBytes(8, 2, 1, ""), make([]byte, 8)...), &u),
		"short event":            decodeEvent(long[:eventHeaderSize-1], &e),
		"payload over 256":       decodeEvent(long, &e),
		"payload past end":       decodeEvent(past, &e),
		"event wrong kind":       decodeEvent(connBytes(afUnix, 0, 1, nil, nil, 0, 0, "", ""), &e),
		"short connection":       decodeConn(badPath[:connSize-1], &c),
		"unix path too big":      decodeConn(badPath, &c),
		"conn wrong kind":        decodeConn(append(eventBytes(8, 2, 1, ""), make([]byte, connSize)...), &c),
	} {
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzDecodeRecord feeds arbitrary ring-buffer records to the decoders: they must never panic,
// and what they accept must stay within the record and the trace's limits.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(eventBytes(8, afInet, 64, "SLPV\x10\x00\x00\x00"))
	f.Add(eventBytes(6, afUnix, -11, ""))
	f.Add(connBytes(afInet, ipprotoTCP, sockStream, []byte{127, 0, 0, 1}, []byte{127, 0, 0, 1}, 5556, 40000, "", ""))
	f.Add(connBytes(afUnix, 0, sockStream, nil, nil, 0, 0, "/tmp/x.sock", "\x00abstract"))
	f.Add([]byte{})
	f.Add([]byte{kindEvent})
	w := eventBytes(uint8(trace.OpEpollWait), 0, 3, "")
	w[0] = kindWait
	f.Add(w)
	f.Add(uEventBytes(uopTLSWrite, 0xc00c1e, 18, "GET / HTTP/1.1\r\n"))
	f.Add(uEventBytes(uopRecv, 0, 64, "SLPV"))
	f.Add(schedBytes(1, 3, 100, 101, 2000, 2500))
	f.Add(tcpBytes(tcpWhatState, trace.TCPSynSent, trace.TCPEstablished, 77))
	f.Fuzz(func(t *testing.T, b []byte) {
		kind, err := decodeKind(b)
		if err != nil {
			return
		}
		switch kind {
		case kindEvent:
			var r rawEvent
			if decodeEvent(b, &r) == nil {
				if len(r.Payload) > trace.MaxPayload {
					t.Fatalf("payload %d bytes", len(r.Payload))
				}
				var e trace.Event
				toEvent(&r, 1, &e)
				if e.Errno != 0 && e.Bytes != 0 {
					t.Fatalf("failed call with bytes: %+v", e)
				}
			}
		case kindWait:
			var r rawEvent
			if decodeWait(b, &r) == nil {
				var e trace.Event
				toEvent(&r, 0, &e)
				if !e.Op.IsWait() || e.Dir != trace.DirNone || len(e.Payload) != 0 {
					t.Fatalf("wait record decoded as %+v", e)
				}
			}
		case kindConn:
			var r rawConn
			if decodeConn(b, &r) == nil {
				var c trace.Connection
				toConnection(&r, 1, &c)
			}
		case kindSched:
			var r rawSched
			if decodeSched(b, &r) == nil {
				var e trace.Event
				schedEvent(&r, nil, &e)
				if _, err := trace.DecodeSchedInfo(e.Payload); err != nil || e.Op != trace.OpRunnable || e.Dur < 0 || e.Dir != trace.DirNone {
					t.Fatalf("sched record decoded as %+v (%v)", e, err)
				}
			}
		case kindTCP:
			var r rawTCP
			if decodeTCP(b, &r) == nil {
				var e trace.Event
				tcpEvent(&r, 1, r.PID, nil, &e)
				if ti, err := trace.DecodeTCPInfo(e.Payload); err != nil || ti != r.Info || !e.Op.IsEvidence() {
					t.Fatalf("tcp record decoded as %+v (%v)", e, err)
				}
			}
		case kindUEvent:
			var r rawUEvent
			if decodeUEvent(b, &r) == nil {
				var e trace.Event
				toUEvent(&r, 1, &e)
				if len(e.Payload) > trace.MaxPayload || int64(len(e.Payload)) > e.Bytes || !e.Op.UserSpace() {
					t.Fatalf("accepted %+v", e)
				}
			}
		}
	})
}

// schedBytes is a struct sched_rec of bpf/evidence.bpf.c.
func schedBytes(flags uint8, cpu uint16, pid, tid uint32, wake, run uint64) []byte {
	b := make([]byte, schedRecSize)
	le := binary.LittleEndian
	b[0], b[1] = kindSched, flags
	le.PutUint16(b[2:], cpu)
	le.PutUint32(b[4:], pid)
	le.PutUint32(b[8:], tid)
	le.PutUint64(b[16:], wake)
	le.PutUint64(b[24:], run)
	return b
}

// tcpBytes is a struct tcp_rec of bpf/evidence.bpf.c.
func tcpBytes(what, old, state uint8, cookie uint64) []byte {
	b := make([]byte, tcpRecSize)
	le := binary.LittleEndian
	b[0], b[1], b[2], b[3] = kindTCP, what, old, state
	le.PutUint64(b[8:], 1000)
	le.PutUint64(b[16:], cookie)
	le.PutUint32(b[24:], 40) // srtt
	le.PutUint32(b[28:], 10) // cwnd
	return b
}

// TestDecodeEvidence: the evidence records decode into the events analyze reads.
func TestDecodeEvidence(t *testing.T) {
	var rs rawSched
	if err := decodeSched(schedBytes(1, 3, 100, 101, 2000, 2500), &rs); err != nil {
		t.Fatal(err)
	}
	var e trace.Event
	schedEvent(&rs, nil, &e)
	si, err := trace.DecodeSchedInfo(e.Payload)
	if err != nil || e.TS != 2000 || e.Dur != 500 || e.PID != 100 || e.TID != 101 || si.CPU != 3 || si.Flags != trace.SchedIdle {
		t.Errorf("sched event %+v, info %+v (%v)", e, si, err)
	}
	if decodeSched(schedBytes(0, 0, 1, 1, 2500, 2000), &rs) == nil {
		t.Error("a record that ran before it was runnable decoded")
	}
	var rt rawTCP
	if err := decodeTCP(tcpBytes(tcpWhatState, trace.TCPSynSent, trace.TCPEstablished, 77), &rt); err != nil {
		t.Fatal(err)
	}
	tcpEvent(&rt, 5, 9, nil, &e)
	ti, err := trace.DecodeTCPInfo(e.Payload)
	if err != nil || e.Op != trace.OpTCPState || e.Conn != 5 || ti.State != trace.TCPEstablished || ti.SRTTus != 40 || ti.Cwnd != 10 {
		t.Errorf("tcp event %+v, info %+v (%v)", e, ti, err)
	}
	if decodeTCP(tcpBytes(9, 0, 0, 1), &rt) == nil {
		t.Error("a tcp record of an unknown kind of report decoded")
	}
}

// TestFamilyOf: the kernel's address families as the trace names them; a netlink socket
// (getaddrinfo's address query) is named, so that analyze gives it no round trips.
func TestFamilyOf(t *testing.T) {
	for _, c := range []struct {
		family, protocol, typ uint16
		want                  trace.Family
	}{
		{afInet, ipprotoTCP, sockStream, trace.FamilyTCP},
		{afInet6, 0, sockDgram, trace.FamilyUDP},
		{afUnix, 0, sockStream, trace.FamilyUnix},
		{afNetlink, 0, 3, trace.FamilyNetlink},
		{40, 0, sockStream, trace.FamilyUnknown}, // AF_VSOCK
	} {
		if got := familyOf(c.family, c.protocol, c.typ); got != c.want {
			t.Errorf("familyOf(%d, %d, %d) = %v, want %v", c.family, c.protocol, c.typ, got, c.want)
		}
	}
}
