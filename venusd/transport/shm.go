package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/perflab/perflab/trace"
)

// The shm transport: a memfd made by the client, sealed against shrinking and growing, and passed
// to the server over a Unix socket in the abstract namespace (SCM_RIGHTS). The file holds two
// single-producer single-consumer byte rings, one per direction. Readers poll the ring for a
// bounded number of spins, then sleep on a futex in the shared page; a writer makes the futex
// wake call only when its reader said it sleeps. A busy connection makes no system call per
// message. The Unix socket stays open only to notice when the peer goes away.
//
// Layout (docs/venus-protocol.md, "Shared-memory transport"):
//
//	0      u32 magic "VSHM", u32 version 1, u64 ring bytes
//	64     u32 closed (either side)
//	4096   ring 0 control (client → server): head @0, tail @64, data futex @128, data waiters @132,
//	       space futex @192, space waiters @196
//	4352   ring 1 control (server → client), same layout
//	8192   ring 0 data, then ring 1 data
const (
	ShmMagic      = 0x4D485356 // "VSHM", first word of the file and of the handshake
	ShmVersion    = 1          // layout version
	ShmHeaderSize = 8192       // bytes before ring 0's data
	ShmCtl0       = 4096       // offset of ring 0's control block (client → server)
	ShmCtl1       = 4096 + 256 // offset of ring 1's control block (server → client)
	ShmMinRing    = 64 << 10   // smallest ring, bytes (a power of two)
	ShmMaxRing    = 64 << 20   // largest ring, bytes (a power of two)
	// defaultShmSpin polls before sleeping: about 30-60 µs of loads on this class of machine (a
	// poll is one load of a shared cache line), plus a yield every 64 polls (shmYieldEvery),
	// longer than the peer needs to answer a small command, shorter than a scheduler tick, so
	// two spinning peers on two cores do not starve others.
	defaultShmSpin = 50000
	// shmMinPoll is the floor of the adaptive poll: about 10 µs, longer than a peer on another
	// core takes to answer a small command (1-3 µs with Go's dispatch), so that an answer is
	// caught by a plain load and not by the slower sched_yield phase.
	shmMinPoll = 16384
	futexWait  = 0
	futexWake  = 1
)

var errShmCorrupt = errors.New("shm ring corrupt: head/tail out of range")

// ShmSocketName returns the Unix socket, in the abstract namespace, where the shm server named
// name takes its clients' rings.
func ShmSocketName(name string) string { return "@perflab-venus-shm." + name }

// ring is one direction of a shm connection as one side sees it.
type ring struct {
	head, tail     *uint64 // shared
	dataSeq, dataW *uint32
	spaceSeq, spW  *uint32
	data           []byte // shared, len = cap
	mask           uint64
	pos            uint64 // private copy of our own index (head for a writer, tail for a reader)
	budget         int    // polls before yielding, adapted to how the last waits went
	misses         int    // waits in a row the poll and the yields missed
	backoff        int    // waits left to sleep at once, polling only shmBackoffPoll times
}

func newRing(mem []byte, ctl int, data []byte) *ring {
	p := unsafe.Pointer(&mem[ctl])
	return &ring{
		head:     (*uint64)(p),
		tail:     (*uint64)(unsafe.Add(p, 64)),
		dataSeq:  (*uint32)(unsafe.Add(p, 128)),
		dataW:    (*uint32)(unsafe.Add(p, 132)),
		spaceSeq: (*uint32)(unsafe.Add(p, 192)),
		spW:      (*uint32)(unsafe.Add(p, 196)),
		data:     data,
		mask:     uint64(len(data) - 1),
	}
}

// shmConn is one side of a shm connection.
type shmConn struct {
	mem       []byte
	closedP   *uint32 // shared closed flag
	rx, tx    *ring
	ctl       *net.UnixConn
	spin      int
	local     string
	remote    string
	ctr       Counters
	closed    atomic.Bool
	active    atomic.Int32
	deadline  atomic.Int64 // read deadline, unix ns; 0 none
	wdeadline atomic.Int64 // write deadline, unix ns; 0 none
	once      sync.Once
	watchEnd  chan struct{}
}

