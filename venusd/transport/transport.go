package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/perflab/perflab/trace"
	"github.com/perflab/perflab/units"
	"github.com/perflab/perflab/venusd/wire"
)

// Defaults of the transports.
const (
	DefaultSocketBufferBytes = 4 << 20          // SO_SNDBUF and SO_RCVBUF, as Venus Plus
	DefaultShmRingBytes      = 4 << 20          // bytes of each shm ring (one per direction)
	DefaultFrameTimeout      = 10 * time.Second // how long a large frame waits for room in the Budget when FrameReader.Frame is not set
)

// Counters counts the system calls a transport made to move bytes.
type Counters struct {
	SendCalls atomic.Int64 // successful write(2)
	RecvCalls atomic.Int64 // successful read(2)
	EAGAIN    atomic.Int64 // calls that returned EAGAIN
}

// Conn is a byte-stream transport endpoint: a socket or a pair of shm rings.
type Conn interface {
	io.ReadWriter
	SetReadDeadline(t time.Time) error
	SetWriteDeadline(t time.Time) error
	Close() error
	Counters() *Counters
	Family() trace.Family
	LocalAddr() string
	RemoteAddr() string
}

// sockConn is a tcp or unix socket whose reads and writes are made one system call at a time,
// so that every call is counted exactly.
type sockConn struct {
	nc     net.Conn
	rc     syscall.RawConn
	fam    trace.Family
	ctr    Counters
	rd, wr rawIO // the one Read and the one Write in progress
}

// rawIO is one direction's system call through the runtime's poller: the buffer, the result,
// and the callback given to syscall.RawConn, made once per connection so that a call
// allocates nothing.
type rawIO struct {
	p   []byte
	n   int
	err error
	fn  func(fd uintptr) bool
}

var _ Conn = (*sockConn)(nil)

func newSockConn(nc net.Conn, fam trace.Family) (*sockConn, error) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil, fmt.Errorf("wrap %T: no raw access", nc)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("wrap socket: %w", err)
	}
	s := &sockConn{nc: nc, rc: rc, fam: fam}
	s.rd.fn = s.once(&s.rd, syscall.Read)
	s.wr.fn = s.once(&s.wr, syscall.Write)
	return s, nil
}

func (s *sockConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.rd.p = p
	rerr := s.rc.Read(s.rd.fn)
	n, err := s.rd.n, s.rd.err
	s.rd.p = nil
	if rerr != nil {
		return 0, rerr
	}
	if err != nil {
		return 0, os.NewSyscallError("read", err)
	}
	if n <= 0 {
		return 0, io.EOF
	}
	s.ctr.RecvCalls.Add(1)
	return n, nil
}

// once returns the callback of st's raw read or write: it makes the system call op on st.p
// once (again on EINTR), stores its result in st, and on EAGAIN counts it and asks the
// runtime's poller to wait for the socket.
func (s *sockConn) once(st *rawIO, op func(fd int, p []byte) (int, error)) func(fd uintptr) bool {
	return func(fd uintptr) bool {
		for {
			st.n, st.err = op(int(fd), st.p)
			if st.err == syscall.EINTR {
				continue
			}
			if st.err == syscall.EAGAIN {
				s.ctr.EAGAIN.Add(1)
				return false
			}
			return true
		}
	}
}

func (s *sockConn) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		s.wr.p = p[done:]
		werr := s.rc.Write(s.wr.fn)
		n, err := s.wr.n, s.wr.err
		s.wr.p = nil
		if werr != nil {
			return done, werr
		}
		if err != nil {
			return done, os.NewSyscallError("write", err)
		}
		s.ctr.SendCalls.Add(1)
		done += n
	}
	return done, nil
}

func (s *sockConn) SetReadDeadline(t time.Time) error  { return s.nc.SetReadDeadline(t) }
func (s *sockConn) SetWriteDeadline(t time.Time) error { return s.nc.SetWriteDeadline(t) }
func (s *sockConn) Close() error                       { return s.nc.Close() }
func (s *sockConn) Counters() *Counters                { return &s.ctr }
func (s *sockConn) Family() trace.Family               { return s.fam }
func (s *sockConn) LocalAddr() string                  { return addrString(s.nc.LocalAddr()) }
func (s *sockConn) RemoteAddr() string                 { return addrString(s.nc.RemoteAddr()) }

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}

