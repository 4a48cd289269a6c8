package venusd

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perflab/perflab/venusd/device"
	"github.com/perflab/perflab/venusd/transport"
	"github.com/perflab/perflab/venusd/wire"
)

// rawClient speaks VPLS by hand, for hostile-input tests.
type rawClient struct {
	t  testing.TB
	nc net.Conn
}

func dialRaw(t testing.TB, addr string) *rawClient {
	t.Helper()
	a, err := transport.ParseAddr(addr)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := net.Dial(a.Transport, a.Where)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawClient{t: t, nc: nc}
}

// cmd encodes one command as a frame.
func frameOf(cmds ...func(e *wire.Encoder)) []byte {
	var e wire.Encoder
	e.Reset()
	for _, c := range cmds {
		c(&e)
	}
	return append([]byte(nil), e.Finish()...)
}

func cmdOf(t wire.CommandType, flags, req uint32, args func(e *wire.Encoder)) func(e *wire.Encoder) {
	return func(e *wire.Encoder) {
		off := e.Begin(t, flags, req)
		if args != nil {
			args(e)
		}
		e.End(off)
	}
}

func (c *rawClient) send(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// reply reads one reply frame and returns its records; io.EOF when the server closed.
func (c *rawClient) reply() ([]wire.Command, error) {
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var h [wire.HeaderSize]byte
	if _, err := io.ReadFull(c.nc, h[:]); err != nil {
		return nil, err
	}
	fh, err := wire.ParseFrameHeader(h[:], DefaultMaxFrameBytes)
	if err != nil {
		return nil, err
	}
	p := make([]byte, fh.Size)
	if _, err := io.ReadFull(c.nc, p); err != nil {
		return nil, err
	}
	var out []wire.Command
	it := wire.NewCommandIter(p)
	var cmd wire.Command
	for it.Next(&cmd) {
		cmd.Args = append([]byte(nil), cmd.Args...)
		out = append(out, cmd)
	}
	return out, it.Err()
}

func result(c wire.Command) int32 { return int32(binary.LittleEndian.Uint32(c.Args)) }

// call sends one command wanting a reply and returns its VkResult.
func (c *rawClient) call(t wire.CommandType, args func(e *wire.Encoder)) int32 {
	c.t.Helper()
	c.send(frameOf(cmdOf(t, wire.FlagReplyWanted, 7, args)))
	rs, err := c.reply()
	if err != nil || len(rs) == 0 {
		c.t.Fatalf("%s: reply %v, %v", t, rs, err)
	}
	return result(rs[len(rs)-1])
}

// expectClosed checks that the server closed the connection (after any replies).
func (c *rawClient) expectClosed() {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, c.nc); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			c.t.Fatal("server did not close the connection")
		}
	}
}

// waitIdleConns waits until n of the server's connections wait for a frame.
func waitIdleConns(t *testing.T, s *Server, n int) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		idle := 0
		s.mu.Lock()
		for sc := range s.conns {
			sc.mu.Lock()
			if sc.idle {
				idle++
			}
			sc.mu.Unlock()
		}
		s.mu.Unlock()
		if idle >= n {
			return
		}
	}
	t.Fatalf("fewer than %d connections wait for a frame", n)
}

// stillServes checks that a fresh client gets served.
func stillServes(t *testing.T, s *Server) {
	t.Helper()
	c := dialRaw(t, s.Addr())
	if r := c.call(wire.CmdPing, func(e *wire.Encoder) { e.U32(4) }); r != wire.VkSuccess {
		t.Fatalf("ping after abuse: %s", wire.ResultName(r))
	}
}

func alloc(h, size uint64, props uint32) func(e *wire.Encoder) {
	return func(e *wire.Encoder) { e.U64(h); e.U64(size); e.U32(props) }
}

func u64s(v ...uint64) func(e *wire.Encoder) {
	return func(e *wire.Encoder) {
		for _, x := range v {
			e.U64(x)
		}
	}
}