var _ Conn = (*shmConn)(nil)

// ShmLayoutSize returns the bytes of the shared file for rings of ringBytes each.
func ShmLayoutSize(ringBytes int) int { return ShmHeaderSize + 2*ringBytes }

func validRingBytes(n uint64) bool {
	return n >= ShmMinRing && n <= ShmMaxRing && n&(n-1) == 0
}

// newShmConn wraps a validated mapping. client says which ring is ours to write.
func newShmConn(mem []byte, ringBytes int, client bool, ctl *net.UnixConn, spin int, local, remote string) *shmConn {
	d0 := mem[ShmHeaderSize : ShmHeaderSize+ringBytes]
	d1 := mem[ShmHeaderSize+ringBytes : ShmHeaderSize+2*ringBytes]
	r0, r1 := newRing(mem, ShmCtl0, d0), newRing(mem, ShmCtl1, d1)
	if spin <= 0 {
		spin = defaultShmSpin
	}
	c := &shmConn{mem: mem, closedP: (*uint32)(unsafe.Pointer(&mem[64])), ctl: ctl, spin: spin,
		local: local, remote: remote, watchEnd: make(chan struct{})}
	if client {
		c.tx, c.rx = r0, r1
	} else {
		c.tx, c.rx = r1, r0
	}
	// Our private indices start where the shared ones are (0 on a fresh file).
	c.tx.pos = atomic.LoadUint64(c.tx.head)
	c.rx.pos = atomic.LoadUint64(c.rx.tail)
	go c.watch()
	return c
}

// watch notices the peer going away: the control socket carries no data after the handshake.
func (c *shmConn) watch() {
	defer close(c.watchEnd)
	var b [16]byte
	for {
		if _, err := c.ctl.Read(b[:]); err != nil {
			break
		}
	}
	c.markClosed()
}

func (c *shmConn) markClosed() {
	c.closed.Store(true)
	atomic.StoreUint32(c.closedP, 1)
	for _, r := range []*ring{c.rx, c.tx} {
		atomic.AddUint32(r.dataSeq, 1)
		futex(r.dataSeq, futexWake, 1<<30, 0)
		atomic.AddUint32(r.spaceSeq, 1)
		futex(r.spaceSeq, futexWake, 1<<30, 0)
	}
}

func (c *shmConn) isClosed() bool {
	return c.closed.Load() || atomic.LoadUint32(c.closedP) != 0
}

// futex makes the futex system call on a word of the shared mapping (not FUTEX_PRIVATE: the
// other process waits on the same page).
func futex(addr *uint32, op int, val uint32, timeout time.Duration) {
	var ts *syscall.Timespec
	if timeout > 0 {
		t := syscall.NsecToTimespec(int64(timeout))
		ts = &t
	}
	syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), uintptr(op), uintptr(val), uintptr(unsafe.Pointer(ts)), 0, 0)
}

// shmYieldEvery is how many polls (less one) pass between two yields of the processor while a
// ring waits: 64 polls take about 0.1 µs, so a goroutine with work that shares a processor with
// pollers (a server's loop and writers, other clients: perflab bench runs them all in one
// process) runs within a fraction of a µs instead of after a whole poll.
const shmYieldEvery = 63

// shmBackoffAfter is how many waits in a row the poll must miss (the peer answered only after
// this side slept) before the ring stops polling; shmBackoffWaits is how many waits it then
// sleeps at once before it probes with a full poll again; shmBackoffPoll is its short poll.
const (
	shmBackoffAfter = 8
	shmBackoffWaits = 64
	shmBackoffPoll  = 256
	// shmLateWait is how long a wait the poll caught may take before it counts as a miss: a
	// futex wake-up costs about 30-60 µs on a halted vCPU, so a poll that took longer (its
	// thread lost the CPU meanwhile, to other pollers or other programs) saved nothing.
	shmLateWait = 100 * time.Microsecond
)