// tuneTCP sets TCP_NODELAY, TCP_QUICKACK and the socket buffers, as Venus Plus does.
func tuneTCP(c *net.TCPConn, bufBytes int) error {
	if err := c.SetNoDelay(true); err != nil {
		return fmt.Errorf("set TCP_NODELAY: %w", err)
	}
	if bufBytes > 0 {
		if err := c.SetReadBuffer(bufBytes); err != nil {
			return fmt.Errorf("set SO_RCVBUF: %w", err)
		}
		if err := c.SetWriteBuffer(bufBytes); err != nil {
			return fmt.Errorf("set SO_SNDBUF: %w", err)
		}
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("set TCP_QUICKACK: %w", err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 1)
	}); err != nil {
		return fmt.Errorf("set TCP_QUICKACK: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("set TCP_QUICKACK: %w", serr)
	}
	return nil
}

// bufferControl sets SO_RCVBUF and SO_SNDBUF before connect or listen, so that the TCP window
// scale negotiated in the handshake can use them (accepted sockets inherit a listener's).
func bufferControl(bufBytes int) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		if bufBytes <= 0 {
			return nil
		}
		var serr error
		err := c.Control(func(fd uintptr) {
			if e := syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, bufBytes); e != nil {
				serr = e
			}
			if e := syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, bufBytes); e != nil {
				serr = e
			}
		})
		if err != nil {
			return err
		}
		if serr != nil {
			return fmt.Errorf("set socket buffers: %w", serr)
		}
		return nil
	}
}

// SocketBuffer returns the socket buffer size: explicit, else VENUS_SOCKET_BUFFER_BYTES, else
// the default.
func SocketBuffer(explicit int, getenv func(string) string) (int, error) {
	if explicit > 0 {
		return explicit, nil
	}
	if v := getenv("VENUS_SOCKET_BUFFER_BYTES"); v != "" {
		n, err := units.ParseBytes(v)
		if err != nil || n <= 0 || n > 1<<30 {
			return 0, fmt.Errorf("VENUS_SOCKET_BUFFER_BYTES=%q: want a byte count from 1 to 1GiB", v)
		}
		return int(n), nil
	}
	return DefaultSocketBufferBytes, nil
}

// DialOptions are what Dial needs beyond the address.
type DialOptions struct {
	BufBytes int // SO_SNDBUF and SO_RCVBUF of a tcp socket, bytes; 0 leaves the system's
	ShmSpin  int // polls of an shm ring before sleeping; 0 is the default
	ShmRing  int // bytes of each shm ring; 0 is DefaultShmRingBytes
}

// Dial connects to the server at a: a tcp socket tuned as Venus Plus tunes it (TCP_NODELAY,
// TCP_QUICKACK, o.BufBytes of socket buffers), a unix socket, or shm rings made and handed over
// through the server's socket.
func Dial(ctx context.Context, a Addr, o DialOptions) (Conn, error) {
	switch a.Transport {
	case "tcp", "unix":
		var d net.Dialer
		if a.Transport == "tcp" {
			d.Control = bufferControl(o.BufBytes)
		}
		nc, err := d.DialContext(ctx, a.Transport, a.Where)
		if err != nil {
			return nil, err
		}
		fam := trace.FamilyUnix
		if tc, ok := nc.(*net.TCPConn); ok {
			fam = trace.FamilyTCP
			if err := tuneTCP(tc, o.BufBytes); err != nil {
				nc.Close()
				return nil, err
			}
		}
		c, err := newSockConn(nc, fam)
		if err != nil {
			nc.Close()
			return nil, err
		}
		return c, nil
	case "shm":
		return dialShm(ctx, a.Where, o.ShmRing, o.ShmSpin)
	}
	return nil, fmt.Errorf("dial %s: unknown transport", a)
}

// FrameReader reads whole frames from a Conn. The returned payload is valid until the next read.
type FrameReader struct {
	c   Conn
	br  *bufio.Reader
	max int
	hdr [wire.HeaderSize]byte
	buf []byte
	// Idle and Frame are the header and frame deadlines (see Read); zero means none.
	Idle, Frame time.Duration
	dlSet       time.Time     // when the idle deadline was last set
	dlIdle      time.Duration // for how long
	dlFrame     bool          // the frame deadline is in force
	gotFrame    bool          // a frame header has come
	// Budget, when set (the server), accounts for frames larger than KeepFrameBytes: each has
	// its own memory, counted in Budget while it lives (until the next read, or until the
	// owner of Take's result releases it).
	Budget Budget
	cur    *frameMem
	spare  spareFrame
}

// spareFrame keeps the memory of a connection's last large frame for its next one, while its
// frames keep coming: a fresh multi-megabyte buffer per frame cost the server more than the
// copy of the bytes themselves at 10 Gbit/s (zeroing, page faults, garbage collection and the
// scavenger's madvise calls). The kept memory stays counted in the budget; it is freed when
// the connection goes spareKeep to 2·spareKeep without a large frame, when the next large
// frame needs more than it has or less than half of it, and when the reader is released.
type spareFrame struct {
	mu    sync.Mutex
	m     *frameMem
	used  bool // taken since the timer last fired
	done  bool // the reader is released: memory given back is freed
	timer *time.Timer
}