// D1: loopback by default; a wider bind is refused without AllowRemote and warns with it; the
// unix socket is 0600 and removed on shutdown.
func TestD1DefaultBind(t *testing.T) {
	a, _ := transport.ParseAddr(DefaultListen)
	if !a.IsLoopback() {
		t.Fatalf("default %s is not loopback", DefaultListen)
	}
	if s, err := NewServer(ServerConfig{Getenv: noEnv}); err == nil {
		if s.Addr() != DefaultListen {
			t.Errorf("default server on %s", s.Addr())
		}
		s.Close()
	} else if !strings.Contains(err.Error(), "127.0.0.1:5556") {
		t.Errorf("default bind error does not name 127.0.0.1:5556: %v", err)
	}
	for _, addr := range []string{"tcp://0.0.0.0:0", "tcp://[::]:0", "tcp://:0"} {
		if _, err := NewServer(ServerConfig{Listen: addr, Getenv: noEnv}); err == nil || !strings.Contains(err.Error(), "--allow-remote") {
			t.Errorf("%s without AllowRemote: err %v, want a refusal naming --allow-remote", addr, err)
		}
	}
	var log bytes.Buffer
	s, err := NewServer(ServerConfig{Listen: "tcp://0.0.0.0:0", AllowRemote: true, Getenv: noEnv, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if !strings.Contains(log.String(), "WARNING") || !strings.Contains(log.String(), "no authentication") {
		t.Errorf("remote bind warning %q does not name the risk", log.String())
	}
	path := filepath.Join(t.TempDir(), "d1.sock")
	us, err := NewServer(ServerConfig{Listen: "unix://" + path, Getenv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("unix socket mode %v, %v; want 0600", st.Mode().Perm(), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- us.Serve(ctx) }()
	cancel()
	<-done
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("unix socket left behind after shutdown: %v", err)
	}
}

// D3 and D10: oversized, inconsistent and unknown frames are refused before allocation; only
// the offending connection closes.
func TestD3BadFrames(t *testing.T) {
	s := startServer(t, ServerConfig{Listen: "tcp://127.0.0.1:0", Getenv: noEnv, MaxFrameBytes: 1 << 20})
	hdr := func(magic, size uint32) []byte {
		b := binary.LittleEndian.AppendUint32(nil, magic)
		return binary.LittleEndian.AppendUint32(b, size)
	}
	cases := []struct {
		name      string
		frame     []byte
		wantReply int32 // 0: no reply expected, only a close
	}{
		{"size 2^32-1", hdr(wire.Magic, 0xFFFFFFFF), 0},
		{"size over cap", hdr(wire.Magic, 1<<20+1), 0},
		{"bad magic", hdr(0x12345678, 16), 0},
		{"magic byte-swapped", hdr(0x534C5056, 16), 0},
		{"args past frame", binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(hdr(wire.Magic, 16), uint32(wire.CmdPing)), 1), 100), 1), 0},
		{"unknown command", frameOf(cmdOf(9999, wire.FlagReplyWanted, 3, nil)), wire.VkErrorFeatureNotPresent},
		{"reply flag in request", frameOf(cmdOf(wire.CmdPing, wire.FlagReply, 3, func(e *wire.Encoder) { e.U32(0) })), wire.VkErrorFeatureNotPresent},
		{"short args", frameOf(cmdOf(wire.CmdAllocateMemory, wire.FlagReplyWanted, 3, func(e *wire.Encoder) { e.U32(1) })), wire.VkErrorValidationFailed},
		{"long args", frameOf(cmdOf(wire.CmdFreeMemory, wire.FlagReplyWanted, 3, u64s(1, 2))), wire.VkErrorValidationFailed},
		{"count larger than args", frameOf(cmdOf(wire.CmdResetFences, wire.FlagReplyWanted, 3, func(e *wire.Encoder) { e.U32(1000); e.U64(1) })), wire.VkErrorValidationFailed},
		{"transfer size larger than args", frameOf(cmdOf(wire.CmdTransferMemoryData, wire.FlagReplyWanted, 3, u64s(1, 0, 1<<40))), wire.VkErrorValidationFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var before runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			c := dialRaw(t, s.Addr())
			c.send(tc.frame)
			if tc.wantReply != 0 {
				rs, err := c.reply()
				if err != nil || len(rs) != 1 || result(rs[0]) != tc.wantReply {
					t.Fatalf("reply %+v, %v; want one record with %s", rs, err, wire.ResultName(tc.wantReply))
				}
			}
			c.expectClosed()
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			if grew := int64(after.TotalAlloc - before.TotalAlloc); grew > 1<<20 {
				t.Errorf("the server allocated %d bytes for a bad frame", grew)
			}
			stillServes(t, s)
		})
	}
	// Out-of-range memory access is an error reply; the connection goes on.
	c := dialRaw(t, s.Addr())
	if r := c.call(wire.CmdAllocateMemory, alloc(5, 4096, wire.MemHostVisible)); r != wire.VkSuccess {
		t.Fatal(wire.ResultName(r))
	}
	if r := c.call(wire.CmdMapMemory, u64s(5, 0, device.WholeSize)); r != wire.VkSuccess {
		t.Fatal(wire.ResultName(r))
	}
	for _, rng := range [][3]uint64{{5, 4000, 200}, {5, ^uint64(0) - 10, 20}, {5, 1, ^uint64(0) - 1}} {
		if r := c.call(wire.CmdReadMemoryData, func(e *wire.Encoder) { e.U32(1); u64s(rng[:]...)(e) }); r != wire.VkErrorValidationFailed {
			t.Errorf("read %v: %s, want VK_ERROR_VALIDATION_FAILED_EXT", rng, wire.ResultName(r))
		}
	}
	if r := c.call(wire.CmdTransferMemoryData, func(e *wire.Encoder) { u64s(5, 4090, 8)(e); e.Bytes(make([]byte, 8)) }); r != wire.VkErrorValidationFailed {
		t.Errorf("transfer past the end: %s", wire.ResultName(r))
	}
	if r := c.call(wire.CmdPing, func(e *wire.Encoder) { e.U32(4) }); r != wire.VkSuccess {
		t.Errorf("connection unusable after range errors: %s", wire.ResultName(r))
	}
}