// ShmWaitStats counts the waits of this process's shm rings (a reader finding its ring empty, a
// writer finding it full) since the process started, and how each ended.
type ShmWaitStats struct {
	Waits     int64 // waits for the peer
	Polled    int64 // ended while polling the ring (no system call)
	Yielded   int64 // ended while yielding the CPU between polls (sched_yield)
	Slept     int64 // ended after sleeping on the futex (the peer made a wake-up call)
	Late      int64 // of Polled and Yielded: caught only after shmLateWait (the poller lost its CPU)
	BackedOff int64 // skipped most of the poll because polling had stopped paying on that ring
	PollNs    int64 // time spent polling and yielding, ns: the CPU the waits burnt
}

// Sub returns the counts between o and s.
func (s ShmWaitStats) Sub(o ShmWaitStats) ShmWaitStats {
	return ShmWaitStats{Waits: s.Waits - o.Waits, Polled: s.Polled - o.Polled, Yielded: s.Yielded - o.Yielded,
		Slept: s.Slept - o.Slept, Late: s.Late - o.Late, BackedOff: s.BackedOff - o.BackedOff, PollNs: s.PollNs - o.PollNs}
}

var shmWaits struct {
	waits, polled, yielded, slept, late, backedOff, pollNs atomic.Int64
}

// ShmWaits returns the process's shm wait counters.
func ShmWaits() ShmWaitStats {
	return ShmWaitStats{Waits: shmWaits.waits.Load(), Polled: shmWaits.polled.Load(), Yielded: shmWaits.yielded.Load(),
		Slept: shmWaits.slept.Load(), Late: shmWaits.late.Load(), BackedOff: shmWaits.backedOff.Load(), PollNs: shmWaits.pollNs.Load()}
}

// waitFor blocks until the shared word at *word differs from old (the peer moved its index),
// the connection closes, or the deadline passes: it spins, then blocks, as polling daemons do.
//
// It polls up to r.budget times, yielding the processor to other goroutines every 64 polls; then
// polls as long again with sched_yield between polls, which lets a peer thread queued behind this
// one on a busy core run at once (on an idle core the call returns at once); then sleeps on seq
// with waiters set. The peer wakes it only when waiters is set, so a busy connection makes no
// system call.
//
// The budget adapts to how the waits go: one the poll caught doubles it (up to c.spin), one it
// missed halves it (down to shmMinPoll, enough for a peer on another core to answer a small
// command), one the yields caught lengthens it by a quarter. When shmBackoffAfter waits in a
// row ended only after a sleep, or were caught only after shmLateWait, polling does not pay on
// this ring (more pollers than CPUs, other programs taking the CPUs, or a peer that takes long):
// the ring backs off, polls only shmBackoffPoll times and sleeps, for shmBackoffWaits waits,
// then probes with a full poll again.
func (c *shmConn) waitFor(r *ring, word *uint64, old uint64, seq, waiters *uint32, deadline *atomic.Int64) error {
	shmWaits.waits.Add(1)
	if r.budget == 0 {
		r.budget = c.spin
	}
	t0 := time.Now()
	polls, yields := r.budget, c.spin/256
	if r.backoff > 0 {
		r.backoff--
		polls, yields = min(shmBackoffPoll, r.budget), 0
		shmWaits.backedOff.Add(1)
	}
	// caught counts a wait the poll or the yields caught; a late one counts as a miss.
	caught := func(counter *atomic.Int64) bool {
		counter.Add(1)
		d := time.Since(t0)
		shmWaits.pollNs.Add(int64(d))
		if d > shmLateWait {
			shmWaits.late.Add(1)
			r.miss()
			return false
		}
		r.misses = 0
		return true
	}
	for i := 0; i < polls; i++ {
		if atomic.LoadUint64(word) != old {
			if caught(&shmWaits.polled) && r.backoff == 0 {
				r.budget = min(c.spin, 2*r.budget)
			}
			return nil
		}
		if i&shmYieldEvery == shmYieldEvery {
			if c.isClosed() {
				break
			}
			runtime.Gosched()
		}
	}
	r.budget = max(min(shmMinPoll, c.spin), r.budget/2)
	for i := 0; i < yields; i++ {
		if atomic.LoadUint64(word) != old {
			if caught(&shmWaits.yielded) {
				r.budget = min(c.spin, r.budget+r.budget/4)
			}
			return nil
		}
		if c.isClosed() {
			break
		}
		syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
	}
	shmWaits.pollNs.Add(int64(time.Since(t0)))
	r.miss()
	for {
		if atomic.LoadUint64(word) != old {
			shmWaits.slept.Add(1)
			return nil
		}
		if c.isClosed() {
			return io.EOF
		}
		timeout := 50 * time.Millisecond
		if dl := deadline.Load(); dl != 0 {
			left := time.Until(time.Unix(0, dl))
			if left <= 0 {
				return os.ErrDeadlineExceeded
			}
			timeout = min(timeout, left)
		}
		atomic.StoreUint32(waiters, 1)
		s := atomic.LoadUint32(seq)
		if atomic.LoadUint64(word) != old || c.isClosed() {
			atomic.StoreUint32(waiters, 0)
			continue
		}
		futex(seq, futexWait, s, timeout)
		atomic.StoreUint32(waiters, 0)
	}
}

