package e2e

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/testutil"
	"github.com/perflab/perflab/trace"
)

// makeCert makes a self-signed certificate for 127.0.0.1 with Debian's openssl CLI, in dir.
func makeCert(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	openssl := need(t, "openssl", "openssl")
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	out, err := exec.Command(openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
		"-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1").CombinedOutput()
	if err != nil {
		t.Fatalf("openssl req: %v\n%s", err, out)
	}
	return cert, key
}

// opCounts counts a trace's events by op, and the connections' families by id.
func opCounts(t *testing.T, path string) map[trace.Op]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := trace.NewReader(bufio.NewReader(f))
	if err != nil {
		t.Fatal(err)
	}
	n := map[trace.Op]int{}
	var rec trace.Record
	for {
		err := r.Next(&rec)
		if err == io.EOF {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Kind == trace.KindEvent && rec.Event.Errno == 0 {
			n[rec.Event.Op]++
		}
	}
}

// tlsJSON is the part of analyze's JSON that says which calls were plaintext and which
// ciphertext.
type tlsJSON struct {
	TLS *struct {
		Connections int `json:"connections"`
		Plaintext   struct {
			Send struct{ Calls uint64 } `json:"send"`
			Recv struct{ Calls uint64 } `json:"recv"`
		} `json:"plaintext"`
		Ciphertext struct {
			Send struct{ Calls uint64 } `json:"send"`
			Recv struct{ Calls uint64 } `json:"recv"`
		} `json:"ciphertext"`
	} `json:"tls"`
}