// D4: every handle goes through the connection's own table.
func TestD4Handles(t *testing.T) {
	s := startServer(t, ServerConfig{Listen: "tcp://127.0.0.1:0", Getenv: noEnv})
	a, b := dialRaw(t, s.Addr()), dialRaw(t, s.Addr())
	if r := a.call(wire.CmdAllocateMemory, alloc(0x9, 4096, wire.MemHostVisible|wire.MemHostCoherent)); r != wire.VkSuccess {
		t.Fatal(wire.ResultName(r))
	}
	cases := []struct {
		name string
		c    *rawClient
		cmd  wire.CommandType
		args func(e *wire.Encoder)
		want int32
	}{
		{"other connection's memory", b, wire.CmdMapMemory, u64s(0x9, 0, device.WholeSize), wire.VkErrorValidationFailed},
		{"other connection's free", b, wire.CmdFreeMemory, u64s(0x9), wire.VkErrorValidationFailed},
		{"null handle alloc", a, wire.CmdAllocateMemory, alloc(0, 16, wire.MemHostVisible), wire.VkErrorValidationFailed},
		{"null handle map", a, wire.CmdMapMemory, u64s(0, 0, 16), wire.VkErrorValidationFailed},
		{"null fence wait", a, wire.CmdWaitForFences, func(e *wire.Encoder) { e.U32(1); e.U64(0); e.U32(1); e.U64(0) }, wire.VkErrorValidationFailed},
		{"duplicate id", a, wire.CmdAllocateMemory, alloc(0x9, 16, wire.MemHostVisible), wire.VkErrorValidationFailed},
		{"unknown fence", a, wire.CmdGetFenceStatus, u64s(0x77), wire.VkErrorValidationFailed},
		{"unknown command buffer", a, wire.CmdBeginCommandBuffer, u64s(0x77), wire.VkErrorValidationFailed},
		{"free", a, wire.CmdFreeMemory, u64s(0x9), wire.VkSuccess},
		{"double free", a, wire.CmdFreeMemory, u64s(0x9), wire.VkErrorValidationFailed},
		{"use after free", a, wire.CmdMapMemory, u64s(0x9, 0, device.WholeSize), wire.VkErrorValidationFailed},
		{"submit unknown fence", a, wire.CmdQueueSubmit, func(e *wire.Encoder) { e.U64(1); e.U64(0x55); e.U32(0) }, wire.VkErrorValidationFailed},
		{"dispatch into a buffer not recording", a, wire.CmdDispatch, func(e *wire.Encoder) { e.U64(0x66); e.Bytes(make([]byte, 72)) }, wire.VkErrorValidationFailed},
	}
	for _, tc := range cases {
		if r := tc.c.call(tc.cmd, tc.args); r != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, wire.ResultName(r), wire.ResultName(tc.want))
		}
	}
}

