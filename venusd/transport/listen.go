package transport

import (
	"context"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/perflab/perflab/trace"
)

// Listen binds a: a tcp listener whose socket buffers are bufBytes before listen (accepted
// sockets inherit them, and with them the window scale of the handshake); a unix socket file
// only its owner may use; for shm, the Unix socket in the abstract namespace that clients hand
// their rings to.
func Listen(a Addr, bufBytes int) (net.Listener, error) {
	switch a.Transport {
	case "tcp":
		lc := net.ListenConfig{Control: bufferControl(bufBytes)}
		return lc.Listen(context.Background(), "tcp", a.Where)
	case "unix":
		old := syscall.Umask(0o077)
		ln, err := net.Listen("unix", a.Where)
		syscall.Umask(old)
		if err != nil {
			return nil, err
		}
		if err := os.Chmod(a.Where, 0o600); err != nil {
			ln.Close()
			return nil, err
		}
		return ln, nil
	case "shm":
		return net.Listen("unix", ShmSocketName(a.Where))
	}
	return nil, fmt.Errorf("listen %s: unknown transport", a)
}

// AcceptOptions are what Accept needs beyond the accepted socket.
type AcceptOptions struct {
	BufBytes  int           // SO_SNDBUF and SO_RCVBUF of a tcp socket, bytes; 0 leaves the listener's
	ShmSpin   int           // polls of an shm ring before sleeping; 0 is the default
	Handshake time.Duration // how long the shm handshake may take
}

// Accept sets up the transport of a socket that a listener of a accepted: the shm handshake
// (receiving, checking and mapping the client's rings), or TCP tuning. The caller closes raw
// when it fails.
func Accept(raw net.Conn, a Addr, o AcceptOptions) (Conn, error) {
	fam := trace.FamilyUnix
	switch a.Transport {
	case "shm":
		return acceptShm(raw.(*net.UnixConn), a.Where, o.ShmSpin, o.Handshake)
	case "tcp":
		if err := tuneTCP(raw.(*net.TCPConn), o.BufBytes); err != nil {
			return nil, err
		}
		fam = trace.FamilyTCP
	}
	c, err := newSockConn(raw, fam)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// CheckPeer admits only this process's user on Unix and shm sockets (SO_PEERCRED); root may
// connect too. A tcp connection passes.
func CheckPeer(nc net.Conn) error {
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		return nil
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return err
	}
	var cred *syscall.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if cerr != nil {
		return fmt.Errorf("peer credentials: %w", cerr)
	}
	if cred.Uid != uint32(os.Getuid()) && cred.Uid != 0 {
		return fmt.Errorf("peer uid %d is not this server's uid %d", cred.Uid, os.Getuid())
	}
	return nil
}
