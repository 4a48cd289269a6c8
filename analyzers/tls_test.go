package analyzers

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"testing"
	"time"

	"github.com/perflab/perflab/fixtures"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// plainConn records a TLS connection's plaintext as perflab record --tls does: tls_write and
// tls_read events on the connection id of the socket under it.
type plainConn struct {
	*tls.Conn
	r  *tapRecorder
	id uint64
}

func (c *plainConn) Read(b []byte) (int, error) {
	t0 := time.Since(c.r.start)
	n, err := c.Conn.Read(b)
	c.r.add(c.id, trace.DirRecv, trace.OpTLSRead, t0, b[:max(n, 0)])
	return n, err
}

func (c *plainConn) Write(b []byte) (int, error) {
	t0 := time.Since(c.r.start)
	n, err := c.Conn.Write(b)
	c.r.add(c.id, trace.DirSend, trace.OpTLSWrite, t0, b[:max(n, 0)])
	return n, err
}

// A real net/http client and server over real TLS: the socket's system calls carry the
// handshake and the encrypted records, the plaintext calls carry HTTP/1.1. analyze decodes the
// plaintext (every request named by its endpoint, paired with its response), counts the
// ciphertext in the totals and not as messages, and says which is which.
func TestTLSPlaintext(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/missing/1" {
			http.NotFound(w, req)
			return
		}
		fmt.Fprintf(w, "hello %s\n", req.URL.Path)
	}))
	defer srv.Close()
	r := &tapRecorder{start: time.Now(), head: 256}
	cfg := srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	tr := &http.Transport{}
	tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		raw, err := r.dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		c := cfg.Clone()
		c.ServerName, _, _ = net.SplitHostPort(addr)
		tc := tls.Client(raw, c)
		if err := tc.Handshake(); err != nil {
			return nil, err
		}
		return &plainConn{Conn: tc, r: r, id: raw.(*tapConn).id}, nil
	}
	client := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	paths := []string{"/users/1", "/users/22", "/users/333", "/missing/1", "/"}
	for _, p := range paths {
		resp, err := client.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	var plain, cipher TLSLayer
	for _, e := range r.events {
		tot := &cipher
		if e.Op.Plaintext() {
			tot = &plain
		}
		d := &tot.Send
		if e.Dir == trace.DirRecv {
			d = &tot.Recv
		}
		d.Calls++
		d.Bytes += uint64(e.Bytes)
	}
	meta := fixtures.Meta("ebpf", "")
	meta.Probes = []string{"sock:sock_send_length", trace.ProbeTLS}
	r.mu.Lock()
	path := writeTrace(t, "tls.plt", meta, func(w *trace.Writer) error {
		if err := w.WriteConnection(&trace.Connection{ID: 1, Family: trace.FamilyTCP, PID: 100, Local: "127.0.0.1:1", Remote: "127.0.0.1:2"}); err != nil {
			return err
		}
		// Reads and writes ran in different goroutines: each write goes before the reads that
		// may have returned its answer.
		idx := make([]int, len(r.events))
		for k := range idx {
			idx[k] = k
		}
		sort.SliceStable(idx, func(i, j int) bool { return r.keys[idx[i]] < r.keys[idx[j]] })
		for _, k := range idx {
			if err := w.WriteEvent(&r.events[k]); err != nil {
				return err
			}
		}
		return nil
	})
	r.mu.Unlock()
	if r.conns != 1 {
		t.Fatalf("%d connections, want 1 (keep-alive)", r.conns)
	}
	s, err := Analyze(protocol.Files([]string{path}, nil), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Protocol != "http" {
		t.Errorf("protocol %q, want http", s.Protocol)
	}
	got := map[string]uint64{}
	for _, c := range s.Commands {
		if c.Kind == "reply" {
			got[c.Name] += c.Count
		}
	}
	if got["GET /users/{id}"] != 3 || got["GET /missing/{id}"] != 1 || got["GET /"] != 1 || s.RoundTrips.Count != 5 {
		t.Errorf("replies %v, %d round trips; want 3 GET /users/{id}, 1 GET /missing/{id}, 1 GET /", got, s.RoundTrips.Count)
	}
	if s.TLS == nil || s.TLS.Connections != 1 {
		t.Fatalf("tls %+v, want one connection", s.TLS)
	}
	if s.TLS.Plaintext.Send.Calls != plain.Send.Calls || s.TLS.Plaintext.Recv.Bytes != plain.Recv.Bytes ||
		s.TLS.Ciphertext.Send.Calls != cipher.Send.Calls || s.TLS.Ciphertext.Recv.Bytes != cipher.Recv.Bytes {
		t.Errorf("tls %+v; recorded plaintext %+v, ciphertext %+v", s.TLS, plain, cipher)
	}
	// The totals are the system calls: the ciphertext, never the plaintext a second time.
	if s.Totals.Send.Calls != cipher.Send.Calls || s.Totals.Recv.Bytes != cipher.Recv.Bytes {
		t.Errorf("totals %+v, want the ciphertext's %+v", s.Totals, cipher)
	}
	if s.Totals.Send.Frames != 5 || s.Totals.Recv.Frames != 5 {
		t.Errorf("frames %d sent, %d received; want 5 and 5", s.Totals.Send.Frames, s.Totals.Recv.Frames)
	}
}
