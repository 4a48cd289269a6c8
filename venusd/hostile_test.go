package venusd

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/perflab/perflab/venusd/transport"
	"github.com/perflab/perflab/venusd/wire"
)

// The attacks of a hostile user (docs/reliability.md, rows H1-H5).

// shmHandshake hands f to the shm server named name as a client would and reports whether the
// server acked. The returned connection is the control socket (closing it ends the client).
func shmHandshake(t *testing.T, name string, f *os.File, ringBytes int) (*net.UnixConn, bool) {
	t.Helper()
	nc, err := net.Dial("unix", transport.ShmSocketName(name))
	if err != nil {
		t.Fatal(err)
	}
	uc := nc.(*net.UnixConn)
	t.Cleanup(func() { uc.Close() })
	var hello [16]byte
	binary.LittleEndian.PutUint32(hello[0:], transport.ShmMagic)
	binary.LittleEndian.PutUint32(hello[4:], transport.ShmVersion)
	binary.LittleEndian.PutUint64(hello[8:], uint64(ringBytes))
	if _, _, err := uc.WriteMsgUnix(hello[:], syscall.UnixRights(int(f.Fd())), nil); err != nil {
		t.Fatal(err)
	}
	uc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var ack [1]byte
	_, err = io.ReadFull(uc, ack[:])
	return uc, err == nil && ack[0] == 'K'
}