// miss counts a wait the poll did not pay for, and backs the ring off after shmBackoffAfter in
// a row.
func (r *ring) miss() {
	if r.misses++; r.misses >= shmBackoffAfter && r.backoff == 0 {
		r.backoff, r.misses = shmBackoffWaits, 0
	}
}

func (c *shmConn) enter() bool {
	c.active.Add(1)
	if c.closed.Load() {
		c.active.Add(-1)
		return false
	}
	return true
}

func (c *shmConn) leave() { c.active.Add(-1) }

// Read copies bytes out of the receive ring.
func (c *shmConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if !c.enter() {
		return 0, io.EOF
	}
	defer c.leave()
	r := c.rx
	head := atomic.LoadUint64(r.head)
	if head == r.pos {
		err := c.waitFor(r, r.head, r.pos, r.dataSeq, r.dataW, &c.deadline)
		head = atomic.LoadUint64(r.head)
		if head == r.pos { // data that arrived before a close is still delivered
			if err == nil {
				err = io.EOF
			}
			return 0, err
		}
	}
	avail := head - r.pos
	if avail > uint64(len(r.data)) {
		c.markClosed()
		return 0, errShmCorrupt
	}
	n := min(avail, uint64(len(p)))
	off := r.pos & r.mask
	k := copy(p[:n], r.data[off:])
	if uint64(k) < n {
		copy(p[k:n], r.data)
	}
	r.pos += n
	atomic.StoreUint64(r.tail, r.pos)
	if atomic.LoadUint32(r.spW) != 0 {
		atomic.AddUint32(r.spaceSeq, 1)
		futex(r.spaceSeq, futexWake, 1, 0)
	}
	return int(n), nil
}

// Write copies p into the send ring, waiting for space as needed.
func (c *shmConn) Write(p []byte) (int, error) {
	if !c.enter() {
		return 0, net.ErrClosed
	}
	defer c.leave()
	r := c.tx
	size := uint64(len(r.data))
	done := 0
	for done < len(p) {
		tail := atomic.LoadUint64(r.tail)
		if r.pos-tail == size { // full: wait for the reader to move its tail
			if err := c.waitFor(r, r.tail, tail, r.spaceSeq, r.spW, &c.wdeadline); err != nil {
				return done, err
			}
			continue
		}
		if c.isClosed() {
			return done, net.ErrClosed
		}
		used := r.pos - tail
		if used > size {
			c.markClosed()
			return done, errShmCorrupt
		}
		n := min(size-used, uint64(len(p)-done))
		off := r.pos & r.mask
		k := copy(r.data[off:], p[done:done+int(n)])
		if uint64(k) < n {
			copy(r.data, p[done+k:done+int(n)])
		}
		r.pos += n
		atomic.StoreUint64(r.head, r.pos)
		if atomic.LoadUint32(r.dataW) != 0 {
			atomic.AddUint32(r.dataSeq, 1)
			futex(r.dataSeq, futexWake, 1, 0)
		}
		done += int(n)
	}
	return done, nil
}