// nginx from Debian serving HTTPS with a certificate the test makes, curl from Debian as the
// client (keep-alive over several URLs), recorded with --tls: perflab reads HTTP/1.1 in the
// plaintext of OpenSSL's SSL_write/SSL_read, names the endpoints, and its request, reply and
// status counts are curl's; the ciphertext system calls are counted apart, not as messages.
func TestTLSCurlNginx(t *testing.T) {
	nginx := need(t, "nginx", "nginx-light")
	curl := need(t, "curl", "curl")
	dir := t.TempDir()
	cert, key := makeCert(t, dir)
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
		listen 127.0.0.1:%[2]d ssl;
		ssl_certificate %[3]s;
		ssl_certificate_key %[4]s;
		location /users/ { return 200 "user\n"; }
		location /missing/ { return 404; }
		location / { return 200 "ok\n"; }
	}
}
`, dir, port, cert, key)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	startDaemon(t, addr, nginx, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-e", filepath.Join(dir, "error.log"))
	base := "https://" + addr
	urls := []string{base + "/users/1", base + "/users/22", base + "/users/333", base + "/missing/7", base + "/", base + "/users/4444"}
	out := filepath.Join(dir, "curl.plt")
	args := []string{"record", "--tls", "-o", out, "--payload-bytes", "256", "--", curl, "-s", "--cacert", cert, "-w", "%{http_code}\n"}
	for _, u := range urls {
		args = append(args, "-o", "/dev/null", u)
	}
	r := mustPerflab(t, dir, args...)
	codes := strings.Fields(r.stdout)
	if len(codes) != len(urls) {
		t.Fatalf("curl printed %q, want %d status codes", r.stdout, len(urls))
	}
	curl200, curl404 := uint64(0), uint64(0)
	for _, c := range codes {
		switch c {
		case "200":
			curl200++
		case "404":
			curl404++
		}
	}
	s := analyzeTrace(t, dir, out)
	if s.Protocol != "http" {
		t.Errorf("protocol %q, want http (the plaintext)", s.Protocol)
	}
	req, rep := s.requests(), s.replies()
	if req["GET /users/{id}"] != 4 || req["GET /missing/{id}"] != 1 || req["GET /"] != 1 || s.RoundTrips.Count != uint64(len(urls)) {
		t.Errorf("requests %v, %d round trips; curl made %d: 4 GET /users/{id}, 1 GET /missing/{id}, 1 GET /", req, s.RoundTrips.Count, len(urls))
	}
	if rep["GET /users/{id}"] != 4 || rep["GET /missing/{id}"] != 1 || rep["GET /"] != 1 {
		t.Errorf("replies %v", rep)
	}
	if st := s.status(); st[200] != curl200 || st[404] != curl404 {
		t.Errorf("statuses %v; curl saw %v", st, codes)
	}
	for _, c := range s.Commands {
		if !strings.HasPrefix(c.Name, "GET ") {
			t.Errorf("command %q: only the plaintext's HTTP requests are messages", c.Name)
		}
	}
	rj := mustPerflab(t, dir, "analyze", "--format", "json", out)
	var tj tlsJSON
	if err := json.Unmarshal([]byte(rj.stdout), &tj); err != nil {
		t.Fatal(err)
	}
	ops := opCounts(t, out)
	if tj.TLS == nil || tj.TLS.Connections != 1 || tj.TLS.Plaintext.Send.Calls != uint64(ops[trace.OpTLSWrite]) ||
		tj.TLS.Plaintext.Recv.Calls != uint64(ops[trace.OpTLSRead]) || tj.TLS.Ciphertext.Send.Calls == 0 || tj.TLS.Ciphertext.Recv.Calls == 0 {
		t.Errorf("tls %+v; trace ops %v", tj.TLS, ops)
	}
	if ops[trace.OpTLSWrite] < len(urls) {
		t.Errorf("%d tls_write events for %d requests", ops[trace.OpTLSWrite], len(urls))
	}

	// nginx's side, recorded by pid while curl talks to it: the requests arrive in SSL_read,
	// the responses leave in SSL_write. nginx first peeks at one byte of the ClientHello to
	// tell TLS from plain HTTP; the connection's system calls are still its ciphertext.
	t.Run("nginx-side", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(dir, "nginx.pid"))
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
		if err != nil {
			t.Fatal(err)
		}
		lib := ""
		for _, l := range strings.Split(string(maps), "\n") {
			if f := strings.Fields(l); len(f) >= 6 && strings.HasPrefix(filepath.Base(f[5]), "libssl.so") {
				lib = f[5]
			}
		}
		if lib == "" {
			t.Fatal("nginx maps no libssl")
		}
		addr := symbolAddr(t, pid, lib, elfSymbol(t, lib, "SSL_read"))
		out := filepath.Join(dir, "nginx.plt")
		// --progress: record's first progress line comes once every probe is attached. The
		// int3 in SSL_read alone does not say so: another recorder's uprobe on the same
		// library (a second test run on the machine) sets the same byte.
		rec := exec.Command(perflab, "record", "--tls", "--progress", "-o", out, "--payload-bytes", "256", "-p", strconv.Itoa(pid))
		var errb testutil.SyncBuffer
		stderr, err := rec.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := rec.Start(); err != nil {
			t.Fatal(err)
		}
		attached := make(chan struct{})
		copied := make(chan struct{})
		go func() {
			defer close(copied)
			br := bufio.NewReader(stderr)
			line, err := br.ReadString('\n')
			errb.Write([]byte(line))
			if err == nil {
				close(attached)
			}
			io.Copy(&errb, br)
		}()
		recDone := make(chan error, 1)
		go func() { <-copied; recDone <- rec.Wait() }()
		select {
		case <-attached:
		case <-time.After(30 * time.Second):
			rec.Process.Kill()
			<-recDone
			t.Fatalf("record never said its probes were attached; perflab said:\n%s", errb.String())
		}
		if codeByte(t, pid, addr) != 0xcc {
			rec.Process.Kill()
			<-recDone
			t.Fatalf("record is attached but SSL_read of nginx is not probed; perflab said:\n%s", errb.String())
		}
		args := []string{"-s", "--cacert", cert}
		for _, p := range []string{"/users/5", "/users/66", "/"} {
			args = append(args, "-o", "/dev/null", base+p)
		}
		if o, err := exec.Command(curl, args...).CombinedOutput(); err != nil {
			t.Fatalf("curl: %v\n%s", err, o)
		}
		rec.Process.Signal(os.Interrupt)
		if err := <-recDone; err != nil {
			t.Fatalf("record: %v\n%s", err, errb.String())
		}
		s := analyzeTrace(t, dir, out)
		reqs, reps := map[string]uint64{}, map[string]uint64{}
		for _, c := range s.Commands {
			switch {
			case c.Kind == "request" && c.Direction == "recv":
				reqs[c.Name] += c.Count
			case c.Kind == "reply" && c.Direction == "send":
				reps[c.Name] += c.Count
			default:
				t.Errorf("command %+v: a server's messages are requests received and replies sent", c)
			}
		}
		if len(reqs) != 2 || len(reps) != 2 || reqs["GET /users/{id}"] != 2 || reqs["GET /"] != 1 || reps["GET /users/{id}"] != 2 || reps["GET /"] != 1 {
			t.Errorf("nginx received %v, answered %v; curl sent 2 GET /users/{id} and 1 GET /", reqs, reps)
		}
	})

	// Python loads libssl when it imports ssl (dlopen), after the recording began: record
	// finds it in the process's maps and probes it from then on (Python calls SSL_write_ex and
	// SSL_read_ex).
	t.Run("python-dlopen", func(t *testing.T) {
		python := need(t, "python3", "python3")
		script := filepath.Join(dir, "get.py")
		if err := os.WriteFile(script, []byte(pyGetScript), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "python.plt")
		r := mustPerflab(t, dir, "record", "--tls", "-o", out, "--payload-bytes", "256", "--", python, script, strconv.Itoa(port), cert)
		if strings.TrimSpace(r.stdout) != "4" {
			t.Fatalf("the client printed %q, want 4 responses", r.stdout)
		}
		if !strings.Contains(r.stderr, "loaded") || !strings.Contains(r.stderr, "libssl") {
			t.Errorf("no note that libssl was loaded during the recording: %s", r.stderr)
		}
		s := analyzeTrace(t, dir, out)
		if req, rep := s.requests(), s.replies(); req["GET /users/{id}"] != 3 || rep["GET /users/{id}"] != 3 || req["GET /"] != 1 || rep["GET /"] != 1 {
			t.Errorf("requests %v, replies %v; python made 3 GET /users/{id} and 1 GET /", req, rep)
		}
		if ops := opCounts(t, out); ops[trace.OpTLSWrite] != 4 {
			t.Errorf("%d tls_write events for 4 requests", ops[trace.OpTLSWrite])
		}
	})
}

// pyGetScript makes four HTTPS requests on one connection with Python's ssl and http.client.
const pyGetScript = `
import ssl, sys, time, http.client
time.sleep(3)  # the recorder reads the maps again every 0.5 s: the libssl the import loaded is probed by now
ctx = ssl.create_default_context(cafile=sys.argv[2])
c = http.client.HTTPSConnection("127.0.0.1", int(sys.argv[1]), context=ctx)
n = 0
for p in ["/users/1", "/users/2", "/users/3", "/"]:
    c.request("GET", p)
    c.getresponse().read()
    n += 1
