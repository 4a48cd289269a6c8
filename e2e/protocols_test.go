package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// memcachedClientEnv makes the e2e test binary a memcached client (runMemcachedClient) instead
// of running tests: the address to talk to.
const memcachedClientEnv = "PERFLAB_E2E_MEMCACHED_CLIENT"

// need returns the path of a program from Debian, or skips the test (fails under
// PERFLAB_E2E=1, where `make e2e` has installed it) when it is missing. It also needs root,
// for eBPF recording.
func need(t *testing.T, prog, pkg string) string {
	t.Helper()
	path, err := exec.LookPath(prog)
	switch {
	case err != nil && os.Getenv("PERFLAB_E2E") == "1":
		t.Fatalf("PERFLAB_E2E=1 but %s is not installed (apt-get install %s, or run make e2e)", prog, pkg)
	case err != nil:
		t.Skipf("%s not installed (apt-get install %s, or run make e2e)", prog, pkg)
	case os.Geteuid() != 0 && os.Getenv("PERFLAB_E2E") == "1":
		t.Fatalf("PERFLAB_E2E=1 but not root: eBPF recording needs it")
	case os.Geteuid() != 0:
		t.Skip("eBPF recording needs root")
	}
	return path
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startDaemon starts a server that stays in the foreground, waits until addr accepts
// connections, and stops it (SIGTERM, then SIGKILL) when the test ends. It returns its pid.
func startDaemon(t *testing.T, addr string, name string, args ...string) int {
	t.Helper()
	cmd := exec.Command(name, args...)
	var errb strings.Builder
	cmd.Stdout, cmd.Stderr = io.Discard, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return cmd.Process.Pid
		}
		select {
		case <-done:
			t.Fatalf("%s exited: %s", name, errb.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("%s did not listen on %s within 15 s: %s", name, addr, errb.String())
	return 0
}

// analyzeJSON is the part of `perflab analyze --format json` these tests read.
type analyzeJSON struct {
	Protocol string `json:"protocol"`
	Decoding *struct {
		Mode      string  `json:"mode"`
		Share     float64 `json:"share"`
		Protocols []struct {
			Name        string `json:"name"`
			Connections int    `json:"connections"`
		} `json:"protocols"`
	} `json:"decoding"`
	CallsPastHead  uint64 `json:"calls_past_head"`
	CallsBlind     uint64 `json:"calls_blind"`
	PushesPastHead uint64 `json:"pushes_past_head"`

	Totals struct {
		Send struct{ Frames uint64 } `json:"send"`
		Recv struct{ Frames uint64 } `json:"recv"`
	} `json:"totals"`
	Commands []struct {
		Name      string `json:"name"`
		Direction string `json:"direction"`
		Kind      string `json:"kind"`
		Count     uint64 `json:"count"`
		Bytes     uint64 `json:"bytes"`
		RTT       *struct {
			P50 float64 `json:"p50"`
		} `json:"rtt_us"`
	} `json:"commands"`
	Statuses []struct {
		Code  int    `json:"code"`
		Count uint64 `json:"count"`
	} `json:"statuses"`
	RoundTrips struct {
		Count      uint64 `json:"count"`
		Unanswered uint64 `json:"unanswered"`
		Unpaired   uint64 `json:"unpaired"`
	} `json:"round_trips"`
	Evidence *struct {
		Findings []struct {
			Kind     string `json:"kind"`
			Title    string `json:"title"`
			Evidence string `json:"evidence"`
		} `json:"findings"`
	} `json:"evidence"`
	Warnings []string `json:"warnings"`
}

// finding returns the title of the finding of kind, "" when there is none.
func (s analyzeJSON) finding(kind string) string {
	if s.Evidence == nil {
		return ""
	}
	for _, f := range s.Evidence.Findings {
		if f.Kind == kind {
			return f.Title
		}
	}
	return ""
}

func analyzeTrace(t *testing.T, dir, trace string, args ...string) analyzeJSON {
	t.Helper()
	r := mustPerflab(t, dir, append(append([]string{"analyze", "--format", "json"}, args...), trace)...)
	var s analyzeJSON
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("analyze json: %v\n%s", err, r.stdout)
	}
	return s
}

// replies returns the replies a client received per command name, and their RTT medians.
func (s analyzeJSON) replies() map[string]uint64 {
	m := map[string]uint64{}
	for _, c := range s.Commands {
		if c.Kind == "reply" && c.Direction == "recv" {
			m[c.Name] += c.Count
		}
	}
	return m
}

func (s analyzeJSON) requests() map[string]uint64 {
	m := map[string]uint64{}
	for _, c := range s.Commands {
		if c.Kind == "request" && c.Direction == "send" {
			m[c.Name] += c.Count
		}
	}
	return m
}

func (s analyzeJSON) status() map[int]uint64 {
	m := map[int]uint64{}
	for _, x := range s.Statuses {
		m[x.Code] += x.Count
	}
	return m
}

// nginx from Debian, driven by curl (keep-alive over several URLs) and by h2load (a load
// generator, HTTP/1.1, four connections), recorded with eBPF: perflab finds HTTP by itself,
// groups the endpoints by path template, and its request, reply and status counts are the
// clients' own exactly.
func TestHTTPNginx(t *testing.T) {
	nginx := need(t, "nginx", "nginx-light")
	curl := need(t, "curl", "curl")
	h2load := need(t, "h2load", "nghttp2-client")
	dir := t.TempDir()
	port := freePort(t)
	conf := fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events { worker_connections 256; }
http {
	access_log off;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	keepalive_requests 1000000;
	server {
		listen 127.0.0.1:%[2]d;
		location /users/ { return 200 "user\n"; }
		location /missing/ { return 404; }
		location / { return 200 "ok\n"; }
	}
}
`, dir, port)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	startDaemon(t, addr, nginx, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-e", filepath.Join(dir, "error.log"))
	base := "http://" + addr

	t.Run("curl", func(t *testing.T) {
		out := filepath.Join(dir, "curl.plt")
		urls := []string{base + "/users/1", base + "/users/22", base + "/users/333", base + "/missing/7", base + "/"}
		args := append([]string{"record", "-o", out, "--payload-bytes", "256", "--", curl, "-s", "-o", "/dev/null", "-o", "/dev/null", "-o", "/dev/null", "-o", "/dev/null", "-o", "/dev/null", "-w", "%{http_code}\n"}, urls...)
		r := mustPerflab(t, dir, args...)
		codes := strings.Fields(r.stdout)
		if len(codes) != len(urls) {
			t.Fatalf("curl printed %q, want %d status codes", r.stdout, len(urls))
		}
		s := analyzeTrace(t, dir, out)
		if s.Protocol != "http" || s.Decoding == nil || s.Decoding.Mode != "auto" || s.Decoding.Share < 0.99 {
			t.Errorf("auto chose %q, decoding %+v; want http, all bytes", s.Protocol, s.Decoding)
		}
		rep := s.replies()
		if rep["GET /users/{id}"] != 3 || rep["GET /missing/{id}"] != 1 || rep["GET /"] != 1 || s.RoundTrips.Count != 5 {
			t.Errorf("replies %v, %d round trips; want 3 GET /users/{id}, 1 GET /missing/{id}, 1 GET /", rep, s.RoundTrips.Count)
		}
		if st := s.status(); st[200] != 4 || st[404] != 1 {
			t.Errorf("statuses %v; curl saw %v", st, codes)
		}
	})

	// h2load's status line: "status codes: 2000 2xx, 0 3xx, 0 4xx, 0 5xx".
	codeRe := regexp.MustCompile(`status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx`)
	t.Run("h2load", func(t *testing.T) {
		out := filepath.Join(dir, "h2load.plt")
		r := mustPerflab(t, dir, "record", "-o", out, "--payload-bytes", "256", "--", h2load, "--h1", "-n", "3000", "-c", "4", "-m", "1", base+"/users/42")
		m, c := h2loadRequests.FindStringSubmatch(r.stdout), codeRe.FindStringSubmatch(r.stdout)
		if m == nil || c == nil {
			t.Fatalf("no h2load summary in:\n%s", r.stdout)
		}
		started, _ := strconv.ParseUint(m[2], 10, 64)
		done, _ := strconv.ParseUint(m[3], 10, 64)
		ok2xx, _ := strconv.ParseUint(c[1], 10, 64)
		s := analyzeTrace(t, dir, out)
		if !strings.Contains(s.Protocol, "http") { // h2load also has a socket of its own (raw)
			t.Errorf("auto chose %q, want http", s.Protocol)
		}
		if got := s.requests()["GET /users/{id}"]; got != started {
			t.Errorf("requests: perflab %d, h2load started %d", got, started)
		}
		if got := s.replies()["GET /users/{id}"]; got != done {
			t.Errorf("replies: perflab %d, h2load done %d", got, done)
		}
		if st := s.status(); st[200] != ok2xx {
			t.Errorf("status 200: perflab %d, h2load 2xx %d", st[200], ok2xx)
		}
		for _, w := range s.Warnings {
			if strings.Contains(w, "protocol http decoded") || strings.Contains(w, "past the captured") {
				t.Errorf("warning: %s", w)
			}
		}
		t.Logf("h2load %d requests done; perflab %d round trips", done, s.RoundTrips.Count)
	})

	// Pipelined (four requests in flight per connection): several responses arrive in one
	// read, and those past the 256 bytes a trace keeps of each call cannot be seen. perflab
	// never counts more than h2load did, and says so whenever it counts fewer.
	t.Run("h2load-pipelined", func(t *testing.T) {
		out := filepath.Join(dir, "h2load-m4.plt")
		started, done := recordH2load(t, dir, out, "--payload-bytes", "256", "--", h2load, "--h1", "-n", "2000", "-c", "2", "-m", "4", base+"/users/42")
		s := analyzeTrace(t, dir, out)
		req, rep := s.requests()["GET /users/{id}"], s.replies()["GET /users/{id}"]
		warned := false
		for _, w := range s.Warnings {
			warned = warned || strings.Contains(w, "past the captured payload head")
		}
		if req > started || rep > done || (req < started || rep < done) && !warned {
			t.Errorf("pipelined: perflab %d requests, %d replies; h2load %d started, %d done; lower bound warned: %v", req, rep, started, done, warned)
		}
		t.Logf("pipelined: perflab %d/%d requests, %d/%d replies", req, started, rep, done)
	})

	// At the default 64-byte heads every request and response is longer than its head: each
	// is taken to end with its call, which it does without pipelining, so the counts are
	// exact, and perflab says how the messages were delimited without calling them lower
	// bounds.
	t.Run("h2load-default-heads", func(t *testing.T) {
		out := filepath.Join(dir, "h2load-64.plt")
		started, done := recordH2load(t, dir, out, "--", h2load, "--h1", "-n", "2000", "-c", "2", "-m", "1", base+"/users/42")
		s := analyzeTrace(t, dir, out)
		if req, rep := s.requests()["GET /users/{id}"], s.replies()["GET /users/{id}"]; req != started || rep != done {
			t.Errorf("perflab %d requests, %d replies; h2load %d started, %d done", req, rep, started, done)
		}
		if s.CallsBlind < started || s.CallsPastHead != 0 {
			t.Errorf("calls_blind %d (want one a message at least: %d), calls_past_head %d (want 0)", s.CallsBlind, started, s.CallsPastHead)
		}
	})
}

// h2loadRequests matches h2load's summary: "requests: 2000 total, 2000 started, 2000 done, 2000
// succeeded, ...".
var h2loadRequests = regexp.MustCompile(`requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded`)

// recordH2load records h2load into out (args: record's flags, then "--" and the h2load command)
// and returns the requests h2load started and those it saw done.
func recordH2load(t *testing.T, dir, out string, args ...string) (started, done uint64) {
	t.Helper()
	r := mustPerflab(t, dir, append([]string{"record", "-o", out}, args...)...)
	m := h2loadRequests.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no h2load summary in:\n%s", r.stdout)
	}
	started, _ = strconv.ParseUint(m[2], 10, 64)
	done, _ = strconv.ParseUint(m[3], 10, 64)
	return started, done
}

// nginx recorded from its side (perflab record -- nginx) while h2load loads it: the requests
// arrive in recv, the responses leave in send; perflab's request, reply and status counts
// equal h2load's, and the server's service time is measured for every one. At 256-byte heads
// every message is seen whole; at the default 64 bytes each ends where the next call starts
// one, and the last request of each connection still pairs with its reply.
func TestHTTPNginxServer(t *testing.T) {
	for _, head := range []string{"256", "64"} {
		t.Run("head_"+head, func(t *testing.T) { nginxServer(t, head) })
	}
}

// nginxServer records nginx under h2load at payload heads of head bytes and checks the counts.
func nginxServer(t *testing.T, head string) {
	nginx := need(t, "nginx", "nginx-light")
	h2load := need(t, "h2load", "nghttp2-client")
	dir := t.TempDir()
	port := freePort(t)
	conf := fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events { worker_connections 256; }
http {
	access_log off;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	server {
		listen 127.0.0.1:%[2]d;
		location / { return 200 "ok\n"; }
	}
}
`, dir, port)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	out := filepath.Join(dir, "server.plt")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rec := exec.CommandContext(ctx, perflab, "record", "-o", out, "--payload-bytes", head, "--",
		nginx, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-e", filepath.Join(dir, "error.log"))
	var recErr strings.Builder
	rec.Stdout, rec.Stderr = io.Discard, &recErr
	if err := rec.Start(); err != nil {
		t.Fatal(err)
	}
	recDone := make(chan error, 1)
	go func() { recDone <- rec.Wait() }()
	stopped := false
	stop := func() {
		// nginx's own pid: a graceful quit ends it, and with it the recording (once: the pid
		// is not signalled again after it ended)
		if stopped {
			return
		}
		stopped = true
		if b, err := os.ReadFile(filepath.Join(dir, "nginx.pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				if p, err := os.FindProcess(pid); err == nil {
					p.Signal(syscall.SIGQUIT)
				}
			}
		}
	}
	defer func() {
		stop()
		select {
		case <-recDone:
		case <-time.After(20 * time.Second):
			rec.Process.Kill()
			<-recDone
		}
	}()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close() // one connection without a request: nothing to decode
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx under perflab record did not listen within 15 s: %s", recErr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	h := exec.CommandContext(ctx, h2load, "--h1", "-n", "1000", "-c", "2", "-m", "1", "http://"+addr+"/api/v2/items/981")
	b, err := h.Output()
	if err != nil {
		t.Fatalf("h2load: %v\n%s", err, b)
	}
	m := regexp.MustCompile(`requests: (\d+) total, (\d+) started, (\d+) done`).FindStringSubmatch(string(b))
	if m == nil {
		t.Fatalf("no h2load summary in:\n%s", b)
	}
	done, _ := strconv.ParseUint(m[3], 10, 64)
	stop()
	select {
	case err := <-recDone:
		recDone <- err // for the deferred wait
		if err != nil {
			t.Fatalf("record: %v\n%s", err, recErr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("nginx did not quit: %s", recErr.String())
	}
	s := analyzeTrace(t, dir, out)
	var req, rep uint64
	for _, c := range s.Commands {
		if c.Name == "GET /api/v2/items/{id}" && c.Kind == "request" && c.Direction == "recv" {
			req += c.Count
		}
		if c.Name == "GET /api/v2/items/{id}" && c.Kind == "reply" && c.Direction == "send" {
			rep += c.Count
			if c.RTT == nil || c.RTT.P50 <= 0 {
				t.Errorf("no service time on the replies")
			}
		}
	}
	if s.Protocol != "http" || req != done || rep != done || s.status()[200] != done {
		t.Errorf("server side: protocol %q, %d requests, %d replies, statuses %v; h2load done %d", s.Protocol, req, rep, s.status(), done)
	}
	if s.RoundTrips.Count != done || s.RoundTrips.Unpaired != 0 {
		t.Errorf("server side: %d round trips served, %d replies unpaired; h2load done %d", s.RoundTrips.Count, s.RoundTrips.Unpaired, done)
	}
}

// memcached from Debian, driven by a client that speaks its text protocol (this test binary
// re-executed, runMemcachedClient), recorded with eBPF: auto detection finds memcached, and
// its per-command request and reply counts are the client's own exactly, quiet meta requests
// that were not answered neither pairing with a later reply nor counting unanswered.
func TestMemcached(t *testing.T) {
	memcached := need(t, "memcached", "memcached")
	dir := t.TempDir()
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	startDaemon(t, addr, memcached, "-u", "root", "-l", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "0", "-t", "1", "-m", "16")
	out := filepath.Join(dir, "mc.plt")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, perflab, "record", "-o", out, "--payload-bytes", "256", "--", exe)
	cmd.Env = append(os.Environ(), memcachedClientEnv+"="+addr)
	cmd.Dir = dir
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("record the client: %v\n%s", err, b)
	}
	var want struct{ Requests, Replies map[string]uint64 }
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatalf("client output %q: %v", b, err)
	}
	s := analyzeTrace(t, dir, out)
	if s.Protocol != "memcached" || s.Decoding == nil || s.Decoding.Share < 0.99 {
		t.Errorf("auto chose %q, decoding %+v; want memcached, all bytes", s.Protocol, s.Decoding)
	}
	req, rep := s.requests(), s.replies()
	for name, n := range want.Requests {
		if req[name] != n {
			t.Errorf("%s: perflab %d requests, client sent %d", name, req[name], n)
		}
	}
	var total uint64
	for name, n := range want.Replies {
		total += n
		if rep[name] != n {
			t.Errorf("%s: perflab %d replies, client read %d", name, rep[name], n)
		}
	}
	if s.RoundTrips.Count != total || s.RoundTrips.Unanswered != 0 {
		t.Errorf("round trips %d (unanswered %d), client %d", s.RoundTrips.Count, s.RoundTrips.Unanswered, total)
	}
	// forcing HTTP on it decodes nothing, and says so
	f := analyzeTrace(t, dir, out, "--protocol", "http")
	warned := false
	for _, w := range f.Warnings {
		warned = warned || strings.Contains(w, "protocol http decoded")
	}
	if !warned {
		t.Errorf("--protocol http on memcached traffic: no warning about the share decoded: %q", f.Warnings)
	}
}

