package venusd

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/perflab/perflab/venusd/transport"
	"github.com/perflab/perflab/venusd/wire"
)

func pingOnce(t *testing.T, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := RunWorkload(ctx, ClientConfig{Connect: addr, Workload: "ping", Ping: PingConfig{Requests: 10, Warmup: 1}, Getenv: noEnv}); err != nil {
		t.Fatalf("ping %s: %v", addr, err)
	}
}

// sendHello dials the shm server's socket and sends a handshake with an optional file.
func sendHello(t *testing.T, name string, magic uint32, ring uint64, fileSize int64, withFile bool) error {
	uc, err := net.Dial("unix", transport.ShmSocketName(name))
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	var hello [16]byte
	binary.LittleEndian.PutUint32(hello[0:], magic)
	binary.LittleEndian.PutUint32(hello[4:], transport.ShmVersion)
	binary.LittleEndian.PutUint64(hello[8:], ring)
	var oob []byte
	if withFile {
		f, err := transport.NewSealedFile(int(fileSize))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		oob = syscall.UnixRights(int(f.Fd()))
	}
	if _, _, err := uc.(*net.UnixConn).WriteMsgUnix(hello[:], oob, nil); err != nil {
		return err
	}
	uc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var ack [1]byte
	_, err = io.ReadFull(uc, ack[:])
	return err
}

// D5: the shm layout is validated once at the handshake; a peer that corrupts the ring indices
// kills its own connection only, with no out-of-bounds access on the server.
func TestD5ShmRing(t *testing.T) {
	addr := listenAddr(t, "shm")
	name := strings.TrimPrefix(addr, "shm:///")
	s := startServer(t, ServerConfig{Listen: addr, Getenv: noEnv})
	ring := uint64(transport.ShmMinRing)
	good := int64(transport.ShmLayoutSize(int(ring)))
	cases := []struct {
		name     string
		magic    uint32
		ring     uint64
		size     int64
		withFile bool
	}{
		{"no file", transport.ShmMagic, ring, good, false},
		{"bad magic", 0xDEADBEEF, ring, good, true},
		{"ring not a power of two", transport.ShmMagic, ring + 4096, good, true},
		{"ring too large", transport.ShmMagic, 1 << 40, good, true},
		{"ring zero", transport.ShmMagic, 0, good, true},
		{"file too small", transport.ShmMagic, ring, good - 4096, true},
		{"file too large", transport.ShmMagic, ring, good + 4096, true},
		{"header not written", transport.ShmMagic, ring, good, true}, // the mapped header must match the hello
	}
	for _, tc := range cases {
		if err := sendHello(t, name, tc.magic, tc.ring, tc.size, tc.withFile); err == nil {
			t.Errorf("%s: handshake accepted", tc.name)
		}
	}
	pingOnce(t, addr)

	// A client that corrupts its ring's head: the server sees head-tail > ring size and drops it.
	f, mem := ringFile(t, int(ring), true)
	uc, ok := shmHandshake(t, name, f, int(ring))
	if !ok {
		t.Fatal("handshake refused")
	}
	head := (*uint64)(unsafe.Pointer(&mem[transport.ShmCtl0]))
	atomic.StoreUint64(head, 1<<40)
	// The server's reader wakes within its futex timeout (50 ms) and finds the head.
	buf := make([]byte, 16)
	uc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := uc.Read(buf); err != io.EOF {
		t.Errorf("read after corrupting the ring: %v, want EOF (server closed it)", err)
	}
	if closed := atomic.LoadUint32((*uint32)(unsafe.Pointer(&mem[64]))); closed != 1 {
		t.Errorf("closed flag %d after the server dropped the connection, want 1", closed)
	}
	uc.Close()
	syscall.Munmap(mem)
	pingOnce(t, addr)
	if st := s.Stats(); st.Active > 1 {
		t.Errorf("stats %+v", st)
	}
}

// The rings carry frames larger than themselves, in both directions, intact.
func TestShmLargeFrames(t *testing.T) {
	addr := listenAddr(t, "shm")
	startServer(t, ServerConfig{Listen: addr, Getenv: noEnv})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := RunWorkload(ctx, ClientConfig{Connect: addr, Workload: "ping", Mode: ModePipeline, Depth: 4,
		Ping: PingConfig{Requests: 50, Warmup: 1, RequestBytes: 3 << 20, ReplyBytes: 5 << 20}, Getenv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	if res.Totals.SendCalls != 0 || res.Totals.RecvCalls != 0 {
		t.Errorf("shm made %d send and %d recv system calls, want none", res.Totals.SendCalls, res.Totals.RecvCalls)
	}
	if want := int64(52 * (5<<20 + wire.HeaderSize)); res.Totals.BytesRecv != want {
		t.Errorf("received %d bytes, want %d", res.Totals.BytesRecv, want)
	}
}