print(n)
`

// redis-server from Debian with TLS (Debian builds it with OpenSSL), redis-cli --tls as the
// client, recorded with --tls: perflab reads RESP in the plaintext and counts redis-cli's
// commands exactly.
func TestTLSRedis(t *testing.T) {
	server := need(t, "redis-server", "redis-server")
	cli := need(t, "redis-cli", "redis-tools")
	dir := t.TempDir()
	cert, key := makeCert(t, dir)
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	startDaemon(t, addr, server, "--port", "0", "--tls-port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", cert, "--tls-auth-clients", "no",
		"--save", "", "--appendonly", "no", "--dir", dir)
	const n = 40
	out := filepath.Join(dir, "redis.plt")
	r := mustPerflab(t, dir, "record", "--tls", "-o", out, "--payload-bytes", "256", "--", cli, "--tls", "--cacert", cert,
		"-h", "127.0.0.1", "-p", strconv.Itoa(port), "-r", strconv.Itoa(n), "incr", "perflab:counter")
	if got := len(strings.Fields(r.stdout)); got != n {
		t.Fatalf("redis-cli printed %d replies, want %d:\n%s", got, n, r.stdout)
	}
	s := analyzeTrace(t, dir, out)
	if !strings.Contains(s.Protocol, "resp") {
		t.Errorf("protocol %q, want resp", s.Protocol)
	}
	if got := s.requests()["INCR"]; got != n {
		t.Errorf("INCR requests: perflab %d, redis-cli %d (commands %+v)", got, n, s.Commands)
	}
	if got := s.replies()["INCR"]; got != n {
		t.Errorf("INCR replies: perflab %d, redis-cli %d", got, n)
	}
}

// elfSymbol returns the function of binary whose name ends in suffix (a Go function keeps its
// package path, which may change), or an exported function named suffix.
func elfSymbol(t testing.TB, binary, suffix string) elf.Symbol {
	t.Helper()
	f, err := elf.Open(binary)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, _ := f.Symbols()
	for _, s := range syms {
		if strings.HasSuffix(s.Name, suffix) && elf.ST_TYPE(s.Info) == elf.STT_FUNC {
			return s
		}
	}
	dyn, _ := f.DynamicSymbols() // a stripped library keeps its exported functions here
	for _, s := range dyn {
		if s.Name == suffix && elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 {
			return s
		}
	}
	t.Fatalf("%s has no function *%s", binary, suffix)
	return elf.Symbol{}
}

// startShmServer starts perflab venus serve on a shared-memory ring and waits until it listens.
func startShmServer(t testing.TB, name string) {
	t.Helper()
	cmd := exec.Command(perflab, "venus", "serve", "--listen", "shm:///"+name)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
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
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("unix", "@perflab-venus-shm."+name); err == nil {
			c.Close()
			return
		}
	}
	t.Fatalf("venus serve did not listen on shm:///%s", name)
}

// venusd's shared-memory transport moves frames through a ring no system call sees. perflab
// records them with --uprobe on the two functions venusd calls with each frame (Go register
// ABI: the slice's pointer and length), and counts as many frames each way as venusd's own
// tracer, which analyze decodes as Venus round trips.
func TestUprobeVenusdShm(t *testing.T) {
	need(t, "true", "coreutils")
	dir := t.TempDir()
	name := fmt.Sprintf("uprobe%d", os.Getpid())
	startShmServer(t, name)
	out, tr := filepath.Join(dir, "uprobe.plt"), filepath.Join(dir, "tracer.plt")
	outSym := elfSymbol(t, perflab, "venusd/transport.shmFrameOut").Name
	inSym := elfSymbol(t, perflab, "venusd/transport.shmFrameIn").Name
	mustPerflab(t, dir, "record", "-o", out, "--payload-bytes", "64",
		"--uprobe", perflab+":"+outSym+",send,buf=arg1,len=arg2,go",
		"--uprobe", perflab+":"+inSym+",recv,buf=arg1,len=arg2,go",
		"--", perflab, "venus", "run", "--connect", "shm:///"+name, "--workload", "ping", "--requests", "500", "--trace", tr)
	got, want := opCounts(t, out), opCounts(t, tr)
	if got[trace.OpUprobeSend] != want[trace.OpFrameSend] || got[trace.OpUprobeRecv] != want[trace.OpFrameRecv] || want[trace.OpFrameSend] < 500 {
		t.Errorf("uprobes saw %d frames sent, %d received; venusd's tracer %d and %d", got[trace.OpUprobeSend], got[trace.OpUprobeRecv],
			want[trace.OpFrameSend], want[trace.OpFrameRecv])
	}
	s := analyzeTrace(t, dir, out)
	if !strings.Contains(s.Protocol, "venus") || s.RoundTrips.Count != uint64(want[trace.OpRoundTrip]) {
		t.Errorf("protocol %q, %d round trips; venusd's tracer %d", s.Protocol, s.RoundTrips.Count, want[trace.OpRoundTrip])
	}
}

// zmqScript is a ZeroMQ REQ/REP client and server in one Python process, calling Debian's
// libzmq through ctypes (no compiler, no binding): n requests, each answered. It prints the
// zmq_send and zmq_recv calls it made.
const zmqScript = `
import ctypes, sys
z = ctypes.CDLL("libzmq.so.5")
z.zmq_ctx_new.restype = ctypes.c_void_p
z.zmq_socket.restype = ctypes.c_void_p
z.zmq_socket.argtypes = [ctypes.c_void_p, ctypes.c_int]
z.zmq_bind.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
z.zmq_connect.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
z.zmq_send.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
z.zmq_recv.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
n, endpoint = int(sys.argv[1]), sys.argv[2].encode()
ctx = z.zmq_ctx_new()
rep, req = z.zmq_socket(ctx, 4), z.zmq_socket(ctx, 3)  # ZMQ_REP, ZMQ_REQ
assert z.zmq_bind(rep, endpoint) == 0 and z.zmq_connect(req, endpoint) == 0
buf = ctypes.create_string_buffer(256)
sends = recvs = 0
for i in range(n):
    m = b"GET key:%d" % i
    assert z.zmq_send(req, m, len(m), 0) == len(m); sends += 1
    k = z.zmq_recv(rep, buf, 256, 0); recvs += 1
    r = b"VALUE " + buf.raw[:k]
    assert z.zmq_send(rep, r, len(r), 0) == len(r); sends += 1
    assert z.zmq_recv(req, buf, 256, 0) == len(r); recvs += 1
