package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/perflab/perflab/trace"
	"github.com/perflab/perflab/venusd/wire"
)

var shmSeq atomic.Int64

// pair returns the two ends of a fresh connection of transport tr (tcp, unix or shm), made by
// Listen, Dial and Accept; both are closed when the test ends.
func pair(t *testing.T, tr string, o DialOptions) (client, server Conn) {
	t.Helper()
	var s string
	switch tr {
	case "tcp":
		s = "tcp://127.0.0.1:0"
	case "unix":
		s = "unix://" + filepath.Join(t.TempDir(), "t.sock")
	case "shm":
		s = fmt.Sprintf("shm:///perflab-transport-test-%d-%d", os.Getpid(), shmSeq.Add(1))
	}
	a, err := ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen(a, o.BufBytes)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if tr == "tcp" {
		a.Where = ln.Addr().String()
	}
	type accepted struct {
		c   Conn
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			ch <- accepted{nil, err}
			return
		}
		if err := CheckPeer(nc); err != nil {
			nc.Close()
			ch <- accepted{nil, err}
			return
		}
		c, err := Accept(nc, a, AcceptOptions{BufBytes: o.BufBytes, ShmSpin: o.ShmSpin, Handshake: 10 * time.Second})
		if err != nil {
			nc.Close()
		}
		ch <- accepted{c, err}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, err = Dial(ctx, a, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	acc := <-ch
	if acc.err != nil {
		t.Fatal(acc.err)
	}
	t.Cleanup(func() { acc.c.Close() })
	if client.Family() != a.Family() || acc.c.Family() != a.Family() {
		t.Errorf("%s: families %v and %v, want %v", tr, client.Family(), acc.c.Family(), a.Family())
	}
	return client, acc.c
}

// frame returns a frame of n payload bytes, each byte its offset times seed.
func frame(n int, seed byte) []byte {
	f := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, wire.Magic), uint32(n))
	for i := 0; i < n; i++ {
		f = append(f, byte(i)*seed)
	}
	return f
}

// Whole frames cross every transport intact in both directions, the shm ones larger than the
// ring, and the sockets count their system calls while shm makes none.
func TestFramesBothWays(t *testing.T) {
	sizes := []int{0, 1, 100, 70 << 10, 200 << 10, 1 << 20}
	for _, tr := range []string{"tcp", "unix", "shm"} {
		t.Run(tr, func(t *testing.T) {
			c, s := pair(t, tr, DialOptions{ShmRing: ShmMinRing})
			cf, sf := NewDirectFrames(c, 4<<20), NewDirectFrames(s, 4<<20)
			var wg sync.WaitGroup
			wg.Add(1)
			var echoErr error
			go func() { // the server echoes every frame it reads
				defer wg.Done()
				for range sizes {
					f, err := sf.ReadFrame()
					if err != nil {
						echoErr = err
						return
					}
					if err := sf.WriteFrame(f); err != nil {
						echoErr = err
						return
					}
				}
			}()
			for i, n := range sizes {
				want := frame(n, byte(i+1))
				if err := cf.WriteFrame(want); err != nil {
					t.Fatalf("write %d bytes: %v", n, err)
				}
				got, err := cf.ReadFrame()
				if err != nil {
					t.Fatalf("read back %d bytes: %v", n, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("frame of %d bytes came back changed", n)
				}
			}
			wg.Wait()
			if echoErr != nil {
				t.Fatal(echoErr)
			}
			ctr := c.Counters()
			if tr == "shm" {
				if ctr.SendCalls.Load() != 0 || ctr.RecvCalls.Load() != 0 {
					t.Errorf("shm made %d send and %d recv calls, want none", ctr.SendCalls.Load(), ctr.RecvCalls.Load())
				}
			} else if ctr.SendCalls.Load() < int64(len(sizes)) || ctr.RecvCalls.Load() < int64(len(sizes)) {
				t.Errorf("%d send and %d recv calls for %d frames each way", ctr.SendCalls.Load(), ctr.RecvCalls.Load(), len(sizes))
			}
		})
	}
}

// A peer that moves its ring's head past the ring's size is caught by the reader, which closes
// the connection for both sides; the other side then reads EOF.
func TestShmCorruptHead(t *testing.T) {
	c, s := pair(t, "shm", DialOptions{})
	sc := c.(*shmConn)
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&sc.mem[ShmCtl0])), 1<<40)
	buf := make([]byte, 16)
	s.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := s.Read(buf); !errors.Is(err, errShmCorrupt) {
		t.Errorf("server read of a corrupt ring: %v, want %v", err, errShmCorrupt)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(buf); err != io.EOF {
		t.Errorf("client read after the server gave up: %v, want EOF", err)
	}
}

