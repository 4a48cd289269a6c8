//go:build linux

package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/perflab/perflab/trace"
)

// TestLiveViewRoundTrips: the live view counts messages and bytes per connection, and round
// trips as a send (or run of sends) followed by a receive, RTT from the first send's start to
// the receive's end; failed calls and empty reads count for nothing.
func TestLiveViewRoundTrips(t *testing.T) {
	v := newLiveView(&Env{Stdout: &bytes.Buffer{}}, "msgs")
	v.add(&trace.Record{Kind: trace.KindConnection, Conn: trace.Connection{ID: 1, Family: trace.FamilyTCP}})
	v.add(&trace.Record{Kind: trace.KindConnection, Conn: trace.Connection{ID: 2, Family: trace.FamilyUnix}})
	ev := func(conn uint64, dir trace.Dir, ts, dur, n int64, errno uint32) {
		v.add(&trace.Record{Kind: trace.KindEvent, Event: trace.Event{Conn: conn, Dir: dir, TS: ts, Dur: dur, Bytes: n, Errno: errno}})
	}
	// Connection 1: three round trips of 10, 20 and 30 µs, one of them with two sends and an
	// EAGAIN before its reply.
	ev(1, trace.DirSend, 0, 1000, 100, 0)
	ev(1, trace.DirRecv, 5000, 5000, 50, 0)
	ev(1, trace.DirSend, 20000, 1000, 100, 0)
	ev(1, trace.DirSend, 22000, 1000, 100, 0)
	ev(1, trace.DirRecv, 30000, 0, 0, 11)
	ev(1, trace.DirRecv, 39000, 1000, 50, 0)
	ev(1, trace.DirSend, 50000, 1000, 100, 0)
	ev(1, trace.DirRecv, 79000, 1000, 50, 0)
	// Connection 2: a server's view, receive first: one round trip (its reply, then the next
	// request), more bytes than connection 1.
	ev(2, trace.DirRecv, 0, 1000, 4000, 0)
	ev(2, trace.DirSend, 2000, 1000, 4000, 0)
	ev(2, trace.DirRecv, 9000, 1000, 4000, 0)
	rows, all := v.roll(1)
	if len(rows) != 2 || rows[0].conn.ID != 1 {
		t.Fatalf("rows %+v: want connection 1 first (most messages)", rows)
	}
	r := rows[0]
	if r.msgs != 7 || r.bytes != 550 || r.rt != 3 || r.p50 != 20000 || r.p99 != 30000 {
		t.Errorf("connection 1: %+v, want 7 msgs, 550 bytes, 3 round trips, p50 20µs, p99 30µs", r)
	}
	if rows[1].rt != 1 || rows[1].p50 != 8000 {
		t.Errorf("connection 2: %+v, want 1 round trip of 8µs", rows[1])
	}
	if len(all) != 4 {
		t.Errorf("%d round trips in all, want 4", len(all))
	}
	v.sortBy = sortIndex("bytes")
	ev(1, trace.DirSend, 90000, 1000, 10, 0)
	ev(2, trace.DirSend, 90000, 1000, 10000, 0)
	rows, _ = v.roll(1)
	if len(rows) != 2 || rows[0].conn.ID != 2 {
		t.Errorf("sorted by bytes: %+v, want connection 2 first", rows)
	}
	if rows, _ = v.roll(1); len(rows) != 0 {
		t.Errorf("a quiet second shows %d rows", len(rows))
	}
}

// TestTopLines: without a terminal, perflab top prints one line per second, and without -o
// writes no trace.
func TestTopLines(t *testing.T) {
	requireRecord(t)
	dir := t.TempDir()
	cmd := perflab(t, filepath.Join(dir, "counts.json"), append([]string{"top", "--duration", "2500ms", "--"}, withEnv("forever")...)...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("top: %v; stderr %q", err, stderr.String())
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		if strings.HasPrefix(l, "top ") {
			lines = append(lines, l)
		}
	}
	if len(lines) < 2 {
		t.Fatalf("%d lines in 2.5 s, want one a second: %q", len(lines), stdout.String())
	}
	if !strings.Contains(lines[1], "msgs/s") || !strings.Contains(lines[1], "round trips/s") || strings.Contains(lines[1], " 0 msgs/s") {
		t.Errorf("line %q: want the target's messages and round trips", lines[1])
	}
	if strings.Contains(stderr.String(), "trace written") {
		t.Errorf("top without -o wrote a trace: %q", stderr.String())
	}
	if entries, _ := os.ReadDir(dir); len(entries) > 1 {
		t.Errorf("files left in the directory: %v", entries)
	}
}

// openPTY opens a pseudo-terminal pair.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

// TestTopTerminal runs perflab top on a real pseudo-terminal: it redraws a table of the
// target's connections every second, a key changes the sort, q quits with exit 0, and the
// trace given with -o is complete.
func TestTopTerminal(t *testing.T) {
	requireRecord(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "top.plt")
	master, tty := openPTY(t)
	defer master.Close()
	cmd := perflab(t, filepath.Join(dir, "counts.json"), append([]string{"top", "-o", out, "--"}, withEnv("forever")...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	t.Cleanup(func() { killTargets(t, out) })
	var mu sync.Mutex
	var screen bytes.Buffer
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := master.Read(b)
			mu.Lock()
			screen.Write(b[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	waitFor := func(what string, ok func(s string) bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			mu.Lock()
			s := screen.String()
			mu.Unlock()
			if ok(s) {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		cmd.Process.Kill()
		t.Fatalf("no %s on the terminal after 20 s: %q", what, screen.String())
	}
	// A frame with the table and a unix connection of the target with messages.
	waitFor("table of the target's connections", func(s string) bool {
		i := strings.LastIndex(s, "\x1b[H\x1b[2J")
		return i >= 0 && strings.Contains(s[i:], "RTT P50") && strings.Contains(s[i:], " unix ") && strings.Contains(s[i:], "sorted by msgs")
	})
	master.Write([]byte("b"))
	waitFor("sort by bytes", func(s string) bool { return strings.Contains(s, "sorted by bytes") })
	master.Write([]byte("q"))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			mu.Lock()
			t.Fatalf("top after q: %v; terminal %q", err, screen.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("top still running 20 s after q")
	}
	f, err := trace.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if f.Footer == nil || len(f.Events) == 0 {
		t.Errorf("trace after q: footer %v, %d events", f.Footer, len(f.Events))
	}
}
