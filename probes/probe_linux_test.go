//go:build linux && amd64

package probes

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/perflab/perflab/internal/testutil"
	"github.com/perflab/perflab/trace"
)

// requireProbes opens a probe or skips (fails on CI) when eBPF is unusable here.
func requireProbes(t *testing.T, cfg Config) *Probe {
	t.Helper()
	if err := CheckPrivileges(); err != nil {
		testutil.RequireBPF(t, false, err.Error())
	}
	p, err := Open(cfg)
	if err != nil {
		testutil.RequireBPF(t, false, err.Error())
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// recording is what Run emitted.
type recording struct {
	events []trace.Event
	conns  map[uint64]trace.Connection
	lost   uint64
}

func (r *recording) emit(rec *trace.Record) error {
	switch rec.Kind {
	case trace.KindEvent:
		e := rec.Event
		e.Payload = append([]byte(nil), e.Payload...)
		r.events = append(r.events, e)
	case trace.KindConnection:
		r.conns[rec.Conn.ID] = rec.Conn
	case trace.KindLost:
		r.lost = rec.Lost.Count
	}
	return nil
}

// startHelper starts the test binary as the traced program in mode, following it from its
// first instruction.
func startHelper(t testing.TB, p *Probe, mode, arg string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", arg)
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	out := &bytes.Buffer{}
	cmd.Stdout = out
	cmd.Stderr = os.Stderr
	stop, err := p.FollowChildren(uint32(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	err = cmd.Start()
	if serr := stop(); serr != nil {
		t.Fatal(serr)
	}
	if err != nil {
		t.Fatal(err)
	}
	return cmd, out
}

func helperResult(t testing.TB, cmd *exec.Cmd, out *bytes.Buffer) helperCounts {
	t.Helper()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v", err)
	}
	var c helperCounts
	if err := json.Unmarshal(out.Bytes(), &c); err != nil {
		t.Fatalf("helper output %q: %v", out.String(), err)
	}
	return c
}

// recordHelper runs mode under p and returns the recording and the helper's own counts.
func recordHelper(t testing.TB, p *Probe, mode, arg string) (*recording, helperCounts) {
	t.Helper()
	cmd, out := startHelper(t, p, mode, arg)
	rec := &recording{conns: map[uint64]trace.Connection{}}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, rec.emit) }()
	c := helperResult(t, cmd, out)
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("recording did not stop when the traced program exited")
	}
	return rec, c
}

type tally struct {
	calls map[trace.Dir]int
	bytes map[trace.Dir]int64
	ops   map[string]int
}

func count(t *testing.T, rec *recording, pid int) tally {
	t.Helper()
	ty := tally{calls: map[trace.Dir]int{}, bytes: map[trace.Dir]int64{}, ops: map[string]int{}}
	for _, e := range rec.events {
		if int(e.PID) != pid {
			t.Fatalf("event of pid %d, traced only %d: %+v", e.PID, pid, e)
		}
		if e.Op == trace.OpRunnable {
			continue // a thread's, not a connection's
		}
		if _, ok := rec.conns[e.Conn]; !ok {
			t.Fatalf("event on connection %d that was never described", e.Conn)
		}
		if e.Errno != 0 || e.Bytes == 0 {
			continue
		}
		ty.calls[e.Dir]++
		ty.bytes[e.Dir] += e.Bytes
		ty.ops[e.Op.String()]++
	}
	return ty
}

func checkTotals(t *testing.T, ty tally, c helperCounts, rec *recording) {
	t.Helper()
	if ty.calls[trace.DirSend] != c.SendCalls || ty.bytes[trace.DirSend] != c.SendBytes ||
		ty.calls[trace.DirRecv] != c.RecvCalls || ty.bytes[trace.DirRecv] != c.RecvBytes {
		t.Errorf("recorded send %d calls %d bytes, recv %d calls %d bytes; the program counted send %d calls %d bytes, recv %d calls %d bytes",
			ty.calls[trace.DirSend], ty.bytes[trace.DirSend], ty.calls[trace.DirRecv], ty.bytes[trace.DirRecv],
			c.SendCalls, c.SendBytes, c.RecvCalls, c.RecvBytes)
	}
	if rec.lost != 0 {
		t.Errorf("lost %d events", rec.lost)
	}
}