print(sends, recvs)
`

// Debian's libzmq (zmq_send, zmq_recv: the buffer, its length, and the socket as the
// connection), driven by a small REQ/REP client and server: perflab's counts of sends and
// receives at the library are the program's own, on two connections (the two sockets), though
// the library's I/O thread moves the bytes on the socket.
func TestUprobeZeroMQ(t *testing.T) {
	python := need(t, "python3", "python3")
	if _, err := os.Stat("/usr/lib/x86_64-linux-gnu/libzmq.so.5"); err != nil {
		if os.Getenv("PERFLAB_E2E") == "1" {
			t.Fatal("PERFLAB_E2E=1 but libzmq5 is not installed (run make e2e)")
		}
		t.Skip("libzmq5 not installed")
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "zmq.py")
	if err := os.WriteFile(script, []byte(zmqScript), 0o644); err != nil {
		t.Fatal(err)
	}
	const n = 300
	out := filepath.Join(dir, "zmq.plt")
	r := mustPerflab(t, dir, "record", "-o", out, "--payload-bytes", "64",
		"--uprobe", "libzmq.so.5:zmq_send,send,buf=arg2,len=arg3,conn=arg1",
		"--uprobe", "libzmq.so.5:zmq_recv,recv,buf=arg2,len=ret,conn=arg1",
		"--", python, script, strconv.Itoa(n), fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t)))
	var sends, recvs int
	if _, err := fmt.Sscan(r.stdout, &sends, &recvs); err != nil || sends != 2*n {
		t.Fatalf("the program printed %q", r.stdout)
	}
	got := opCounts(t, out)
	if got[trace.OpUprobeSend] != sends || got[trace.OpUprobeRecv] != recvs {
		t.Errorf("perflab %d sends, %d receives; the program %d and %d", got[trace.OpUprobeSend], got[trace.OpUprobeRecv], sends, recvs)
	}
	s := analyzeTrace(t, dir, out)
	if s.Totals.Send.Frames < uint64(sends) {
		t.Errorf("analyze: %d messages sent, the program %d", s.Totals.Send.Frames, sends)
	}
}

// symbolAddr returns where a function of binary is in process pid's memory.
func symbolAddr(t *testing.T, pid int, binary string, sym elf.Symbol) int64 {
	t.Helper()
	f, err := elf.Open(binary)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sec := f.Sections[sym.Section]
	off := sym.Value - sec.Addr + sec.Offset // in the file
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(binary)
	if err != nil {
		t.Fatal(err)
	}
	ino := st.Sys().(*syscall.Stat_t).Ino
	for _, line := range strings.Split(string(maps), "\n") {
		fs := strings.Fields(line)
		if len(fs) < 6 || fs[4] != strconv.FormatUint(ino, 10) {
			continue
		}
		lo, hi, _ := strings.Cut(fs[0], "-")
		start, _ := strconv.ParseUint(lo, 16, 64)
		end, _ := strconv.ParseUint(hi, 16, 64)
		moff, _ := strconv.ParseUint(fs[2], 16, 64)
		if off >= moff && off < moff+end-start {
			return int64(start + off - moff)
		}
	}
	t.Fatalf("%s at file offset %#x is not mapped in process %d", sym.Name, off, pid)
	return 0
}

// codeByte reads one byte of process pid's memory.
func codeByte(t *testing.T, pid int, addr int64) byte {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, addr); err != nil {
		t.Fatal(err)
	}
	return b[0]
}

// A uprobe is a breakpoint (int3, 0xcc) the kernel writes into the code of every process that
// maps the probed file. perflab record killed with SIGKILL runs no cleanup of its own: the
// kernel removes its uprobes with its file descriptors, and the code is the program's again.
func TestUprobeDetachOnKill(t *testing.T) {
	need(t, "true", "coreutils")
	dir := t.TempDir()
	name := fmt.Sprintf("kill%d", os.Getpid())
	// The probed process: a venus server, whose binary holds the function.
	srv := exec.Command(perflab, "venus", "serve", "--listen", "shm:///"+name)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	sym := elfSymbol(t, perflab, "venusd/transport.shmFrameOut")
	var addr int64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", srv.Process.Pid)); err == nil && bytes.Contains(b, []byte(filepath.Base(perflab))) {
			addr = symbolAddr(t, srv.Process.Pid, perflab, sym)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the server's binary is not mapped")
		}
	}
	orig := codeByte(t, srv.Process.Pid, addr)
	if orig == 0xcc {
		t.Fatalf("%s starts with int3 before any probe", sym.Name)
	}
	rec := exec.Command(perflab, "record", "-o", filepath.Join(dir, "k.plt"), "-p", strconv.Itoa(srv.Process.Pid),
		"--uprobe", perflab+":"+sym.Name+",send,buf=arg1,len=arg2,go")
	var errb bytes.Buffer
	rec.Stderr = &errb
	if err := rec.Start(); err != nil {
		t.Fatal(err)
	}
	recDone := make(chan struct{})
	go func() { rec.Wait(); close(recDone) }()
	defer func() { rec.Process.Kill(); <-recDone }()
	for deadline := time.Now().Add(30 * time.Second); codeByte(t, srv.Process.Pid, addr) != 0xcc; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the uprobe never appeared in the server's code; perflab said:\n%s", errb.String())
		}
	}
	rec.Process.Signal(syscall.SIGKILL)
	<-recDone
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b := codeByte(t, srv.Process.Pid, addr)
		if b == orig {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after SIGKILL of perflab the server's code still holds %#x where %#x was: a uprobe stayed registered", b, orig)
		}
	}
	if b, err := os.ReadFile("/sys/kernel/tracing/uprobe_events"); err == nil && bytes.Contains(b, []byte("perflab")) {
		t.Errorf("uprobe_events still lists perflab's probes:\n%s", b)
	}
}

// zmqHasScript calls Debian libzmq's zmq_has("ipc") n times through ctypes and prints the ns a
// call took, on average, inside the loop.
const zmqHasScript = `
import ctypes, sys, time
z = ctypes.CDLL("libzmq.so.5")
z.zmq_has.argtypes = [ctypes.c_char_p]
n, f, arg = int(sys.argv[1]), z.zmq_has, b"ipc"
t0 = time.perf_counter_ns()
for _ in range(n):
    f(arg)