// A read deadline ends a wait on an empty ring.
func TestShmReadDeadline(t *testing.T) {
	c, _ := pair(t, "shm", DialOptions{ShmSpin: 1000})
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := c.Read(make([]byte, 8)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read of an empty ring past its deadline: %v, want %v", err, os.ErrDeadlineExceeded)
	}
}

// The shm ring size is checked on both sides.
func TestShmRingSize(t *testing.T) {
	for _, n := range []int{ShmMinRing / 2, ShmMinRing + 4096, 2 * ShmMaxRing} {
		if _, err := Dial(context.Background(), Addr{Transport: "shm", Where: "nobody-listens"}, DialOptions{ShmRing: n}); err == nil {
			t.Errorf("dial with a ring of %d bytes succeeded", n)
		}
	}
}

func TestParseAddr(t *testing.T) {
	for _, tc := range []struct {
		in, tr, where string
		fam           trace.Family
		loopback, ok  bool
	}{
		{"tcp://127.0.0.1:5556", "tcp", "127.0.0.1:5556", trace.FamilyTCP, true, true},
		{"tcp://[::1]:1", "tcp", "[::1]:1", trace.FamilyTCP, true, true},
		{"tcp://localhost:1", "tcp", "localhost:1", trace.FamilyTCP, true, true},
		{"tcp://0.0.0.0:1", "tcp", "0.0.0.0:1", trace.FamilyTCP, false, true},
		{"tcp://10.1.2.3:1", "tcp", "10.1.2.3:1", trace.FamilyTCP, false, true},
		{"unix:///run/v.sock", "unix", "/run/v.sock", trace.FamilyUnix, true, true},
		{"shm:///ring-1.a_b", "shm", "ring-1.a_b", trace.FamilySHM, true, true},
		{"shm:///../etc", "", "", 0, false, false},
		{"shm:///", "", "", 0, false, false},
		{"unix://", "", "", 0, false, false},
		{"tcp://nohost", "", "", 0, false, false},
		{"http://x:1", "", "", 0, false, false},
		{"127.0.0.1:5556", "", "", 0, false, false},
	} {
		a, err := ParseAddr(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("ParseAddr(%q) = %+v, %v", tc.in, a, err)
			continue
		}
		if !tc.ok {
			continue
		}
		if a.Transport != tc.tr || a.Where != tc.where || a.Family() != tc.fam || a.IsLoopback() != tc.loopback {
			t.Errorf("ParseAddr(%q) = %+v (family %v, loopback %v)", tc.in, a, a.Family(), a.IsLoopback())
		}
		if a.String() != tc.in {
			t.Errorf("%q round-trips to %q", tc.in, a.String())
		}
	}
}

// TestSocketIONoAllocs: a socket transport's Read and Write allocate nothing per call (their
// raw-I/O callbacks are made once per connection), so a ping-pong's garbage is the frames' own.
func TestSocketIONoAllocs(t *testing.T) {
	for _, tr := range []string{"tcp", "unix"} {
		c, s := pair(t, tr, DialOptions{})
		out, in := []byte("ping-pong"), make([]byte, 64)
		allocs := testing.AllocsPerRun(200, func() {
			if _, err := c.Write(out); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(s, in[:len(out)]); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per write and read, want 0", tr, allocs)
		}
		if !bytes.Equal(in[:len(out)], out) {
			t.Errorf("%s: read %q, want %q", tr, in[:len(out)], out)
		}
	}
}