// TestEveryOp checks each send/recv-family system call: counts, bytes, payload heads across
// iovecs, and that pipe I/O is not recorded.
func TestEveryOp(t *testing.T) {
	p := requireProbes(t, Config{PayloadBytes: 64})
	rec, c := recordHelper(t, p, "ops", "")
	ty := count(t, rec, c.PID)
	checkTotals(t, ty, c, rec)
	for _, op := range []string{"write", "read", "sendto", "recvfrom", "sendmsg", "recvmsg", "writev", "readv", "sendmmsg", "recvmmsg"} {
		if ty.ops[op] != opsRounds || c.Ops[op] != opsRounds {
			t.Errorf("%s: recorded %d calls, the program made %d, want %d", op, ty.ops[op], c.Ops[op], opsRounds)
		}
	}
	// What each receive reads was sent by this op.
	sender := map[trace.Op]string{trace.OpRead: "write", trace.OpRecvfrom: "sendto", trace.OpRecvmsg: "sendmsg",
		trace.OpReadv: "writev", trace.OpRecvmmsg: "sendmmsg"}
	for _, e := range rec.events {
		if e.Errno != 0 {
			continue
		}
		if f := rec.conns[e.Conn].Family; f != trace.FamilyUnix {
			t.Fatalf("event on a %s connection: only unix sockets (and a pipe) were used", f)
		}
		want := e.Op.String()
		if e.Dir == trace.DirRecv {
			want = sender[e.Op]
		}
		if !bytes.HasPrefix(e.Payload, []byte(want+"#")) {
			t.Errorf("%s payload %q does not start with %q", e.Op, e.Payload, want+"#")
		}
		first := e.Bytes
		if e.Op == trace.OpSendmmsg || e.Op == trace.OpRecvmmsg {
			first = 60 // the first datagram
		}
		if wantLen := min(64, first); int64(len(e.Payload)) != wantLen {
			t.Errorf("%s payload is %d bytes, want %d", e.Op, len(e.Payload), wantLen)
		}
		if i := bytes.IndexByte(e.Payload, '|'); i < 0 || strings.Trim(string(e.Payload[i+1:]), ".") != "" {
			t.Errorf("%s payload %q is not one message's head", e.Op, e.Payload)
		}
	}
}

// TestEchoExact records a Go echo client and server (net.Conn, so read and write on
// non-blocking sockets) for 50,000 round trips over TCP and over a unix socket: 100,000 sends
// and at least 100,000 receives, each counted by the program itself.
func TestEchoExact(t *testing.T) {
	for _, network := range []string{"tcp", "unix"} {
		t.Run(network, func(t *testing.T) {
			p := requireProbes(t, Config{})
			rec, c := recordHelper(t, p, "echo-"+network, "50000")
			ty := count(t, rec, c.PID)
			checkTotals(t, ty, c, rec)
			t.Logf("%d events, %d connections; the program: %+v", len(rec.events), len(rec.conns), c)
			if c.SendCalls < 100000 {
				t.Fatalf("the program made only %d sends", c.SendCalls)
			}
			// Both ends of the connection are described, with the addresses the program saw.
			found := 0
			for _, conn := range rec.conns {
				if network == "tcp" && conn.Family == trace.FamilyTCP &&
					(conn.Local == c.Local && conn.Remote == c.Remote || conn.Local == c.Remote && conn.Remote == c.Local) {
					found++
				}
				if network == "unix" && conn.Family == trace.FamilyUnix && (conn.Local == c.Remote || conn.Remote == c.Remote) {
					found++
				}
			}
			if found != 2 {
				t.Errorf("found %d of the 2 ends of %s %s -> %s in %+v", found, network, c.Local, c.Remote, rec.conns)
			}
			// Every TCP send, each thread's first included, starts when TCP takes it
			// (tcp_sendmsg_locked), before the peer can read its bytes: none lasts 0 ns.
			if network == "tcp" {
				zero, sends := 0, 0
				for _, e := range rec.events {
					if int(e.PID) == c.PID && e.Dir == trace.DirSend && e.Errno == 0 {
						sends++
						if e.Dur <= 0 {
							zero++
						}
					}
				}
				if sends == 0 || zero != 0 {
					t.Errorf("%d of %d TCP sends have no start time", zero, sends)
				}
			}
		})
	}
}

// TestLostExact (RELIABILITY C5): with a tiny ring and nobody reading, every event is either
// recorded or counted lost, exactly.
func TestLostExact(t *testing.T) {
	for _, ring := range []int{4096, 8192, 65536} {
		t.Run(fmt.Sprint(ring), func(t *testing.T) {
			p := requireProbes(t, Config{RingBytes: ring, PayloadBytes: 16})
			cmd, out := startHelper(t, p, "burst", "20000")
			c := helperResult(t, cmd, out) // the reader is stalled until the program is done
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			rec := &recording{conns: map[uint64]trace.Connection{}}
			if err := p.Run(ctx, rec.emit); err != nil {
				t.Fatal(err)
			}
			produced := uint64(c.SendCalls + c.RecvCalls)
			if got := uint64(len(rec.events)) + rec.lost; got != produced || rec.lost == 0 {
				t.Errorf("recorded %d + lost %d = %d, the program made %d calls (lost must be > 0 with a %d-byte ring)",
					len(rec.events), rec.lost, got, produced, ring)
			}
			n, err := p.Counts()
			if err != nil {
				t.Fatal(err)
			}
			if n.Produced != produced || n.LostEvents != rec.lost {
				t.Errorf("probe counters %+v, want produced %d lost %d", n, produced, rec.lost)
			}
		})
	}
}

