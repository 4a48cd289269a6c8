package protocol

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/perflab/perflab/fixtures"
	"github.com/perflab/perflab/trace"
)

// decoderEndSink keeps what the decoder of the last trace tells at its end.
type decoderEndSink struct {
	msgSink
	end func(d *Decoder)
}

func (s *decoderEndSink) End(_ int, _ trace.Recovery, d *Decoder) { s.end(d) }

// TestResumedConnection: with auto detection, a connection retired while idle (more than
// maxLiveConns others carried data since) that carries data again counts as one connection,
// as the protocol it was first decoded as; when its bytes then show another protocol, it is
// decoded as that one and Returned says so. Conns gives the same order every time.
func TestResumedConnection(t *testing.T) {
	venusReq := fixtures.Frame(16, fixtures.CmdWaitForFences, fixtures.FlagReplyWanted, 16)
	venusRep := fixtures.Frame(16, fixtures.CmdWaitForFences, 0, 16)
	respReq, respRep := []byte("*1\r\n$4\r\nPING\r\n"), []byte("+PONG\r\n")
	junk := []byte{0x01, 0xfe, 0x00, 0x7f, 0x13, 0x37, 0x00, 0x00, 0x42} // a second protocol's connections
	cases := []struct {
		name            string
		back            [2][]byte // connection 1's request and reply when it comes back
		other           uint64    // connections decoded as another protocol when back
		backAs, firstAs string
	}{
		{"same protocol", [2][]byte{venusReq, venusRep}, 0, "venus", "venus"},
		{"another protocol", [2][]byte{respReq, respRep}, 1, "resp", "venus"},
	}
	n := maxLiveConns + 600
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "resume.plt")
			w, err := trace.Create(path, fixtures.Meta("ebpf", ""), fixtures.Options())
			if err != nil {
				t.Fatal(err)
			}
			ts := fixtures.Base
			exchange := func(id uint64, req, rep []byte) {
				pid := uint32(1000 + id%50)
				for k, p := range [][]byte{req, rep} {
					size := int64(len(p))
					if slices.Equal(p[:4], venusReq[:4]) {
						size = fixtures.FrameHeaderSize + 16 // the head of a whole frame
					}
					dir := trace.DirSend
					if k == 1 {
						dir = trace.DirRecv
					}
					ev := trace.Event{TS: ts, Dur: 2000, PID: pid, TID: pid, Conn: id, Dir: dir, Op: trace.OpSendto,
						Source: trace.SourceEBPF, Bytes: size, Payload: p}
					if err := w.WriteEvent(&ev); err != nil {
						t.Fatal(err)
					}
					ts += 3000
				}
			}
			for i := range n {
				id := uint64(i + 1)
				conn := &trace.Connection{ID: id, Family: trace.FamilyTCP, Local: "127.0.0.1:" + strconv.Itoa(10000+i%50000),
					Remote: "127.0.0.1:5556", PID: uint32(1000 + id%50), FirstSeen: ts}
				if err := w.WriteConnection(conn); err != nil {
					t.Fatal(err)
				}
				if id%10 == 0 {
					exchange(id, junk, junk[:5])
				} else {
					exchange(id, venusReq, venusRep)
				}
			}
			exchange(1, c.back[0], c.back[1]) // connection 1, idle since the start, comes back
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			var orders [][]string
			counts := map[string]int{}
			var resumed, other uint64
			var notes []string
			sink := &decoderEndSink{msgSink: msgSink{fn: func(*Message) error { return nil }}, end: func(d *Decoder) {
				for range 10 {
					var order []string
					d.Conns(func(ci *ConnInfo) {
						order = append(order, fmt.Sprintf("%s %d %d %d", ci.Spec.Name, ci.ID, ci.Count, ci.Data))
					})
					orders = append(orders, order)
				}
				d.Conns(func(ci *ConnInfo) { counts[ci.Spec.Name] += ci.Count })
				resumed, other, notes = d.Returned()
			}}
			if err := Scan(Files([]string{path}, nil), nil, sink); err != nil {
				t.Fatal(err)
			}
			total := 0
			for _, k := range counts {
				total += k
			}
			if want := n - n/10; counts["venus"] != want || total != n {
				t.Errorf("connections by protocol %v, %d in all; want venus %d, %d in all", counts, total, want, n)
			}
			if resumed != 1 || other != c.other || len(notes) != int(c.other) {
				t.Errorf("resumed %d, decoded as another protocol %d, notes %q; want 1, %d", resumed, other, notes, c.other)
			}
			for k := 1; k < len(orders); k++ {
				if !slices.Equal(orders[k], orders[0]) {
					t.Fatalf("Conns gave %q, then %q", orders[0], orders[k])
				}
			}
			if c.backAs != c.firstAs {
				want := fmt.Sprintf("%s %d %d %d", c.backAs, 1, 0, len(respReq)+len(respRep))
				if !slices.Contains(orders[0], want) {
					t.Errorf("no %q in %q", want, orders[0])
				}
			}
		})
	}
}
