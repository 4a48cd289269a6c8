//go:build linux && amd64

package probes

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"unsafe"
)

// The test binary doubles as the traced program: run with PERFLAB_PROBES_HELPER=MODE it plays
// MODE and prints its own counters as JSON on stdout instead of running the tests.
const helperEnv = "PERFLAB_PROBES_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		if err := runHelper(mode, os.Args[len(os.Args)-1]); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// helperCounts is what a helper reports about its own socket calls.
type helperCounts struct {
	PID       int            `json:"pid"`
	SendCalls int            `json:"send_calls"` // successful send-family calls that moved bytes
	RecvCalls int            `json:"recv_calls"` // successful receive-family calls that moved bytes
	SendBytes int64          `json:"send_bytes"`
	RecvBytes int64          `json:"recv_bytes"`
	Ops       map[string]int `json:"ops,omitempty"` // successful calls per op name
	Local     string         `json:"local,omitempty"`
	Remote    string         `json:"remote,omitempty"`
}

func runHelper(mode, arg string) error {
	c := helperCounts{PID: os.Getpid(), Ops: map[string]int{}}
	var err error
	switch mode {
	case "hold":
		return holdProbes()
	case "ops":
		err = helperOps(&c)
	case "waits":
		err = helperWaits(&c)
	case "burst":
		n, _ := strconv.Atoi(arg)
		err = helperBurst(&c, n)
	case "echo-tcp", "echo-unix":
		n, _ := strconv.Atoi(arg)
		err = helperEcho(&c, mode[5:], n)
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(c)
}

func (c *helperCounts) sent(op string, n int) {
	if n > 0 {
		c.SendCalls++
		c.SendBytes += int64(n)
		c.Ops[op]++
	}
}

func (c *helperCounts) recvd(op string, n int) {
	if n > 0 {
		c.RecvCalls++
		c.RecvBytes += int64(n)
		c.Ops[op]++
	}
}

// msg returns a message whose first bytes name the op and the index, padded to size.
func msg(op string, i, size int) []byte {
	b := make([]byte, size)
	for j := range b {
		b[j] = '.'
	}
	copy(b, fmt.Sprintf("%s#%d|", op, i))
	return b
}

const opsRounds = 50

// helperOps makes every send/recv-family system call on blocking sockets, opsRounds times
// each, plus reads and writes on a pipe that must not be recorded.
func helperOps(c *helperCounts) error {
	sp, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	a, b := sp[0], sp[1]
	dg, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_DGRAM, 0)
	if err != nil {
		return err
	}
	var pipe [2]int
	if err := syscall.Pipe(pipe[:]); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	buf2 := make([]byte, 4096)
	for i := 0; i < opsRounds; i++ {
		// write / read
		n, err := syscall.Write(a, msg("write", i, 100))
		if err != nil {
			return fmt.Errorf("write: %w", err)
		}
		c.sent("write", n)
		if n, err = syscall.Read(b, buf[:100]); err != nil {
			return fmt.Errorf("read: %w", err)
		}
		c.recvd("read", n)
		// sendto / recvfrom
		if err = syscall.Sendto(a, msg("sendto", i, 80), 0, nil); err != nil {
			return fmt.Errorf("sendto: %w", err)
		}
		c.sent("sendto", 80)
		if n, _, err = syscall.Recvfrom(b, buf[:80], 0); err != nil {
			return fmt.Errorf("recvfrom: %w", err)
		}
		c.recvd("recvfrom", n)
		// sendmsg / recvmsg with two iovecs each
		m := msg("sendmsg", i, 120)
		if n, err = sendmsg(a, m[:5], m[5:]); err != nil {
			return fmt.Errorf("sendmsg: %w", err)
		}
		c.sent("sendmsg", n)
		if n, err = recvmsg(b, buf[:7], buf2[:113]); err != nil {
			return fmt.Errorf("recvmsg: %w", err)
		}
		c.recvd("recvmsg", n)
		// writev / readv with three iovecs
		m = msg("writev", i, 90)
		if n, err = rwv(syscall.SYS_WRITEV, a, m[:3], m[3:10], m[10:]); err != nil {
			return fmt.Errorf("writev: %w", err)
		}
		c.sent("writev", n)
		if n, err = rwv(syscall.SYS_READV, b, buf[:2], buf2[:88]); err != nil {
			return fmt.Errorf("readv: %w", err)
		}
		c.recvd("readv", n)
		// sendmmsg / recvmmsg: two datagrams per call
		m1, m2 := msg("sendmmsg", i, 60), msg("sendmmsg", i+1000, 70)
		cnt, bytes, err := mmsg(307, dg[0], [][]byte{m1, m2})
		if err != nil {
			return fmt.Errorf("sendmmsg: %w", err)
		}
		if cnt != 2 {
			return fmt.Errorf("sendmmsg sent %d messages", cnt)
		}
		c.sent("sendmmsg", bytes)
		if cnt, bytes, err = mmsg(299, dg[1], [][]byte{buf[:60], buf2[:70]}); err != nil {
			return fmt.Errorf("recvmmsg: %w", err)
		}
		if cnt != 2 {
			return fmt.Errorf("recvmmsg received %d messages", cnt)
		}
		c.recvd("recvmmsg", bytes)
		// A pipe is no socket: never recorded.
		if _, err := syscall.Write(pipe[1], m1); err != nil {
			return err
		}
		if _, err := syscall.Read(pipe[0], buf); err != nil {
			return err
		}
	}
	for _, fd := range []int{a, b, dg[0], dg[1], pipe[0], pipe[1]} {
		syscall.Close(fd)
	}
	return nil
}