// ringFile makes a shm file with a valid header, sealed or not, and its mapping (the caller
// unmaps it).
func ringFile(t *testing.T, ringBytes int, sealed bool) (*os.File, []byte) {
	t.Helper()
	size := transport.ShmLayoutSize(ringBytes)
	var f *os.File
	var err error
	if sealed {
		f, err = transport.NewSealedFile(size)
	} else {
		// What the client made before: a file in /dev/shm, or a memfd without seals.
		var fd int
		fd, err = unix.MemfdCreate("hostile", unix.MFD_CLOEXEC)
		f = os.NewFile(uintptr(fd), "hostile")
		if err == nil {
			err = f.Truncate(int64(size))
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	mem, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(mem[0:], transport.ShmMagic)
	binary.LittleEndian.PutUint32(mem[4:], transport.ShmVersion)
	binary.LittleEndian.PutUint64(mem[8:], uint64(ringBytes))
	return f, mem
}

// H1: a client shrinks the shared file it handed over, after the handshake, so that the
// server's next touch of the ring faults (SIGBUS killed the whole server). The server now only
// maps a memfd sealed against shrinking: an unsealed file is refused at the handshake, and the
// shrink of a sealed one fails. Meanwhile another client's run is not disturbed.
func TestHostileShmShrink(t *testing.T) {
	addr := listenAddr(t, "shm")
	name := strings.TrimPrefix(addr, "shm:///")
	s := startServer(t, ServerConfig{Listen: addr, Getenv: noEnv})

	// A normal client runs all along.
	tokens := 40
	if raceEnabled {
		tokens = 8
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var res *Result
	var runErr error
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		res, runErr = RunWorkload(ctx, ClientConfig{Connect: addr, Workload: "llm", LLM: smallLLM(tokens), Getenv: noEnv})
		close(stop)
	}()

	ring := transport.ShmMinRing
	for i := 0; ; i++ {
		// The attack as it was: an unsealed file, shrunk once the server has it mapped.
		f, fmem := ringFile(t, ring, false)
		if _, ok := shmHandshake(t, name, f, ring); ok {
			f.Truncate(0)
			t.Fatal("the server mapped a ring file that its client can shrink")
		}
		f.Truncate(0)
		syscall.Munmap(fmem)
		// The same with a sealed file: the handshake succeeds, the shrink fails.
		g, mem := ringFile(t, ring, true)
		uc, ok := shmHandshake(t, name, g, ring)
		if !ok {
			t.Fatal("a sealed ring file was refused")
		}
		if err := g.Truncate(0); !errors.Is(err, syscall.EPERM) {
			t.Fatalf("shrinking a sealed ring file: %v, want EPERM", err)
		}
		if err := unix.Fallocate(int(g.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, int64(len(mem))); err != nil && !errors.Is(err, syscall.EPERM) {
			t.Logf("punching a hole: %v", err)
		}
		// Make the server touch the whole ring: a frame header that claims the ring is full.
		// Written as the client's side of ring 0 would: the header and half a ring of zeros (the
		// file is new), then the head moved past them, then the connection closed.
		copy(mem[transport.ShmHeaderSize:], binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, wire.Magic), uint32(ring)))
		atomic.StoreUint64((*uint64)(unsafe.Pointer(&mem[transport.ShmCtl0])), uint64(wire.HeaderSize+ring/2))
		atomic.StoreUint32((*uint32)(unsafe.Pointer(&mem[64])), 1)
		uc.Close()
		syscall.Munmap(mem)
		select {
		case <-stop:
		default:
			if i < 200 {
				continue
			}
		}
		break
	}
	wg.Wait()
	if runErr != nil || !res.ChecksumOK {
		t.Fatalf("the normal client's run beside the attack: %v", runErr)
	}
	pingOnce(t, addr)
	waitIdle(t, s)
}

// H2: idle connections, and ones that sent 7 of the 8 header bytes, held open by the hundred,
// used to fill the connection limit and lock every client out for the idle timeout (then 10
// minutes). Now a new connection at the limit closes one that never sent a complete frame (or
// the longest idle), so a normal client gets in and completes its run with the right checksum
// while 300 idle and 300 half-header connections are held open (each redialled when closed).
func TestHostileNoLockout(t *testing.T) {
	for _, loop := range LoopKinds {
		t.Run(loop, func(t *testing.T) {
			srv, err := NewLoopServer(loop, ServerConfig{Listen: "tcp://127.0.0.1:0", Getenv: noEnv, FrameTimeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			serveUntilCleanup(t, srv)
			a, _ := transport.ParseAddr(srv.Addr())
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var held sync.WaitGroup
			held.Add(600)
			for i := 0; i < 600; i++ {
				half := i%2 == 1
				wg.Add(1)
				go func() {
					defer wg.Done()
					first := true
					for {
						nc, err := net.Dial("tcp", a.Where)
						if err == nil {
							if half {
								nc.Write(binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, wire.Magic), 64)[:7])
							}
							if first {
								held.Done()
								first = false
							}
							go func() { <-stop; nc.Close() }()
							io.Copy(io.Discard, nc) // until the server closes it
							nc.Close()
						} else if first {
							held.Done()
							first = false
						}
						select {
						case <-stop:
							return
						case <-time.After(time.Second):
						}
					}
				}()
			}
			held.Wait()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			lc := smallLLM(5)
			res, err := RunWorkload(ctx, ClientConfig{Connect: srv.Addr(), Workload: "llm", LLM: lc, Getenv: noEnv})
			close(stop)
			wg.Wait()
			if err != nil {
				t.Fatalf("normal client beside 600 idle and half-header connections: %v (server %+v)", err, srv.Stats())
			}
			if !res.ChecksumOK || res.Checksum != res.ReferenceChecksum {
				t.Fatalf("checksum %s, reference %s", res.Checksum, res.ReferenceChecksum)
			}
			if st := srv.Stats(); st.Evicted < 600-DefaultMaxConns {
				t.Errorf("stats %+v: want at least %d idle connections closed to make room", st, 600-DefaultMaxConns)
			}
		})
	}
}

// H2: a connection that sent part of a header and stopped is closed after the frame timeout
// (it used to wait for the idle timeout); one that never sends a frame is too.
func TestHostileHalfHeaderClosed(t *testing.T) {
	s := startServer(t, ServerConfig{Listen: "tcp://127.0.0.1:0", Getenv: noEnv, FrameTimeout: 300 * time.Millisecond, IdleTimeout: time.Hour})
	half := dialRaw(t, s.Addr())
	half.send(binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, wire.Magic), 64)[:7])
	silent := dialRaw(t, s.Addr())
	half.expectClosed()
	silent.expectClosed()
	// One that sent a frame is idle, not dead: it stays past the frame timeout.
	c := dialRaw(t, s.Addr())
	c.call(wire.CmdPing, func(e *wire.Encoder) { e.U32(4) })
	time.Sleep(600 * time.Millisecond)
	if r := c.call(wire.CmdPing, func(e *wire.Encoder) { e.U32(4) }); r != wire.VkSuccess {
		t.Errorf("an idle client within the idle timeout: %s", wire.ResultName(r))
	}
	if _, err := NewServer(ServerConfig{Listen: "tcp://127.0.0.1:0", IdleTimeout: -time.Second}); err == nil || !strings.Contains(err.Error(), "idle timeout") {
		t.Errorf("a negative idle timeout: %v, want refused", err)
	}
}

// budgetServerEnv makes the test binary run one TCP server with the memory budget it names, in
// bytes (serveBudget), for RSS measurements of a server process alone.
const budgetServerEnv = "PERFLAB_VENUSD_TEST_BUDGET"