// D6: idle and slow clients are closed by read deadlines; MaxConns is enforced.
func TestD6Deadlines(t *testing.T) {
	s := startServer(t, ServerConfig{Listen: "tcp://127.0.0.1:0", Getenv: noEnv, IdleTimeout: 200 * time.Millisecond,
		FrameTimeout: 200 * time.Millisecond, MaxConns: 3})
	idle := dialRaw(t, s.Addr())
	slow := dialRaw(t, s.Addr())
	slow.send(binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, wire.Magic), 64))
	start := time.Now()
	idle.expectClosed()
	slow.expectClosed()
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("idle and slow clients closed after %v", d)
	}
	// MaxConns: a fourth connection makes room by closing the one idle the longest. A server
	// of its own, whose idle timeout (a minute) cannot close the others first on a slow machine.
	s = startServer(t, ServerConfig{Listen: "tcp://127.0.0.1:0", Getenv: noEnv, IdleTimeout: time.Minute,
		FrameTimeout: 200 * time.Millisecond, MaxConns: 3})
	var cs []*rawClient
	for i := 0; i < 3; i++ {
		c := dialRaw(t, s.Addr())
		c.call(wire.CmdPing, func(e *wire.Encoder) { e.U32(4) })
		cs = append(cs, c)
	}
	// Each handler must be back waiting for a frame, or it is busy and not a candidate (on a
	// loaded machine the first one's goroutine may not have run since it wrote its reply).
	waitIdleConns(t, s, 3)
	extra := dialRaw(t, s.Addr())
	if r := extra.call(wire.CmdPing, func(e *wire.Encoder) { e.U32(4) }); r != wire.VkSuccess {
		t.Fatalf("the fourth client: %s", wire.ResultName(r))
	}
	cs[0].expectClosed()
	// The evicted connection's handler counts itself out after its client saw the close.
	st := s.Stats()
	for end := time.Now().Add(10 * time.Second); (st.Evicted != 1 || st.Active != 3) && time.Now().Before(end); st = s.Stats() {
		time.Sleep(5 * time.Millisecond)
	}
	if st.Evicted != 1 || st.Active != 3 {
		t.Errorf("stats %+v: want 1 evicted, 3 active", st)
	}
	for _, c := range cs[1:] {
		if r := c.call(wire.CmdPing, func(e *wire.Encoder) { e.U32(4) }); r != wire.VkSuccess {
			t.Errorf("a client that was not the longest idle: %s", wire.ResultName(r))
		}
	}
}

// D7: quotas give errors, not allocations; a client that leaves without freeing leaves nothing.
func TestD7Quotas(t *testing.T) {
	s := startServer(t, ServerConfig{Listen: "tcp://127.0.0.1:0", Getenv: noEnv, MaxObjects: 10, MaxMemoryBytes: 1 << 20})
	var wg sync.WaitGroup
	for k := 0; k < 10; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dialRaw(t, s.Addr())
			for i := uint64(1); i <= 10; i++ {
				if r := c.call(wire.CmdAllocateMemory, alloc(i, 1024, wire.MemHostVisible)); r != wire.VkSuccess {
					t.Errorf("alloc %d: %s", i, wire.ResultName(r))
				}
			}
			if r := c.call(wire.CmdAllocateMemory, alloc(11, 16, wire.MemHostVisible)); r != wire.VkErrorTooManyObjects {
				t.Errorf("alloc over the object quota: %s", wire.ResultName(r))
			}
			if r := c.call(wire.CmdFreeMemory, u64s(1)); r != wire.VkSuccess {
				t.Error(wire.ResultName(r))
			}
			if r := c.call(wire.CmdAllocateMemory, alloc(12, 2<<20, wire.MemHostVisible)); r != wire.VkErrorOutOfDeviceMemory {
				t.Errorf("alloc over the byte quota: %s", wire.ResultName(r))
			}
			if r := c.call(wire.CmdAllocateMemory, alloc(13, 1<<62, wire.MemHostVisible)); r != wire.VkErrorOutOfDeviceMemory {
				t.Errorf("alloc of 2^62 bytes: %s", wire.ResultName(r))
			}
			c.nc.Close()
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().LiveObjects != 0 || s.Stats().Active != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after every client left: %+v", s.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := s.Stats(); st.LiveBytes != 0 {
		t.Errorf("live bytes %d after every client left", st.LiveBytes)
	}
}