// spareKeep is how long a connection that sends no large frame keeps the memory of its last
// one: at 10 Gbit/s a 1 MiB frame comes every 0.8 ms, an idle connection gives its memory back
// within 2·spareKeep.
const spareKeep = 100 * time.Millisecond

// get returns the kept memory when it suits a frame of size bytes (at least size, at most
// twice), else frees it and returns nil.
func (s *spareFrame) get(size int) *frameMem {
	s.mu.Lock()
	m := s.m
	s.m = nil
	s.used = true
	s.mu.Unlock()
	if m == nil {
		return nil
	}
	if c := cap(m.b); c < size || c > 2*size {
		m.free()
		return nil
	}
	return m
}

// put keeps m for the next large frame, freeing what was kept before; once the reader is
// released it frees m.
func (s *spareFrame) put(m *frameMem) {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		m.free()
		return
	}
	old := s.m
	s.m = m
	s.used = true
	if s.timer == nil {
		s.timer = time.AfterFunc(spareKeep, s.expire)
	}
	s.mu.Unlock()
	old.free()
}

// expire frees the kept memory unless a large frame came since the last call, and rearms the
// timer while there is memory kept.
func (s *spareFrame) expire() {
	s.mu.Lock()
	var m *frameMem
	switch {
	case s.done:
	case s.used:
		s.used = false
		s.timer.Reset(spareKeep)
	default:
		m, s.m = s.m, nil
		s.timer = nil
	}
	s.mu.Unlock()
	m.free()
}

// release frees the kept memory and makes later puts free theirs.
func (s *spareFrame) release() {
	s.mu.Lock()
	m := s.m
	s.m, s.done = nil, true
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	s.mu.Unlock()
	m.free()
}

// Budget is the memory that a server's large frames count against (device.Budget).
type Budget interface {
	// Reserve counts n bytes against the budget, waiting until deadline for room; it reports
	// whether it did.
	Reserve(n int64, deadline time.Time) bool
	// Free gives back n bytes that Reserve counted.
	Free(n int64)
}

// Header returns the header of the last frame read (wire.HeaderSize bytes, valid until the
// next read).
func (f *FrameReader) Header() []byte { return f.hdr[:] }

// Frame memory on the server. A frame up to KeepFrameBytes is read into a buffer each connection
// keeps; a larger one gets memory of its own, freed once the frame is executed, so an idle
// connection holds at most KeepFrameBytes however large its last frame was. Up to mapFrameBytes
// that is the Go heap; beyond, an anonymous mapping, returned to the system at once when freed
// (the Go heap would keep it for minutes). Both count against the server's memory Budget (in
// venusd, ServerConfig.MaxTotalMemoryBytes, with device memory) from the moment their header
// comes (a frame waits up to the frame timeout for room) until they are freed. The mapping's
// pages take memory only as the bytes arrive.
const (
	KeepFrameBytes = 64 << 10 // largest frame read into the buffer a connection keeps, bytes
	mapFrameBytes  = 1 << 20
)

// errNoMemory closes a connection whose frame did not fit the server's memory budget within the
// frame timeout.
var errNoMemory = errors.New("frame does not fit the server's memory budget (--max-total-memory) within the frame timeout")

// frameMem is the memory of one large frame.
type frameMem struct {
	b        []byte
	mapped   bool
	reserved int64
	budget   Budget
}

// free returns the frame's memory and its share of the budget.
func (m *frameMem) free() {
	if m == nil {
		return
	}
	if m.mapped && m.b != nil {
		syscall.Munmap(m.b)
	}
	m.b = nil
	m.budget.Free(m.reserved)
	m.reserved = 0
}

// Release frees the memory of the last frame read, unless Take handed it over, and the memory
// kept for the next large frame; frames taken and freed after it give their memory back to
// the system. The reader's owner calls it once, when it stops reading.
func (f *FrameReader) Release() {
	f.recycle()
	f.spare.release()
}

// recycle keeps the memory of the last frame read for the next large frame, unless Take
// handed it over.
func (f *FrameReader) recycle() {
	if m := f.cur; m != nil {
		f.cur = nil
		f.spare.put(m)
	}
}

// Take hands the last frame's payload over to the caller, with the function that frees it
// (the caller must call it once done, from any goroutine); the reader forgets it.
func (f *FrameReader) Take(payload []byte) ([]byte, func()) {
	if m := f.cur; m != nil {
		f.cur = nil
		return payload, func() { f.spare.put(m) }
	}
	return append([]byte(nil), payload...), func() {}
}