func serveBudget(total string) int {
	n, err := strconv.ParseInt(total, 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s, err := NewServer(ServerConfig{Listen: "tcp://127.0.0.1:0", Getenv: noEnv, MaxTotalMemoryBytes: n, FrameTimeout: time.Minute})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Serve(ctx); close(done) }()
	fmt.Println(s.Addr())
	io.Copy(io.Discard, os.Stdin)
	cancel()
	<-done
	return 0
}

// rssOf returns a process's resident set size in bytes, from /proc/PID/status; 0 when it has
// none (it ended).
func rssOf(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// H3: connections that each sent one 60 MiB frame and went idle used to keep about 90 MiB of
// server RSS each (8 took it from 11 MB to 732 MB), for minutes after they left. Now a large
// frame's memory is counted against --max-total-memory while its bytes arrive, and returned to
// the system once the frame is executed. 16 such connections against a server in its own
// process with a 256 MiB budget: its RSS stays under the budget (above its idle RSS: the
// runtime's own memory is not the clients'), falls back near idle while they are still
// connected, and stays there after they leave.
func TestHostileIdleMemory(t *testing.T) {
	const budget = 256 << 20
	const frameBytes = 60 << 20
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), budgetServerEnv+"="+strconv.Itoa(budget))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("server: %v", err)
	}
	addr := strings.TrimSpace(line)
	pid := cmd.Process.Pid
	time.Sleep(200 * time.Millisecond)
	idle := rssOf(pid)
	if idle == 0 {
		t.Fatal("no RSS for the server process")
	}

	var peak atomic.Int64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if r := rssOf(pid); r > peak.Load() {
				peak.Store(r)
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()

	// One 60 MiB ping frame, shared by the writers: header, command header, reply size, padding.
	pad := make([]byte, frameBytes)
	head := binary.LittleEndian.AppendUint32(nil, wire.Magic)
	head = binary.LittleEndian.AppendUint32(head, uint32(wire.CmdHeaderSize+4+frameBytes))
	head = binary.LittleEndian.AppendUint32(head, uint32(wire.CmdPing))
	head = binary.LittleEndian.AppendUint32(head, wire.FlagReplyWanted)
	head = binary.LittleEndian.AppendUint32(head, uint32(4+frameBytes))
	head = binary.LittleEndian.AppendUint32(head, 1)
	head = binary.LittleEndian.AppendUint32(head, 4)
	clients := make([]*rawClient, 16)
	var wg sync.WaitGroup
	for i := range clients {
		clients[i] = dialRaw(t, addr)
		wg.Add(1)
		go func(c *rawClient) {
			defer wg.Done()
			if _, err := c.nc.Write(head); err != nil {
				t.Error(err)
				return
			}
			if _, err := c.nc.Write(pad); err != nil {
				t.Error(err)
				return
			}
			if rs, err := c.reply(); err != nil || len(rs) != 1 || result(rs[0]) != wire.VkSuccess {
				t.Errorf("reply to a 60 MiB frame: %v, %v", rs, err)
			}
		}(clients[i])
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// Still connected, idle: the frames' memory is gone.
	near := func(what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			r := rssOf(pid)
			if r < idle+32<<20 {
				t.Logf("%s: RSS %d MiB (idle %d MiB)", what, r>>20, idle>>20)
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("%s: RSS %d MiB, idle was %d MiB", what, r>>20, idle>>20)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	near("16 idle connections after their 60 MiB frames")
	for _, c := range clients {
		c.nc.Close()
	}
	near("after they left")
	close(stopSampling)
	<-sampled
	t.Logf("peak RSS %d MiB, idle %d MiB, budget %d MiB", peak.Load()>>20, idle>>20, budget>>20)
	if p := peak.Load(); p > idle+budget {
		t.Errorf("peak RSS %d MiB: above the idle RSS (%d MiB) plus the budget (%d MiB)", p>>20, idle>>20, budget>>20)
	}
}

// nonReaders opens n connections to the batch server at addr that each ask for replies of
// replyBytes, reqs times, and never read them. close closes them.
func nonReaders(t *testing.T, addr string, n, reqs, replyBytes int) (close func()) {
	t.Helper()
	a, _ := transport.ParseAddr(addr)
	var frames []byte
	for i := 0; i < reqs; i++ {
		frames = append(frames, frameOf(cmdOf(wire.CmdPing, wire.FlagReplyWanted, uint32(i), func(e *wire.Encoder) { e.U32(uint32(replyBytes)) }))...)
	}
	var conns []*net.TCPConn
	for i := 0; i < n; i++ {
		nc, err := net.Dial("tcp", a.Where)
		if err != nil {
			t.Fatal(err)
		}
		tc := nc.(*net.TCPConn)
		tc.SetReadBuffer(16 << 10)
		if _, err := tc.Write(frames); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, tc)
	}
	closeAll := func() {
		for _, c := range conns {
			c.Close()
		}
	}
	t.Cleanup(closeAll) // also keeps them from being collected (and closed) before
	return closeAll
}

// settle waits until the server's memory stops growing for 200 ms (at most 5 s): the
// non-readers' first replies are made and they are stuck.
func settle(s Serving) {
	last, since := s.Stats().LiveBytes, time.Now()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if b := s.Stats().LiveBytes; b != last {
			last, since = b, time.Now()
		} else if time.Since(since) > 200*time.Millisecond {
			return
		}
	}
}

// H4: in the batch loop, clients that never read their replies used to stall everyone (20
// requests for 16 MiB replies made a normal 5-token run take 11 s instead of 0.12 s, and grew
// RSS by 1.2 GiB). Now the loop never writes: each connection's writer does, and a connection
// whose replies are behind gets no more requests executed or read. With 40 non-readers
// alongside, a normal client's run takes at most twice as long as alone (medians of runs
// interleaved in this test), the non-readers hold a bounded amount of memory, and they are
// closed after the frame timeout.
func TestHostileBatchNonReaders(t *testing.T) {
	const frameTimeout = 3 * time.Second
	s, err := NewBatchServer(ServerConfig{Listen: "tcp://127.0.0.1:0", Getenv: noEnv, SocketBufferBytes: 64 << 10, FrameTimeout: frameTimeout})
	if err != nil {
		t.Fatal(err)
	}
	serveUntilCleanup(t, s)
	lc, rounds := smallLLM(32), 5
	if raceEnabled { // the ratio is not asserted there: keep the run short
		lc, rounds = smallLLM(4), 2
	}
	ref, err := ReferenceChecksum(lc)
	if err != nil {
		t.Fatal(err)
	}
	run := func() time.Duration {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		start := time.Now()
		res, err := RunWorkload(ctx, ClientConfig{Connect: s.Addr(), Workload: "llm", LLM: lc, NoVerify: true, Getenv: noEnv})
		d := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if res.Checksum != ref {
			t.Fatalf("checksum %s, want %s", res.Checksum, ref)
		}
		return d
	}
	run() // warm up
	measure := func() (ratio float64, alone, beside []float64) {
		for r := 0; r < rounds; r++ {
			alone = append(alone, float64(run()))
			closeAll := nonReaders(t, s.Addr(), 40, 20, 1<<20)
			settle(s) // their first replies are made; they are stuck
			beside = append(beside, float64(run()))
			closeAll()
		}
		ratio = median(beside) / median(alone)
		t.Logf("normal run alone %v, beside 40 non-readers %v (×%.2f)", time.Duration(median(alone)), time.Duration(median(beside)), ratio)
		return ratio, alone, beside
	}
	// A machine busy with other work can slow one set of rounds; a stall caused by the
	// non-readers shows in every set, so a second set decides. The ratio is a timed check:
	// judged only on request (PERFLAB_PERF_ASSERT=1), as model's and gate's are; on a shared
	// machine (load 13 on 2 cores) two sets came out at ×2.8 and ×4.2 with no stall.
	judge := os.Getenv("PERFLAB_PERF_ASSERT") == "1" && !raceEnabled
	ratio, alone, beside := measure()
	if ratio > 2 && judge {
		ratio, alone, beside = measure()
	}
	if ratio > 2 && judge {
		t.Errorf("a normal run took %.2f× as long beside 40 non-readers as alone (runs alone %v, beside %v)", ratio, alone, beside)
	} else if ratio > 2 {
		t.Logf("ratio ×%.2f above 2 not judged (timed; PERFLAB_PERF_ASSERT=1 judges it)", ratio)
	}

	// Left alone, the non-readers hold a bounded amount of memory and are closed after the
	// frame timeout.
	waitIdle(t, s.Server)
	nonReaders(t, s.Addr(), 40, 20, 1<<20)
	settle(s)
	if st := s.Stats(); st.LiveBytes > 40*(batchConnOutBytes+2<<20) || st.Active != 40 {
		t.Errorf("40 non-readers: %+v; want 40 active holding at most %d bytes", st, 40*(batchConnOutBytes+2<<20))
	}
	deadline := time.Now().Add(frameTimeout + 20*time.Second)
	for s.Stats().Active != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("non-readers still connected %v after the frame timeout: %+v", time.Until(deadline)+frameTimeout+20*time.Second, s.Stats())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st := s.Stats(); st.LiveBytes != 0 {
		t.Errorf("after the non-readers were closed: %d live bytes", st.LiveBytes)
	}
}