// TestNoLeftoversAfterSIGKILL (RELIABILITY C3): a process holding attached probes is killed;
// the kernel must drop all its programs and links, and probes open again afterwards.
func TestNoLeftoversAfterSIGKILL(t *testing.T) {
	requireProbes(t, Config{RingBytes: 4096}).Close()
	for i := 0; i < 3; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"=hold")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var progs, links []uint32
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var kind string
			var id uint32
			if _, err := fmt.Sscan(sc.Text(), &kind, &id); err == nil {
				switch kind {
				case "prog":
					progs = append(progs, id)
				case "link":
					links = append(links, id)
				}
			}
			if sc.Text() == "ready" {
				break
			}
		}
		if len(progs) != 6 || len(links) != 6 {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("holder reported programs %v and links %v", progs, links)
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		deadline := time.Now().Add(10 * time.Second)
		for {
			alive := aliveObjects(progs, links)
			if len(alive) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after SIGKILL these remain: %v", alive)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	requireProbes(t, Config{RingBytes: 4096}).Close()
}

// aliveObjects lists which of the given program and link ids still exist with perflab names.
func aliveObjects(progs, links []uint32) []string {
	var alive []string
	for _, id := range progs {
		pr, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
		if err != nil {
			continue
		}
		if info, err := pr.Info(); err == nil && strings.HasPrefix(info.Name, ProgramPrefix) {
			alive = append(alive, fmt.Sprintf("program %d %s", id, info.Name))
		}
		pr.Close()
	}
	for _, id := range links {
		l, err := link.NewFromID(link.ID(id))
		if err != nil {
			continue
		}
		alive = append(alive, fmt.Sprintf("link %d", id))
		l.Close()
	}
	return alive
}

// holdProbes is the process killed by TestNoLeftoversAfterSIGKILL: it attaches probes, prints
// their ids and waits to be killed.
func holdProbes() error {
	p, err := Open(Config{RingBytes: 4096})
	if err != nil {
		return err
	}
	for _, np := range p.programs() {
		info, err := np.prog.Info()
		if err != nil {
			return err
		}
		id, _ := info.ID()
		fmt.Printf("prog %d\n", id)
	}
	for _, l := range p.links {
		info, err := l.Info()
		if err != nil {
			return err
		}
		fmt.Printf("link %d\n", info.ID)
	}
	fmt.Println("ready")
	time.Sleep(time.Minute)
	return errors.New("not killed")
}

// TestLoadObjectSharesMaps loads a second object the way a part switched on by its flag is
// loaded (here the base object's empty program on its own): it gets the base object's ring
// buffer, targets and counters, not copies, its tracepoint program is attached and detached
// with the others, and records of a kind it registers reach its decoder.
func TestLoadObjectSharesMaps(t *testing.T) {
	p := requireProbes(t, Config{PayloadBytes: -1})
	spec, err := loadRecord()
	if err != nil {
		t.Fatal(err)
	}
	for name := range spec.Programs {
		if name != "perflab_nop" {
			delete(spec.Programs, name)
		}
	}
	links := len(p.links)
	coll, err := p.loadObject(spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.links) != links+1 || p.hooks[len(p.hooks)-1] != "tp_btf/sock_send_length" {
		t.Errorf("links %d → %d, hooks %v: the part's program is not attached", links, len(p.links), p.hooks)
	}
	for name, base := range p.sharedMaps() {
		bi, err := base.Info()
		if err != nil {
			t.Fatal(err)
		}
		pi, err := coll.Maps[name].Info()
		if err != nil {
			t.Fatal(err)
		}
		bid, _ := bi.ID()
		pid, _ := pi.ID()
		if bid != pid {
			t.Errorf("%s: the part has map %d, the base object %d", name, pid, bid)
		}
	}
	var got []byte
	p.registerKind(200, func(b []byte, out *trace.Record, emit func(*trace.Record) error) error {
		got = b
		return nil
	})
	var out trace.Record
	if err := p.handle([]byte{200, 1, 2}, &out, func(*trace.Record) error { return nil }); err != nil || len(got) != 3 || p.bad != 0 {
		t.Errorf("a registered kind: decoder saw %v, err %v, %d bad records", got, err, p.bad)
	}
	if err := p.handle([]byte{201}, &out, func(*trace.Record) error { return nil }); err != nil || p.bad != 1 {
		t.Errorf("an unknown kind: err %v, %d bad records, want 1", err, p.bad)
	}
}

// TestLateTarget: a process that was making socket calls before it became a target (so the
// programs have remembered it as not one) is recorded from AddPID on.
func TestLateTarget(t *testing.T) {
	p := requireProbes(t, Config{PayloadBytes: -1})
	cmd := exec.Command(os.Args[0], "-test.run=^$", "100000000")
	cmd.Env = append(os.Environ(), helperEnv+"=burst")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	time.Sleep(200 * time.Millisecond) // its calls go through the hooks as another process's
	if err := p.AddPID(uint32(cmd.Process.Pid)); err != nil {
		t.Fatal(err)
	}
	rec := &recording{conns: map[uint64]trace.Connection{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, rec.emit) }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c, err := p.Counts()
		if err != nil {
			t.Fatal(err)
		}
		if c.Produced >= 1000 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range rec.events {
		if e.PID == uint32(cmd.Process.Pid) {
			n++
		}
	}
	if n < 1000 {
		t.Errorf("%d events of the late target, want at least 1000", n)
	}
}
