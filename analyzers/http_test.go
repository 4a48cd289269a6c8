package analyzers

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perflab/perflab/fixtures"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// tapRecorder turns the system calls of real sockets into trace events, as eBPF sees them:
// one event per read or write that moved data, with the first head bytes of the data.
type tapRecorder struct {
	mu     sync.Mutex
	start  time.Time
	head   int
	events []trace.Event
	keys   []int64 // causal order: a write by its start, a read by its end
	conns  int
}

// tapConn is a client connection whose reads and writes the recorder keeps.
type tapConn struct {
	net.Conn
	r  *tapRecorder
	id uint64
}

func (c *tapConn) Read(b []byte) (int, error) {
	t0 := time.Since(c.r.start)
	n, err := c.Conn.Read(b)
	c.r.add(c.id, trace.DirRecv, trace.OpRead, t0, b[:max(n, 0)])
	return n, err
}

func (c *tapConn) Write(b []byte) (int, error) {
	t0 := time.Since(c.r.start)
	n, err := c.Conn.Write(b)
	c.r.add(c.id, trace.DirSend, trace.OpWrite, t0, b[:max(n, 0)])
	return n, err
}

func (r *tapRecorder) add(conn uint64, dir trace.Dir, op trace.Op, t0 time.Duration, data []byte) {
	if len(data) == 0 {
		return
	}
	end := time.Since(r.start)
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := trace.Event{TS: int64(t0) + 1, Dur: int64(end - t0), PID: 100, TID: 100, Conn: conn, Dir: dir, Op: op,
		Source: trace.SourceEBPF, Bytes: int64(len(data)), Payload: append([]byte(nil), data[:min(len(data), r.head)]...)}
	r.events = append(r.events, ev)
	key := ev.TS
	if dir == trace.DirRecv {
		key = ev.TS + ev.Dur
	}
	r.keys = append(r.keys, key)
}

func (r *tapRecorder) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.conns++
	id := uint64(r.conns)
	r.mu.Unlock()
	return &tapConn{Conn: c, r: r, id: id}, nil
}

// write writes the recorded events into a trace file.
func (r *tapRecorder) write(t *testing.T) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return writeTrace(t, "http.plt", fixtures.Meta("ebpf", "http"), func(w *trace.Writer) error {
		for i := 1; i <= r.conns; i++ {
			if err := w.WriteConnection(&trace.Connection{ID: uint64(i), Family: trace.FamilyTCP, PID: 100, Local: "127.0.0.1:1", Remote: "127.0.0.1:2"}); err != nil {
				return err
			}
		}
		// Reads and writes ran in different goroutines: put each write before the reads that
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
}

// A real net/http server and client on loopback: keep-alive, content-length and chunked
// bodies (the chunked ones spread over many reads), request bodies, HEAD, 404s. Every request
// is decoded, named by its path template and paired with its response; the status counts are
// the server's.
func TestHTTPNetHTTP(t *testing.T) {
	big := strings.Repeat("x", 100_000)
	mux := http.NewServeMux()
	mux.HandleFunc("/users/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "user %s", r.URL.Path)
	})
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < 20; i++ { // chunked: no Content-Length, flushed piece by piece
			io.WriteString(w, big[:5000])
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/upload", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "%d", n)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(big)))
		io.WriteString(w, big)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	rec := &tapRecorder{start: time.Now(), head: trace.MaxPayload}
	tr := &http.Transport{DialContext: rec.dial, MaxIdleConnsPerHost: 2}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr}
	want := map[string]int{}
	status := map[int]int{}
	do := func(method, path string, body string) {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, srv.URL+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want[method+" "+protocol.PathTemplate(path)]++
		status[resp.StatusCode]++
	}
	for i := 0; i < 30; i++ {
		do("GET", fmt.Sprintf("/users/%d", 1000+i*37), "")
	}
	for i := 0; i < 5; i++ {
		do("GET", "/stream", "")
		do("GET", "/big", "")
		do("POST", "/upload", big[:10000+i])
		do("HEAD", "/big", "")
		do("GET", "/missing/7f3a9c21-0b4e-4d7e-9f6a-2c1d3e4f5a6b", "")
	}
	tr.CloseIdleConnections()
	path := rec.write(t)

	s, err := Analyze(protocol.Files([]string{path}, nil), Options{Protocol: "http"})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, n := range want {
		total += n
	}
	if s.RoundTrips.Count != uint64(total) || s.RoundTrips.Unanswered != 0 {
		t.Errorf("round trips %d (unanswered %d), want %d", s.RoundTrips.Count, s.RoundTrips.Unanswered, total)
	}
	if s.Totals.Send.Frames != uint64(total) || s.Totals.Recv.Frames != uint64(total) {
		t.Errorf("frames sent %d received %d, want %d each", s.Totals.Send.Frames, s.Totals.Recv.Frames, total)
	}
	got := map[string]int{}
	for _, c := range s.Commands {
		if c.Kind == "reply" && c.Direction == "recv" {
			got[c.Name] += int(c.Count)
			if c.RTTUS == nil || c.RTTUS.P50 <= 0 {
				t.Errorf("%s: no round-trip times", c.Name)
			}
		}
	}
	for n, w := range want {
		if got[n] != w {
			t.Errorf("%s: %d replies, want %d (all: %v)", n, got[n], w, got)
		}
	}
	if got["GET /users/{id}"] != 30 || got["GET /missing/{id}"] != 5 {
		t.Errorf("path templates do not group: %v", got)
	}
	gotStatus := map[int]int{}
	for _, st := range s.Statuses {
		gotStatus[st.Code] += int(st.Count)
	}
	for code, n := range status {
		if gotStatus[code] != n {
			t.Errorf("status %d: %d, want %d (all %v)", code, gotStatus[code], n, gotStatus)
		}
	}
	for _, w := range s.Warnings {
		if strings.Contains(w, "decoded") || strings.Contains(w, "blind") {
			t.Errorf("warning on a clean HTTP trace: %s", w)
		}
	}
}

// Pipelining: a client writes several requests in one write; net/http's server answers them
// in order. With the whole stream in the captured heads every response is found; with short
// heads the decoder delimits by calls, counts what it cannot see as a lower bound, and says so.
func TestHTTPPipelined(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok "+r.URL.Path)
	}))
	defer srv.Close()
	rec := &tapRecorder{start: time.Now(), head: trace.MaxPayload}
	addr := strings.TrimPrefix(srv.URL, "http://")
	c, err := rec.dial(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const rounds, depth = 20, 2
	br := bufio.NewReader(c)
	for i := 0; i < rounds; i++ {
		var b strings.Builder
		for k := 0; k < depth; k++ {
			fmt.Fprintf(&b, "GET /item/%d HTTP/1.1\r\nHost: x\r\n\r\n", i*depth+k)
		}
		if _, err := io.WriteString(c, b.String()); err != nil {
			t.Fatal(err)
		}
		for k := 0; k < depth; k++ {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	path := rec.write(t)
	s, err := Analyze(protocol.Files([]string{path}, nil), Options{Protocol: "http"})
	if err != nil {
		t.Fatal(err)
	}
	if s.RoundTrips.Count != rounds*depth || s.Totals.Send.Frames != rounds*depth {
		t.Errorf("pipelined: %d round trips, %d requests, want %d", s.RoundTrips.Count, s.Totals.Send.Frames, rounds*depth)
	}
}