// D9: on cancellation the server stops accepting, lets in-flight work finish, closes every
// client and returns nil within the grace period.
func TestD9GracefulShutdown(t *testing.T) {
	for _, tr := range []string{"tcp", "unix", "shm"} {
		t.Run(tr, func(t *testing.T) {
			s, err := NewServer(ServerConfig{Listen: listenAddr(t, tr), Getenv: noEnv})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- s.Serve(ctx) }()
			var wg sync.WaitGroup
			for i := 0; i < 5; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cctx, ccancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer ccancel()
					// Errors are expected: the server goes away under the clients.
					RunWorkload(cctx, ClientConfig{Connect: s.Addr(), Workload: "ping", Mode: ModePipeline, Depth: 50,
						Ping: PingConfig{Duration: 10 * time.Second}, Getenv: noEnv})
				}()
			}
			time.Sleep(200 * time.Millisecond)
			start := time.Now()
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("serve: %v", err)
				}
			case <-time.After(DefaultShutdownGrace + 5*time.Second):
				t.Fatal("serve did not return after cancellation")
			}
			if d := time.Since(start); d > DefaultShutdownGrace+time.Second {
				t.Errorf("shutdown took %v", d)
			}
			wg.Wait()
			if st := s.Stats(); st.Active != 0 || st.LiveObjects != 0 {
				t.Errorf("after shutdown: %+v", st)
			}
		})
	}
}

// waitIdle waits until the server has no connection left.
func waitIdle(t *testing.T, s *Server) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().Active != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("connections still open: %+v", s.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func timeIn(t *testing.T) time.Time { return time.Now().Add(10 * time.Second) }

func readFull(r io.Reader, b []byte) (int, error) { return io.ReadFull(r, b) }

// D7: the server-wide memory cap holds across connections; a reply never outgrows a frame.
func TestD7TotalMemoryAndReplyCap(t *testing.T) {
	s := startServer(t, ServerConfig{Listen: "tcp://127.0.0.1:0", Getenv: noEnv, MaxTotalMemoryBytes: 3 << 20, MaxFrameBytes: 1 << 20})
	a, b := dialRaw(t, s.Addr()), dialRaw(t, s.Addr())
	if r := a.call(wire.CmdAllocateMemory, alloc(1, 2<<20, wire.MemHostVisible)); r != wire.VkSuccess {
		t.Fatal(wire.ResultName(r))
	}
	if r := b.call(wire.CmdAllocateMemory, alloc(1, 2<<20, wire.MemHostVisible)); r != wire.VkErrorOutOfDeviceMemory {
		t.Errorf("second client past the server's total: %s", wire.ResultName(r))
	}
	if r := b.call(wire.CmdAllocateMemory, alloc(2, 1<<20, wire.MemHostVisible)); r != wire.VkSuccess {
		t.Errorf("second client within the total: %s", wire.ResultName(r))
	}
	if r := a.call(wire.CmdMapMemory, u64s(1, 0, device.WholeSize)); r != wire.VkSuccess {
		t.Fatal(wire.ResultName(r))
	}
	// Replies count too: with the total taken by device memory, a 600 KiB read has no room.
	read := func(e *wire.Encoder) { e.U32(1); u64s(1, 0, 600<<10)(e) }
	if r := a.call(wire.CmdReadMemoryData, read); r != wire.VkErrorOutOfHostMemory {
		t.Errorf("a reply past the server's total: %s", wire.ResultName(r))
	}
	if r := b.call(wire.CmdFreeMemory, u64s(2)); r != wire.VkSuccess {
		t.Fatal(wire.ResultName(r))
	}
	// Two reads of 600 KiB in one frame: the second would push the reply past 1 MiB.
	a.send(frameOf(cmdOf(wire.CmdReadMemoryData, wire.FlagReplyWanted, 1, read), cmdOf(wire.CmdReadMemoryData, wire.FlagReplyWanted, 2, read)))
	rs, err := a.reply()
	if err != nil || len(rs) != 2 || result(rs[0]) != wire.VkSuccess || result(rs[1]) != wire.VkErrorOutOfHostMemory {
		t.Fatalf("replies %d, %v", len(rs), err)
	}
	if r := a.call(wire.CmdPing, func(e *wire.Encoder) { e.U32(2 << 20) }); r != wire.VkErrorOutOfHostMemory {
		t.Errorf("ping asking for a reply larger than a frame: %s", wire.ResultName(r))
	}
}