type iovec struct {
	base *byte
	len  uint64
}

func iovs(bufs ...[]byte) []iovec {
	v := make([]iovec, len(bufs))
	for i, b := range bufs {
		v[i] = iovec{&b[0], uint64(len(b))}
	}
	return v
}

func sendmsg(fd int, bufs ...[]byte) (int, error) {
	v := iovs(bufs...)
	h := syscall.Msghdr{Iov: (*syscall.Iovec)(unsafe.Pointer(&v[0])), Iovlen: uint64(len(v))}
	n, _, e := syscall.Syscall(syscall.SYS_SENDMSG, uintptr(fd), uintptr(unsafe.Pointer(&h)), 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

func recvmsg(fd int, bufs ...[]byte) (int, error) {
	v := iovs(bufs...)
	h := syscall.Msghdr{Iov: (*syscall.Iovec)(unsafe.Pointer(&v[0])), Iovlen: uint64(len(v))}
	n, _, e := syscall.Syscall(syscall.SYS_RECVMSG, uintptr(fd), uintptr(unsafe.Pointer(&h)), syscall.MSG_WAITALL)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

func rwv(nr uintptr, fd int, bufs ...[]byte) (int, error) {
	v := iovs(bufs...)
	n, _, e := syscall.Syscall(nr, uintptr(fd), uintptr(unsafe.Pointer(&v[0])), uintptr(len(v)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

type mmsghdr struct {
	hdr syscall.Msghdr
	len uint32
	_   uint32
}

// mmsg calls sendmmsg (307) or recvmmsg (299) with one buffer per message and returns the
// messages and bytes moved.
func mmsg(nr uintptr, fd int, bufs [][]byte) (int, int, error) {
	v := iovs(bufs...)
	h := make([]mmsghdr, len(bufs))
	for i := range h {
		h[i].hdr.Iov = (*syscall.Iovec)(unsafe.Pointer(&v[i]))
		h[i].hdr.Iovlen = 1
	}
	n, _, e := syscall.Syscall6(nr, uintptr(fd), uintptr(unsafe.Pointer(&h[0])), uintptr(len(h)), 0, 0, 0)
	if e != 0 {
		return 0, 0, e
	}
	bytes := 0
	for i := 0; i < int(n); i++ {
		bytes += int(h[i].len)
	}
	return int(n), bytes, nil
}

// helperBurst writes and reads n 16-byte messages over a blocking socket pair: exactly 2n
// socket system calls.
func helperBurst(c *helperCounts, n int) error {
	sp, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	buf := make([]byte, 16)
	m := msg("burst", 0, 16)
	for i := 0; i < n; i++ {
		w, err := syscall.Write(sp[0], m)
		if err != nil {
			return err
		}
		c.sent("write", w)
		r, err := syscall.Read(sp[1], buf)
		if err != nil {
			return err
		}
		c.recvd("read", r)
	}
	syscall.Close(sp[0])
	syscall.Close(sp[1])
	return nil
}

// helperEcho runs a Go echo server and client in this process over network ("tcp" or
// "unix") for n round trips of 64-byte messages, counting every Read and Write that moved
// bytes on both sides.
func helperEcho(c *helperCounts, network string, n int) error {
	addr := "127.0.0.1:0"
	if network == "unix" {
		dir, err := os.MkdirTemp("", "perflab-echo")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		addr = filepath.Join(dir, "echo.sock")
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	type counts struct {
		sendCalls, recvCalls int
		sendBytes, recvBytes int64
	}
	srvDone := make(chan counts, 1)
	srvErr := make(chan error, 1)
	go func() {
		var sc counts
		conn, err := ln.Accept()
		if err != nil {
			srvErr <- err
			return
		}
		defer conn.Close()
		buf := make([]byte, 4096)
		for {
			r, err := conn.Read(buf)
			if r > 0 {
				sc.recvCalls++
				sc.recvBytes += int64(r)
				w, err := conn.Write(buf[:r])
				if err != nil {
					srvErr <- err
					return
				}
				sc.sendCalls++
				sc.sendBytes += int64(w)
			}
			if err == io.EOF {
				srvDone <- sc
				return
			}
			if err != nil {
				srvErr <- err
				return
			}
		}
	}()
	conn, err := net.Dial(network, ln.Addr().String())
	if err != nil {
		return err
	}
	c.Local, c.Remote = conn.LocalAddr().String(), conn.RemoteAddr().String()
	m := msg("echo", 0, 64)
	buf := make([]byte, 64)
	for i := 0; i < n; i++ {
		w, err := conn.Write(m)
		if err != nil {
			return err
		}
		c.sent("write", w)
		for got := 0; got < len(m); {
			r, err := conn.Read(buf[got:])
			if err != nil {
				return err
			}
			c.recvd("read", r)
			got += r
		}
	}
	conn.Close()
	select {
	case sc := <-srvDone:
		c.SendCalls += sc.sendCalls
		c.RecvCalls += sc.recvCalls
		c.SendBytes += sc.sendBytes
		c.RecvBytes += sc.recvBytes
	case err := <-srvErr:
		return err
	}
	return nil
}
