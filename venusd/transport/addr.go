package transport

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/perflab/perflab/trace"
)

// Addr is a parsed venusd address.
type Addr struct {
	Transport string // "tcp", "unix" or "shm"
	// Where is HOST:PORT for tcp, the socket path for unix, the ring name for shm.
	Where string
}

// String returns the address in URL form: tcp://127.0.0.1:5556, unix:///run/v.sock, shm:///name.
func (a Addr) String() string {
	if a.Transport == "tcp" {
		return "tcp://" + a.Where
	}
	if a.Transport == "shm" {
		return "shm:///" + a.Where
	}
	return a.Transport + "://" + a.Where
}

// Family returns the trace family of the transport.
func (a Addr) Family() trace.Family {
	switch a.Transport {
	case "tcp":
		return trace.FamilyTCP
	case "unix":
		return trace.FamilyUnix
	case "shm":
		return trace.FamilySHM
	}
	return trace.FamilyUnknown
}

// ParseAddr parses tcp://HOST:PORT, unix:///PATH (or unix://PATH), or shm:///NAME, where NAME
// is 1 to 64 letters, digits, '.', '_' or '-'.
func ParseAddr(s string) (Addr, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return Addr{}, fmt.Errorf("address %q: want tcp://HOST:PORT, unix:///PATH or shm:///NAME", s)
	}
	switch scheme {
	case "tcp":
		host, port, err := net.SplitHostPort(rest)
		if err != nil || port == "" {
			return Addr{}, fmt.Errorf("address %q: want tcp://HOST:PORT", s)
		}
		return Addr{Transport: "tcp", Where: net.JoinHostPort(host, port)}, nil
	case "unix":
		if rest == "" || rest == "/" {
			return Addr{}, fmt.Errorf("address %q: want unix:///PATH", s)
		}
		return Addr{Transport: "unix", Where: rest}, nil
	case "shm":
		name := strings.TrimPrefix(rest, "/")
		if !validShmName(name) {
			return Addr{}, fmt.Errorf("address %q: shm name must be 1-64 of [A-Za-z0-9._-]", s)
		}
		return Addr{Transport: "shm", Where: name}, nil
	}
	return Addr{}, fmt.Errorf("address %q: unknown transport %q (want tcp, unix or shm)", s, scheme)
}

func validShmName(n string) bool {
	if n == "" || len(n) > 64 || n == "." || n == ".." {
		return false
	}
	for _, c := range n {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

// IsLoopback reports whether a tcp address binds only loopback interfaces ("localhost",
// 127.0.0.0/8, ::1). Unix and shm addresses are local by nature.
func (a Addr) IsLoopback() bool {
	if a.Transport != "tcp" {
		return true
	}
	host, _, err := net.SplitHostPort(a.Where)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