func (c *shmConn) SetReadDeadline(t time.Time) error {
	if t.IsZero() {
		c.deadline.Store(0)
	} else {
		c.deadline.Store(t.UnixNano())
	}
	return nil
}

func (c *shmConn) SetWriteDeadline(t time.Time) error {
	if t.IsZero() {
		c.wdeadline.Store(0)
	} else {
		c.wdeadline.Store(t.UnixNano())
	}
	return nil
}

// Close marks the connection closed for both sides, waits for this side's readers and writers
// to leave the mapping, then unmaps it.
func (c *shmConn) Close() error {
	c.once.Do(func() {
		c.markClosed()
		c.ctl.Close()
		<-c.watchEnd
		for c.active.Load() != 0 {
			c.markClosed()
			time.Sleep(100 * time.Microsecond)
		}
		syscall.Munmap(c.mem)
	})
	return nil
}

func (c *shmConn) Counters() *Counters  { return &c.ctr }
func (c *shmConn) Family() trace.Family { return trace.FamilySHM }
func (c *shmConn) LocalAddr() string    { return c.local }
func (c *shmConn) RemoteAddr() string   { return c.remote }

// dialShm creates the rings, hands them to the server named name, and waits for its ack.
func dialShm(ctx context.Context, name string, ringBytes, spin int) (Conn, error) {
	if ringBytes == 0 {
		ringBytes = DefaultShmRingBytes
	}
	if !validRingBytes(uint64(ringBytes)) {
		return nil, fmt.Errorf("shm ring of %d bytes: want a power of two from %d to %d", ringBytes, ShmMinRing, ShmMaxRing)
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", ShmSocketName(name))
	if err != nil {
		return nil, fmt.Errorf("dial shm:///%s: %w", name, err)
	}
	uc := nc.(*net.UnixConn)
	size := ShmLayoutSize(ringBytes)
	f, err := NewSealedFile(size)
	if err != nil {
		uc.Close()
		return nil, err
	}
	defer f.Close()
	mem, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		uc.Close()
		return nil, fmt.Errorf("map shm file: %w", err)
	}
	binary.LittleEndian.PutUint32(mem[0:], ShmMagic)
	binary.LittleEndian.PutUint32(mem[4:], ShmVersion)
	binary.LittleEndian.PutUint64(mem[8:], uint64(ringBytes))
	var hello [16]byte
	binary.LittleEndian.PutUint32(hello[0:], ShmMagic)
	binary.LittleEndian.PutUint32(hello[4:], ShmVersion)
	binary.LittleEndian.PutUint64(hello[8:], uint64(ringBytes))
	fail := func(err error) (Conn, error) {
		syscall.Munmap(mem)
		uc.Close()
		return nil, err
	}
	if _, _, err := uc.WriteMsgUnix(hello[:], syscall.UnixRights(int(f.Fd())), nil); err != nil {
		return fail(fmt.Errorf("send shm file: %w", err))
	}
	if dl, ok := ctx.Deadline(); ok {
		uc.SetReadDeadline(dl)
	} else {
		uc.SetReadDeadline(time.Now().Add(10 * time.Second))
	}
	var ack [1]byte
	if _, err := io.ReadFull(uc, ack[:]); err != nil || ack[0] != 'K' {
		if err == nil {
			err = fmt.Errorf("server answered %q", ack[0])
		}
		return fail(fmt.Errorf("shm handshake: %w", err))
	}
	uc.SetReadDeadline(time.Time{})
	return newShmConn(mem, ringBytes, true, uc, spin, "shm-client", "shm:///"+name), nil
}

