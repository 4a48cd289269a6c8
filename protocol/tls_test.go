package protocol

import (
	"testing"

	"github.com/perflab/perflab/trace"
)

func TestCipherFilter(t *testing.T) {
	tlsMeta := trace.Meta{Probes: []string{"sock:sock_send_length", trace.ProbeTLS}}
	ev := func(conn uint64, op trace.Op, payload string) *trace.Event {
		return &trace.Event{Conn: conn, PID: 7, Op: op, Dir: trace.DirRecv, Source: trace.SourceEBPF, Bytes: int64(len(payload)), Payload: []byte(payload)}
	}
	for _, c := range []struct {
		name string
		meta trace.Meta
		evs  []*trace.Event
		want []bool
	}{
		{"client hello", tlsMeta, []*trace.Event{ev(1, trace.OpSendto, "\x16\x03\x01\x02\x00"), ev(1, trace.OpRecvfrom, "\x17\x03\x03\x00\x20")}, []bool{true, true}},
		{"nginx peeks one byte first", tlsMeta, []*trace.Event{ev(1, trace.OpRecvfrom, "\x16"), ev(1, trace.OpRecvfrom, "\x16\x03\x01\x02\x00"), ev(1, trace.OpWrite, "\x17\x03\x03")}, []bool{true, true, true}},
		{"plain http", tlsMeta, []*trace.Event{ev(2, trace.OpWrite, "GET / HTTP/1.1\r\n"), ev(2, trace.OpRead, "\x16\x03\x01")}, []bool{false, false}},
		{"plaintext itself", tlsMeta, []*trace.Event{ev(1, trace.OpSendto, "\x16\x03\x01\x02\x00"), ev(1, trace.OpTLSWrite, "\x16\x03\x01")}, []bool{true, false}},
		{"recorded without --tls", trace.Meta{}, []*trace.Event{ev(1, trace.OpSendto, "\x16\x03\x01\x02\x00")}, []bool{false}},
		{"a byte that is no record", tlsMeta, []*trace.Event{ev(3, trace.OpRead, "\x16\x01"), ev(3, trace.OpRead, "\x16\x03\x01")}, []bool{false, false}},
	} {
		f := NewCipherFilter(c.meta)
		for i, e := range c.evs {
			if got := f.Cipher(e); got != c.want[i] {
				t.Errorf("%s: event %d (%s %q): cipher %v, want %v", c.name, i, e.Op, e.Payload, got, c.want[i])
			}
		}
	}
}
