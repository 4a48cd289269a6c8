package transport

import (
	"context"
	"net"
	"syscall"
	"testing"
)

// Both ends of a tcp connection have TCP_NODELAY and the socket buffers asked for: the dialled
// socket, and the accepted one through its listener.
func TestTCPSocketOptions(t *testing.T) {
	const buf = 256 << 10
	a, err := ParseAddr("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen(a, buf)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a.Where = ln.Addr().String()
	accepted := make(chan Conn, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		c, err := Accept(nc, a, AcceptOptions{BufBytes: buf})
		if err != nil {
			nc.Close()
		}
		accepted <- c
	}()
	c, err := Dial(context.Background(), a, DialOptions{BufBytes: buf})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := <-accepted
	if s == nil {
		t.Fatal("accept failed")
	}
	defer s.Close()
	for _, end := range []struct {
		name string
		c    Conn
	}{{"dialled", c}, {"accepted", s}} {
		if end.c.Family() != a.Family() {
			t.Errorf("%s: family %v, want %v", end.name, end.c.Family(), a.Family())
		}
		rc, err := end.c.(*sockConn).nc.(*net.TCPConn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var got int
		rc.Control(func(fd uintptr) { got, err = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF) })
		if err != nil || got < buf || got > 2*buf+4096 { // Linux doubles the value asked for
			t.Errorf("%s: SO_RCVBUF %d, %v; want about 2×256KiB", end.name, got, err)
		}
		rc.Control(func(fd uintptr) { got, err = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_NODELAY) })
		if err != nil || got != 1 {
			t.Errorf("%s: TCP_NODELAY %d, %v", end.name, got, err)
		}
	}
}

// SocketBuffer takes an explicit size, else VENUS_SOCKET_BUFFER_BYTES, else the default; a bad
// value is refused.
func TestSocketBuffer(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "VENUS_SOCKET_BUFFER_BYTES" {
				return v
			}
			return ""
		}
	}
	for _, tc := range []struct {
		explicit int
		env      string
		want     int
		ok       bool
	}{
		{0, "1MiB", 1 << 20, true},
		{0, "", DefaultSocketBufferBytes, true},
		{4096, "1MiB", 4096, true},
		{0, "big", 0, false},
		{0, "0", 0, false},
		{0, "2GiB", 0, false},
	} {
		n, err := SocketBuffer(tc.explicit, env(tc.env))
		if (err == nil) != tc.ok || n != tc.want {
			t.Errorf("SocketBuffer(%d, %q) = %d, %v; want %d, ok %v", tc.explicit, tc.env, n, err, tc.want, tc.ok)
		}
	}
}
