package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/perflab/perflab/venusd/link"
)

// serverEnv, set to a socket path, makes the binary the echo server.
const serverEnv = "WAKEGAP_SERVER"

// msgBytes is the size of a request and of its reply: the server's two timestamps at 8 and 16.
const msgBytes = 64

// mono reads CLOCK_MONOTONIC, ns: the clock both processes share.
func mono() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// serve listens on path, says "ready" on out, and echoes messages of one connection, each
// stamped with when its read returned and when its write began.
func serve(path string, out io.Writer) error {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("listen %s: %w", path, err)
	}
	defer ln.Close()
	fmt.Fprintln(out, "ready")
	c, err := ln.Accept()
	if err != nil {
		return fmt.Errorf("accept: %w", err)
	}
	defer c.Close()
	b := make([]byte, msgBytes)
	for {
		if _, err := io.ReadFull(c, b); err != nil {
			if err == io.EOF {
				return nil
			}
			return fmt.Errorf("read: %w", err)
		}
		binary.LittleEndian.PutUint64(b[8:], uint64(mono()))
		binary.LittleEndian.PutUint64(b[16:], uint64(mono()))
		if _, err := c.Write(b); err != nil {
			return fmt.Errorf("write: %w", err)
		}
	}
}

// row is what one gap and way of waiting measured: medians, µs.
type row struct {
	gap                 time.Duration
	wait                string // "link" or "sleep"
	rtt, server, client float64
}

// waits are the ways the client waits a gap.
var waits = []struct {
	name string
	wait func(time.Duration)
}{
	{"link", func(d time.Duration) { link.SleepUntil(time.Now().Add(d)) }},
	{"sleep", func(d time.Duration) {
		ts := unix.NsecToTimespec(int64(d))
		for unix.Nanosleep(&ts, &ts) == unix.EINTR {
		}
	}},
}

// measure starts the server process and runs n round trips per gap and way of waiting, in
// three interleaved rounds, from one locked thread with blocking system calls.
func measure(n int, gaps []time.Duration) ([]row, error) {
	dir, err := os.MkdirTemp("", "wakegap")
	if err != nil {
		return nil, fmt.Errorf("make socket directory: %w", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "s")
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own binary: %w", err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), serverEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start server: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start server: %w", err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		return nil, fmt.Errorf("server did not start: %q, %v", line, err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		return nil, fmt.Errorf("connect %s: %w", path, err)
	}
	type key struct {
		gap  time.Duration
		wait string
	}
	samples := map[key]*[3][]float64{}
	b := make([]byte, msgBytes)
	for round := 0; round < 3; round++ {
		for _, g := range gaps {
			for _, w := range waits {
				s := samples[key{g, w.name}]
				if s == nil {
					s = new([3][]float64)
					samples[key{g, w.name}] = s
				}
				for i := 0; i < n; i++ {
					w.wait(g)
					t0 := mono()
					if err := full(fd, b, unix.Write); err != nil {
						return nil, fmt.Errorf("write: %w", err)
					}
					if err := full(fd, b, unix.Read); err != nil {
						return nil, fmt.Errorf("read: %w", err)
					}
					t3 := mono()
					t1, t2 := int64(binary.LittleEndian.Uint64(b[8:])), int64(binary.LittleEndian.Uint64(b[16:]))
					s[0] = append(s[0], float64(t3-t0)/1e3)
					s[1] = append(s[1], float64(t1-t0)/1e3)
					s[2] = append(s[2], float64(t3-t2)/1e3)
				}
			}
		}
	}
	var rows []row
	for _, g := range gaps {
		for _, w := range waits {
			s := samples[key{g, w.name}]
			rows = append(rows, row{gap: g, wait: w.name, rtt: median(s[0]), server: median(s[1]), client: median(s[2])})
		}
	}
	return rows, nil
}

// full moves all of b through op (unix.Read or unix.Write) on fd.
func full(fd int, b []byte, op func(int, []byte) (int, error)) error {
	for len(b) > 0 {
		k, err := op(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if k == 0 {
			return io.ErrUnexpectedEOF
		}
		b = b[k:]
	}
	return nil
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// parseGaps reads comma-separated gaps in µs.
func parseGaps(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		us, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || us < 0 || us > 1e6 {
			return nil, fmt.Errorf("-gaps %q: want µs from 0 to 1000000, comma-separated", s)
		}
		out = append(out, time.Duration(us)*time.Microsecond)
	}
	return out, nil
}

// writeTable writes the rows as a table.
func writeTable(w io.Writer, rows []row) {
	fmt.Fprintf(w, "%8s %6s %9s %13s %13s   (medians, µs; load %s)\n", "gap µs", "wait", "rtt", "server wake", "client wake", loadavg())
	for _, r := range rows {
		fmt.Fprintf(w, "%8.0f %6s %9.1f %13.1f %13.1f\n", float64(r.gap)/1e3, r.wait, r.rtt, r.server, r.client)
	}
}

// loadavg is the 1-minute load average, "?" when unknown.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}