print((time.perf_counter_ns() - t0) / n)
`

// footerStats returns the footer's producer statistics of a trace.
func footerStats(b testing.TB, path string) map[string]int64 {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	r, err := trace.NewReader(bufio.NewReader(f))
	if err != nil {
		b.Fatal(err)
	}
	var rec trace.Record
	for r.Next(&rec) == nil {
	}
	ft, _ := r.Footer()
	return ft.Stats
}

func medianOf(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BenchmarkUprobeCost measures what a uprobe costs the recorded process when it fires, in
// alternating rounds without and with perflab recording (medians):
//
//   - c_entry_return: a C function with an entry and a return probe (as SSL_write, SSL_read and
//     --uprobe specs with len=ret): libzmq's zmq_has called from Python through ctypes, ns added
//     per call;
//   - go_entry: a Go function with an entry probe (--uprobe ...,go): venusd's ping over a
//     shared-memory ring, two probed frames per request, ns added per frame.
//
// It also reports the probe programs' own kernel time per run from the footer statistics (the
// rest of a hit is the kernel's breakpoint trap and single-step).
func BenchmarkUprobeCost(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		b.Skip("python3 not installed")
	}
	if _, err := os.Stat("/usr/lib/x86_64-linux-gnu/libzmq.so.5"); err != nil {
		b.Skip("libzmq5 not installed")
	}
	dir := b.TempDir()
	const rounds = 5
	b.Run("c_entry_return", func(b *testing.B) {
		script := filepath.Join(dir, "has.py")
		if err := os.WriteFile(script, []byte(zmqHasScript), 0o644); err != nil {
			b.Fatal(err)
		}
		const n = 1000000
		for i := 0; i < b.N; i++ {
			var added, plain, entryNs, retNs []float64
			for r := 0; r < rounds; r++ {
				var ns [2]float64
				for k, rec := range []bool{false, true} {
					args := []string{python, script, strconv.Itoa(n)}
					out := filepath.Join(dir, "has.plt")
					if rec {
						args = append([]string{perflab, "record", "-o", out, "--uprobe", "libzmq.so.5:zmq_has,send,buf=arg1,len=ret", "--"}, args...)
					}
					o, err := exec.Command(args[0], args[1:]...).Output()
					if err != nil {
						b.Fatalf("%v: %v", args, err)
					}
					if _, err := fmt.Sscan(string(o), &ns[k]); err != nil {
						b.Fatalf("output %q", o)
					}
					if rec {
						st := footerStats(b, out)
						if st["probe_uentry_runs"] > 0 {
							entryNs = append(entryNs, float64(st["probe_uentry_ns"])/float64(st["probe_uentry_runs"]))
						}
						if st["probe_uret_runs"] > 0 {
							retNs = append(retNs, float64(st["probe_uret_ns"])/float64(st["probe_uret_runs"]))
						}
					}
				}
				plain = append(plain, ns[0])
				added = append(added, ns[1]-ns[0])
			}
			b.Logf("ns added per call, by round: %.0f", added)
			b.ReportMetric(medianOf(plain), "plain_ns/call")
			b.ReportMetric(medianOf(added), "added_ns/call")
			b.ReportMetric(medianOf(entryNs), "entry_prog_ns/run")
			b.ReportMetric(medianOf(retNs), "return_prog_ns/run")
		}
	})
	b.Run("go_entry", func(b *testing.B) {
		name := fmt.Sprintf("bench%d", os.Getpid())
		startShmServer(b, name)
		outSym := elfSymbol(b, perflab, "venusd/transport.shmFrameOut").Name
		inSym := elfSymbol(b, perflab, "venusd/transport.shmFrameIn").Name
		const n = 20000
		for i := 0; i < b.N; i++ {
			var added, plain, entryNs []float64
			for r := 0; r < rounds; r++ {
				var per [2]float64
				for k, rec := range []bool{false, true} {
					args := []string{perflab, "venus", "run", "--connect", "shm:///" + name, "--workload", "ping", "--requests", strconv.Itoa(n), "--json", "--no-verify"}
					out := filepath.Join(dir, "shm.plt")
					if rec {
						args = append([]string{perflab, "record", "-o", out,
							"--uprobe", perflab + ":" + outSym + ",send,buf=arg1,len=arg2,go",
							"--uprobe", perflab + ":" + inSym + ",recv,buf=arg1,len=arg2,go", "--"}, args...)
					}
					o, err := exec.Command(args[0], args[1:]...).Output()
					if err != nil {
						b.Fatalf("%v: %v", args, err)
					}
					var res struct {
						Ping struct {
							ThroughputPerS float64 `json:"throughput_per_s"`
						} `json:"ping"`
					}
					if err := json.Unmarshal(o, &res); err != nil || res.Ping.ThroughputPerS <= 0 {
						b.Fatalf("output %q: %v", o, err)
					}
					per[k] = 1e9 / res.Ping.ThroughputPerS
					if rec {
						st := footerStats(b, out)
						if st["probe_uentry_runs"] > 0 {
							entryNs = append(entryNs, float64(st["probe_uentry_ns"])/float64(st["probe_uentry_runs"]))
						}
					}
				}
				plain = append(plain, per[0])
				added = append(added, (per[1]-per[0])/2) // two probed frames per request
			}
			b.Logf("ns added per frame, by round: %.0f", added)
			b.ReportMetric(medianOf(plain), "plain_ns/request")
			b.ReportMetric(medianOf(added), "added_ns/frame")
			b.ReportMetric(medianOf(entryNs), "entry_prog_ns/run")
		}
	})
}
