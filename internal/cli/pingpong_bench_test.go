//go:build linux

package cli

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pingPongEnv makes the test binary one half of tcpPingPong: "server N" echoes N messages on the
// connection it accepts from the listener it inherits (fd 3); "client ADDR N" sends them and
// prints the ns the N round trips took.
const pingPongEnv = "PERFLAB_CLI_PINGPONG"

func init() {
	v := os.Getenv(pingPongEnv)
	if v == "" {
		return
	}
	f := strings.Fields(v)
	n, _ := strconv.Atoi(f[len(f)-1])
	var err error
	switch f[0] {
	case "server":
		err = pingPongServer(n)
	case "client":
		err = pingPongClient(f[1], n)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ping-pong:", err)
		os.Exit(3)
	}
	os.Exit(0)
}

// tcpConnect opens a blocking TCP socket to addr ("127.0.0.1:port") with raw system calls, so
// that each message is exactly one write and one read, as in sockperf's ping-pong.
func tcpConnect(addr string) (int, error) {
	ap, err := net.ResolveTCPAddr("tcp4", addr)
	if err != nil {
		return -1, err
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		return -1, err
	}
	syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1)
	sa := &syscall.SockaddrInet4{Port: ap.Port}
	copy(sa.Addr[:], ap.IP.To4())
	if err := syscall.Connect(fd, sa); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	return fd, nil
}

// pingPongServer accepts one connection on the listener at fd 3 and echoes n 64-byte
// messages.
func pingPongServer(n int) error {
	fd, _, err := syscall.Accept(3)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1)
	buf := make([]byte, 64)
	for i := 0; i < n; i++ {
		if err := readFull(fd, buf); err != nil {
			return err
		}
		if _, err := syscall.Write(fd, buf); err != nil {
			return err
		}
	}
	return nil
}

// pingPongClient connects to addr, makes n round trips of 64-byte messages and prints the ns
// they took.
func pingPongClient(addr string, n int) error {
	fd, err := tcpConnect(addr)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	msg := make([]byte, 64)
	start := time.Now()
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint64(msg, uint64(i))
		if _, err := syscall.Write(fd, msg); err != nil {
			return err
		}
		if err := readFull(fd, msg); err != nil {
			return err
		}
	}
	fmt.Println(int64(time.Since(start)))
	return nil
}

func readFull(fd int, b []byte) error {
	for got := 0; got < len(b); {
		r, err := syscall.Read(fd, b[got:])
		if err != nil {
			return err
		}
		if r == 0 {
			return fmt.Errorf("peer closed after %d of %d bytes", got, len(b))
		}
		got += r
	}
	return nil
}

// tcpPingPong runs n round trips of 64-byte messages over loopback TCP between two child
// processes, a client and a server, with blocking sockets and raw system calls (one write and
// one read a message, as sockperf's ping-pong), and returns the round trips per second and
// the CPU time (user + system) of the two per round trip. Neither is a target of any
// recording, and neither shares a process with the recorder.
func tcpPingPong(b *testing.B, n int) (perSec float64, cpuPerRT time.Duration) {
	b.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	lf, err := ln.(*net.TCPListener).File()
	ln.Close()
	if err != nil {
		b.Fatal(err)
	}
	srv := exec.Command(os.Args[0], "-test.run=^$")
	srv.Env = append(os.Environ(), fmt.Sprintf("%s=server %d", pingPongEnv, n))
	srv.ExtraFiles = []*os.File{lf}
	srv.Stderr = os.Stderr
	err = srv.Start()
	lf.Close()
	if err != nil {
		b.Fatal(err)
	}
	cli := exec.Command(os.Args[0], "-test.run=^$")
	cli.Env = append(os.Environ(), fmt.Sprintf("%s=client %s %d", pingPongEnv, ln.Addr(), n))
	cli.Stderr = os.Stderr
	out, cerr := cli.Output()
	serr := srv.Wait()
	if cerr != nil || serr != nil {
		b.Fatalf("ping-pong: client %v, server %v", cerr, serr)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil || ns <= 0 {
		b.Fatalf("ping-pong client printed %q", out)
	}
	cpu := cli.ProcessState.UserTime() + cli.ProcessState.SystemTime() + srv.ProcessState.UserTime() + srv.ProcessState.SystemTime()
	return float64(n) / (float64(ns) / 1e9), cpu / time.Duration(n)
}

// loadAverage returns the one-minute load average, or -1.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f, _, _ := strings.Cut(string(b), " ")
	v, err := strconv.ParseFloat(f, 64)
	if err != nil {
		return -1
	}
	return v
}
