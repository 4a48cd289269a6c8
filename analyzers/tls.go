package analyzers

import (
	"github.com/perflab/perflab/trace"
)

// TLSStats tells the two layers of TLS connections apart in a trace that holds TLS plaintext
// (perflab record --tls). The plaintext calls (tls_write, tls_read) are the application's
// messages: they are decoded, and not counted in Totals or Connections. The system calls of
// the same connections carry the ciphertext (the same messages encrypted, plus the
// handshake): they stay in Totals and Connections, and are not decoded, so no message counts
// twice.
type TLSStats struct {
	Connections int      `json:"connections"` // connections with TLS plaintext
	Plaintext   TLSLayer `json:"plaintext"`   // SSL_write/SSL_read calls and their bytes
	Ciphertext  TLSLayer `json:"ciphertext"`  // system calls of connections whose data is TLS records
}

// TLSLayer counts the calls and bytes of one layer of TLS connections, per direction.
type TLSLayer struct {
	Send CallBytes `json:"send"`
	Recv CallBytes `json:"recv"`
}

// CallBytes counts calls and the bytes they moved.
type CallBytes struct {
	Calls uint64 `json:"calls"`
	Bytes uint64 `json:"bytes"`
}

// tlsEvent counts a TLS plaintext call.
func (a *analyzer) tlsEvent(ev *trace.Event) {
	s := a.tlsStats()
	t := &s.Plaintext.Send
	if ev.Dir == trace.DirRecv {
		t = &s.Plaintext.Recv
	}
	t.Calls++
	t.Bytes += uint64(ev.Bytes)
	if a.tlsConns == nil {
		a.tlsConns = map[[3]uint64]bool{}
	}
	if k := [3]uint64{uint64(a.cur), ev.Conn, uint64(ev.PID)}; !a.tlsConns[k] {
		a.tlsConns[k] = true
		s.Connections++
	}
}

// cipherEvent counts a system call that moved TLS ciphertext.
func (a *analyzer) cipherEvent(ev *trace.Event) {
	s := a.tlsStats()
	t := &s.Ciphertext.Send
	if ev.Dir == trace.DirRecv {
		t = &s.Ciphertext.Recv
	}
	t.Calls++
	t.Bytes += uint64(ev.Bytes)
}

func (a *analyzer) tlsStats() *TLSStats {
	if a.s.TLS == nil {
		a.s.TLS = &TLSStats{}
	}
	return a.s.TLS
}