// readLarge reads a payload of size bytes (more than KeepFrameBytes) into memory of its own,
// counted against the budget.
func (f *FrameReader) readLarge(size int) ([]byte, error) {
	wait := f.Frame
	if wait <= 0 {
		wait = DefaultFrameTimeout
	}
	if m := f.spare.get(size); m != nil {
		f.cur = m
		m.b = m.b[:size]
		if _, err := io.ReadFull(f.br, m.b); err != nil {
			return nil, unexpected(err)
		}
		return m.b, nil
	}
	deadline := time.Now().Add(wait)
	m := &frameMem{budget: f.Budget}
	if size > mapFrameBytes {
		b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
		if err != nil {
			return nil, fmt.Errorf("map frame of %d bytes: %w", size, err)
		}
		m.b, m.mapped = b, true
	} else {
		m.b = make([]byte, 0, size)
	}
	f.cur = m
	// The whole frame is counted at once: frames counted piecemeal as their bytes arrive
	// could each hold part of the budget and wait for each other forever.
	if !f.Budget.Reserve(int64(size), deadline) {
		return nil, errNoMemory
	}
	m.reserved = int64(size)
	m.b = m.b[:size]
	if _, err := io.ReadFull(f.br, m.b); err != nil {
		return nil, unexpected(err)
	}
	return m.b, nil
}

// NewFrameReader returns a reader of c's frames; a frame whose payload is over max bytes is
// wire.ErrFrameTooLarge.
func NewFrameReader(c Conn, max int) *FrameReader {
	return &FrameReader{c: c, br: bufio.NewReaderSize(c, 64<<10), max: max}
}

// growChunk bounds how much a frame's buffer grows ahead of the bytes that actually arrived, so a
// peer that declares a large frame and sends nothing costs little memory.
const growChunk = 1 << 20

// Read returns the next frame's payload, valid until the next Read (or, once taken, until
// freed); Header gives its header.
//
// Deadlines: waiting for a frame's first byte, the idle deadline (the frame deadline while no
// frame has come yet, when that is shorter: a connection that never sends a frame is not
// idle but dead); from its first byte, the whole frame must arrive within the frame deadline,
// so a peer that sends part of a header and stops is closed as soon as one that stops in the
// middle of a payload.
func (f *FrameReader) Read() ([]byte, error) {
	f.recycle()
	idle := f.Idle
	if !f.gotFrame && f.Frame > 0 && (idle <= 0 || f.Frame < idle) {
		idle = f.Frame
	}
	if idle > 0 {
		// Setting a deadline costs a timer update: refresh the idle one only every idle/16, so
		// an idle client is closed between 15/16 of the timeout and the timeout.
		if now := time.Now(); f.dlFrame || idle != f.dlIdle || now.Sub(f.dlSet) > idle/16 {
			f.c.SetReadDeadline(now.Add(idle))
			f.dlSet, f.dlIdle, f.dlFrame = now, idle, false
		}
	}
	framed := false // the frame deadline is set for this frame
	if f.Frame > 0 {
		if _, err := f.br.Peek(1); err != nil {
			return nil, err
		}
		if f.br.Buffered() < wire.HeaderSize {
			f.c.SetReadDeadline(time.Now().Add(f.Frame))
			f.dlFrame, framed = true, true
		}
	}
	if _, err := io.ReadFull(f.br, f.hdr[:]); err != nil {
		if framed {
			return nil, unexpected(err)
		}
		return nil, err
	}
	h, err := wire.ParseFrameHeader(f.hdr[:], f.max)
	if err != nil {
		return nil, err
	}
	f.gotFrame = true
	size := int(h.Size)
	if f.Frame > 0 && !framed && f.br.Buffered() < size { // the payload is not all here yet
		f.c.SetReadDeadline(time.Now().Add(f.Frame))
		f.dlFrame = true
	}
	if f.Budget != nil && size > KeepFrameBytes {
		return f.readLarge(size)
	}
	if size <= cap(f.buf) {
		f.buf = f.buf[:size]
		if _, err := io.ReadFull(f.br, f.buf); err != nil {
			return nil, unexpected(err)
		}
		return f.buf, nil
	}
	// Grow as the bytes arrive.
	got := 0
	f.buf = f.buf[:0]
	for got < size {
		want := min(size, max(2*cap(f.buf), growChunk))
		if want > cap(f.buf) {
			nb := make([]byte, got, want)
			copy(nb, f.buf[:got])
			f.buf = nb
		}
		f.buf = f.buf[:want]
		n, err := io.ReadFull(f.br, f.buf[got:want])
		got += n
		if err != nil {
			return nil, unexpected(err)
		}
	}
	return f.buf[:size], nil
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