// runMemcachedClient talks memcached's text protocol to addr: batches of pipelined sets, a
// noreply set, multi-key gets, incr, delete, a miss, and quiet meta gets (a hit and a miss)
// ended by mn; it reads every reply and prints what it sent and read, per command, as JSON.
func runMemcachedClient(addr string) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	br := bufio.NewReader(c)
	req, rep := map[string]uint64{}, map[string]uint64{}
	send := func(cmds ...string) error {
		_, err := io.WriteString(c, strings.Join(cmds, ""))
		for _, x := range cmds {
			req[strings.Fields(x)[0]]++
		}
		return err
	}
	// reply reads one reply to cmd: lines up to a final one (VALUE lines carry data).
	reply := func(cmd string) error {
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return err
			}
			f := strings.Fields(line)
			if len(f) == 4 && f[0] == "VALUE" {
				n, _ := strconv.Atoi(f[3])
				if _, err := io.CopyN(io.Discard, br, int64(n+2)); err != nil {
					return err
				}
				continue
			}
			if len(f) > 0 && strings.HasSuffix(f[0], "ERROR") {
				return fmt.Errorf("%s: %s", cmd, strings.TrimSpace(line))
			}
			rep[cmd]++
			return nil
		}
	}
	for round := 0; round < 50; round++ {
		var batch []string
		for k := 0; k < 4; k++ {
			batch = append(batch, fmt.Sprintf("set key-%d-%d 0 0 10\r\n%010d\r\n", round, k, round*4+k))
		}
		if err := send(batch...); err != nil {
			return err
		}
		for range batch {
			if err := reply("set"); err != nil {
				return err
			}
		}
		if err := send(fmt.Sprintf("set quiet-%d 0 0 2 noreply\r\nhi\r\n", round)); err != nil {
			return err
		}
		if err := send(fmt.Sprintf("get key-%d-0 key-%d-1 key-%d-2 missing\r\n", round, round, round)); err != nil {
			return err
		}
		if err := reply("get"); err != nil {
			return err
		}
		if err := send(fmt.Sprintf("incr counter-%d 1\r\n", round), fmt.Sprintf("delete key-%d-3\r\n", round)); err != nil {
			return err
		}
		if err := reply("incr"); err != nil { // NOT_FOUND: the counter was never set
			return err
		}
		if err := reply("delete"); err != nil {
			return err
		}
		// meta commands, quiet: the hit is answered (VA and its data), the miss is not; mn's
		// MN ends the batch
		if err := send(fmt.Sprintf("mg key-%d-0 v q\r\n", round), fmt.Sprintf("mg missing-%d v q\r\n", round), "mn\r\n"); err != nil {
			return err
		}
		for _, want := range []string{"VA 10", "MN"} {
			line, err := br.ReadString('\n')
			if err != nil {
				return err
			}
			if !strings.HasPrefix(line, want) {
				return fmt.Errorf("meta batch: %q, want %s", line, want)
			}
			if want == "MN" {
				rep["mn"]++
				continue
			}
			if _, err := io.CopyN(io.Discard, br, 12); err != nil {
				return err
			}
			rep["mg"]++
		}
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]map[string]uint64{"requests": req, "replies": rep})
}