// NewSealedFile creates the shared file: a memfd of size bytes, sealed so that neither side can
// shrink or grow it, nor change the seals.
func NewSealedFile(size int) (*os.File, error) {
	fd, err := unix.MemfdCreate("perflab-venus-shm", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("create shm memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "perflab-venus-shm")
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		return nil, fmt.Errorf("size shm memfd: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		f.Close()
		return nil, fmt.Errorf("seal shm memfd: %w", err)
	}
	return f, nil
}

// acceptShm completes the server side of a handshake on a Unix connection: it receives the file,
// checks its size and header once, maps it, and acks.
func acceptShm(uc *net.UnixConn, name string, spin int, timeout time.Duration) (Conn, error) {
	uc.SetReadDeadline(time.Now().Add(timeout))
	var hello [16]byte
	oob := make([]byte, syscall.CmsgSpace(4*4))
	n, oobn, _, _, err := uc.ReadMsgUnix(hello[:], oob)
	if err != nil {
		return nil, fmt.Errorf("shm handshake: %w", err)
	}
	msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return nil, fmt.Errorf("shm handshake: %w", err)
	}
	var fds []int
	for _, m := range msgs {
		if f, err := syscall.ParseUnixRights(&m); err == nil {
			fds = append(fds, f...)
		}
	}
	defer func() {
		for _, fd := range fds {
			syscall.Close(fd)
		}
	}()
	if n != len(hello) || len(fds) != 1 {
		return nil, fmt.Errorf("shm handshake: want a 16-byte hello and one file, got %d bytes and %d files", n, len(fds))
	}
	if binary.LittleEndian.Uint32(hello[0:]) != ShmMagic || binary.LittleEndian.Uint32(hello[4:]) != ShmVersion {
		return nil, errors.New("shm handshake: bad magic or version")
	}
	ringBytes := binary.LittleEndian.Uint64(hello[8:])
	if !validRingBytes(ringBytes) {
		return nil, fmt.Errorf("shm handshake: ring of %d bytes: want a power of two from %d to %d", ringBytes, ShmMinRing, ShmMaxRing)
	}
	size := ShmLayoutSize(int(ringBytes))
	// The server maps memory its client could otherwise shrink under it (a SIGBUS that would kill
	// the server): only a memfd sealed against shrinking is accepted. Seals never come off, so
	// the size checked below holds for as long as the mapping lives.
	seals, err := unix.FcntlInt(uintptr(fds[0]), unix.F_GET_SEALS, 0)
	if err != nil || seals&unix.F_SEAL_SHRINK == 0 {
		return nil, errors.New("shm handshake: the ring file is not a memfd sealed against shrinking (F_SEAL_SHRINK)")
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fds[0], &st); err != nil {
		return nil, fmt.Errorf("shm handshake: %w", err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Size != int64(size) {
		return nil, fmt.Errorf("shm handshake: file of %d bytes, want a regular file of %d", st.Size, size)
	}
	mem, err := syscall.Mmap(fds[0], 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shm handshake: map: %w", err)
	}
	// The header is read once; from here on only head and tail are read from shared memory, and
	// each read is checked against the ring size before use.
	if binary.LittleEndian.Uint32(mem[0:]) != ShmMagic || binary.LittleEndian.Uint64(mem[8:]) != ringBytes {
		syscall.Munmap(mem)
		return nil, errors.New("shm handshake: mapped header does not match the hello")
	}
	if _, err := uc.Write([]byte{'K'}); err != nil {
		syscall.Munmap(mem)
		return nil, fmt.Errorf("shm handshake: %w", err)
	}
	uc.SetReadDeadline(time.Time{})
	return newShmConn(mem, int(ringBytes), false, uc, spin, "shm:///"+name, "shm-client"), nil
}

// shmFrameOut and shmFrameIn are called with each whole frame (header included) a client sent
// or received over a shared-memory ring, and do nothing: no system call carries shm frames, so
// these are where a uprobe sees them (perflab record --uprobe BINARY:SYMBOL,send,buf=arg1,
// len=arg2,go, in Go's register ABI: the slice's pointer and length are the first two words).
//
//go:noinline
func shmFrameOut(frame []byte) {}

// shmFrameIn: see shmFrameOut.
//
//go:noinline
func shmFrameIn(frame []byte) {}
