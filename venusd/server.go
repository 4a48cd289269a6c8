package venusd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/perflab/perflab/trace"
	"github.com/perflab/perflab/venusd/device"
	"github.com/perflab/perflab/venusd/tracer"
	"github.com/perflab/perflab/venusd/transport"
	"github.com/perflab/perflab/venusd/wire"
)

// Server is a running venusd server: it accepts clients and runs each one's commands on its own
// emulated device.
type Server struct {
	cfg    ServerConfig
	addr   transport.Addr
	ln     net.Listener
	getenv func(string) string
	buf    int

	live     device.Budget
	accepted atomic.Int64
	active   atomic.Int64
	rejected atomic.Int64
	protoErr atomic.Int64
	frames   atomic.Int64

	evictions atomic.Int64

	mu       sync.Mutex
	conns    map[*serverConn]struct{}
	evicting int         // connections in conns closed by evictIdleLocked that have not left yet
	closing  bool        // under mu
	closingA atomic.Bool // closing, readable without mu on the per-frame path
	wg       sync.WaitGroup
	serving  atomic.Bool
	closeErr error
	once     sync.Once
}

// serverConn is one client of the server.
type serverConn struct {
	c    transport.Conn
	raw  net.Conn // the accepted socket (the control socket for shm)
	mu   sync.Mutex
	idle bool // waiting for a frame header: safe to interrupt on shutdown

	// What admit needs to choose a connection to close when the server is full.
	since   atomic.Int64 // when the last complete frame came, or the connection did: unix ns
	framed  atomic.Bool  // a complete frame has come
	evicted bool         // under Server.mu: closed to make room, no longer counted against MaxConns
}

// activity records that a complete frame came.
func (s *Server) activity(sc *serverConn) {
	sc.since.Store(time.Now().UnixNano())
	if !sc.framed.Load() {
		sc.framed.Store(true)
	}
}

// withDefaults fills zero fields with their defaults.
func (cfg ServerConfig) withDefaults() ServerConfig {
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	setDefault := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	setDefault(&cfg.MaxConns, DefaultMaxConns)
	setDefault(&cfg.MaxFrameBytes, DefaultMaxFrameBytes)
	setDefault(&cfg.MaxObjects, DefaultMaxObjects)
	if cfg.MaxMemoryBytes <= 0 {
		cfg.MaxMemoryBytes = DefaultMaxMemoryBytes
	}
	if cfg.MaxTotalMemoryBytes <= 0 {
		cfg.MaxTotalMemoryBytes = DefaultMaxTotalMemoryBytes
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.FrameTimeout <= 0 {
		cfg.FrameTimeout = DefaultFrameTimeout
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = DefaultShutdownGrace
	}
	return cfg
}

// Timeout limits: ValidateTimeout refuses durations outside them.
const (
	MinTimeout = time.Millisecond
	MaxTimeout = 24 * time.Hour
)

// ValidateTimeout checks one of ServerConfig's timeouts, named name in the error: 0 (the
// default) or from MinTimeout to MaxTimeout.
func ValidateTimeout(name string, d time.Duration) error {
	if d != 0 && (d < MinTimeout || d > MaxTimeout) {
		return fmt.Errorf("%s %v: want %v to %v", name, d, MinTimeout, MaxTimeout)
	}
	return nil
}

// NewServer checks cfg and binds its address. A TCP address that is not loopback is refused
// unless cfg.AllowRemote is set, and then a warning naming the risk goes to cfg.Log.
func NewServer(cfg ServerConfig) (*Server, error) {
	for _, t := range []struct {
		name string
		d    time.Duration
	}{{"idle timeout", cfg.IdleTimeout}, {"frame timeout", cfg.FrameTimeout}, {"shutdown grace", cfg.ShutdownGrace}} {
		if err := ValidateTimeout(t.name, t.d); err != nil {
			return nil, err
		}
	}
	cfg = cfg.withDefaults()
	if cfg.MaxFrameBytes > 1<<30 {
		return nil, fmt.Errorf("max frame %d bytes: at most 1GiB", cfg.MaxFrameBytes)
	}
	a, err := transport.ParseAddr(cfg.Listen)
	if err != nil {
		return nil, err
	}
	if !a.IsLoopback() {
		if !cfg.AllowRemote {
			return nil, fmt.Errorf("listen %s: not a loopback address; venusd has no authentication, so any host that reaches it can allocate memory and run kernels here: pass --allow-remote (AllowRemote) to accept that risk", a)
		}
		fmt.Fprintf(cfg.Log, "venusd: WARNING: listening on %s, beyond this machine: venusd has no authentication or encryption; any host that can reach this port can allocate up to %d bytes per connection and run kernels here\n", a, cfg.MaxMemoryBytes)
	}
	buf, err := transport.SocketBuffer(cfg.SocketBufferBytes, cfg.Getenv)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, addr: a, getenv: cfg.Getenv, buf: buf, conns: map[*serverConn]struct{}{}}
	s.live.MaxBytes = cfg.MaxTotalMemoryBytes
	s.ln, err = transport.Listen(a, buf)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", a, err)
	}
	if a.Transport == "tcp" {
		s.addr.Where = s.ln.Addr().String()
	}
	return s, nil
}

// Addr returns the address the server listens on, with the port it got when asked for port 0.
func (s *Server) Addr() string { return s.addr.String() }

// Stats returns the server's counters.
func (s *Server) Stats() ServerStats {
	return ServerStats{
		Accepted: s.accepted.Load(), Active: s.active.Load(), Rejected: s.rejected.Load(),
		LiveObjects: s.live.Objects.Load(), LiveBytes: s.live.Bytes.Load(),
		ProtocolErrors: s.protoErr.Load(), Frames: s.frames.Load(), Evicted: s.evictions.Load(),
	}
}

// Serve accepts clients until ctx is cancelled or Close is called. On cancellation it stops
// accepting, lets each connection finish the frame it is executing (up to ShutdownGrace), closes
// them all, and returns nil once every connection goroutine has ended.
func (s *Server) Serve(ctx context.Context) error {
	if !s.serving.CompareAndSwap(false, true) {
		return errors.New("serve: already serving")
	}
	stop := make(chan struct{})
	var watch sync.WaitGroup
	watch.Add(1)
	go func() {
		defer watch.Done()
		select {
		case <-ctx.Done():
			s.shutdown(s.cfg.ShutdownGrace)
		case <-stop:
		}
	}()
	defer func() {
		close(stop)
		watch.Wait()
	}()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				s.wg.Wait()
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			s.shutdown(0)
			return fmt.Errorf("accept: %w", err)
		}
		sc, ok := s.admit(nc)
		if !ok {
			continue
		}
		go s.handle(sc)
	}
}

// Close stops the server at once: the listener and every connection are closed. It waits for
// the connection goroutines to end.
func (s *Server) Close() error {
	s.shutdown(0)
	return s.closeErr
}

// shutdown stops accepting, interrupts idle connections at once, gives busy ones grace to finish
// their frame, then closes everything and waits.
func (s *Server) shutdown(grace time.Duration) {
	s.once.Do(func() {
		s.mu.Lock()
		s.closing = true
		s.closingA.Store(true)
		conns := make([]*serverConn, 0, len(s.conns))
		for sc := range s.conns {
			conns = append(conns, sc)
		}
		s.mu.Unlock()
		if err := s.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			s.closeErr = err
		}
		for _, sc := range conns {
			sc.interruptIfIdle()
		}
		done := make(chan struct{})
		go func() { s.wg.Wait(); close(done) }()
		if grace > 0 {
			select {
			case <-done:
			case <-time.After(grace):
			}
		}
		s.mu.Lock()
		for sc := range s.conns {
			sc.closeNow()
		}
		s.mu.Unlock()
		<-done
	})
}

func (sc *serverConn) interruptIfIdle() {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.idle {
		sc.closeNowLocked()
	}
}

func (sc *serverConn) closeNow() {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.closeNowLocked()
}

func (sc *serverConn) closeNowLocked() {
	if sc.c != nil {
		sc.c.Close()
	} else {
		sc.raw.Close()
	}
}

// setIdle marks the connection as waiting for a header (or not); it reports false when the
// server is shutting down and the connection should end instead.
func (s *Server) setIdle(sc *serverConn, idle bool) bool {
	sc.mu.Lock()
	sc.idle = idle
	sc.mu.Unlock()
	return !(idle && s.closingA.Load())
}

type deferredRec struct {
	cmd    wire.CommandType
	req    uint32
	result int32
}

// setWriteDeadline gives a reply write FrameTimeout: a client that does not take its replies
// is closed then.
func (s *Server) setWriteDeadline(c transport.Conn) {
	c.SetWriteDeadline(time.Now().Add(s.cfg.FrameTimeout))
}

// maxDeferred bounds the failures of no-reply commands kept for the next reply frame.
const maxDeferred = 64

func (s *Server) handle(sc *serverConn) {
	defer s.leave(sc)
	c, ok := s.openConn(sc)
	if !ok {
		return
	}
	defer c.Close()
	// A panic here would be a bug; it ends this client only, never the server.
	defer func() {
		if r := recover(); r != nil {
			s.protoErr.Add(1)
			fmt.Fprintf(s.cfg.Log, "venusd: internal error on %s: %v\n", c.RemoteAddr(), r)
		}
	}()
	if err := s.serveConn(sc, c); err != nil {
		var ne net.Error
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.Is(err, io.ErrUnexpectedEOF) && s.isClosing():
		case errors.As(err, &ne) && ne.Timeout():
			fmt.Fprintf(s.cfg.Log, "venusd: %s: read deadline passed, closing\n", c.RemoteAddr())
		default:
			fmt.Fprintf(s.cfg.Log, "venusd: %s: %v\n", c.RemoteAddr(), err)
		}
	}
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// protocolError counts a connection closed for a protocol error.
func (s *Server) protocolError(err error) error {
	s.protoErr.Add(1)
	return err
}

// serveConn reads frames and executes their commands in order until the client leaves. Every
// object of the client is freed when it returns.
func (s *Server) serveConn(sc *serverConn, c transport.Conn) error {
	dev := device.New(s.cfg.MaxObjects, s.cfg.MaxMemoryBytes, s.cfg.MaxFrameBytes-4096, &s.live)
	defer dev.Release()
	tr := tracer.New(s.cfg.Trace, s.cfg.TracePayloadBytes, s.getenv, s.cfg.Log)
	first := Monotonic()
	tr.Connection(c.Family(), c.LocalAddr(), c.RemoteAddr(), first, first)
	defer func() {
		tr.Connection(c.Family(), c.LocalAddr(), c.RemoteAddr(), first, Monotonic())
		tr.Finish()
	}()
	fr := transport.NewFrameReader(c, s.cfg.MaxFrameBytes)
	fr.Frame = s.cfg.FrameTimeout
	fr.Budget = &s.live
	defer fr.Release()
	var rep wire.Encoder
	var deferred []deferredRec
	for {
		if !s.setIdle(sc, true) {
			return nil
		}
		fr.Idle = s.cfg.IdleTimeout
		timed := tr.Timed()
		var ts int64
		if timed {
			ts = Monotonic()
		}
		payload, err := fr.Read()
		if err != nil {
			if errors.Is(err, wire.ErrBadMagic) || errors.Is(err, wire.ErrFrameTooLarge) {
				return s.protocolError(err)
			}
			return err
		}
		s.setIdle(sc, false) // a frame whose header came is executed, even during shutdown
		s.activity(sc)
		s.frames.Add(1)
		if timed {
			traceRequest(tr, fr.Header(), payload, ts)
		}
		rep.Reset()
		// A reply is bounded by the frame cap and by what is left of the memory budget; once
		// built it is counted in the budget until it is written.
		wantAny, fatal := execCommands(dev, payload, &rep, &deferred, min(s.cfg.MaxFrameBytes, max(1, s.live.Room())))
		if wantAny {
			if err := s.writeReply(c, &rep, tr, timed); err != nil {
				return err
			}
		}
		if fatal != nil {
			return s.protocolError(fatal)
		}
	}
}

// traceRequest records a request frame read in full at ts (its header, and its payload's head
// up to 512 bytes of frame) in the connection's trace.
func traceRequest(tr *tracer.Tracer, header, payload []byte, ts int64) {
	dur := time.Duration(Monotonic() - ts)
	frame := make([]byte, 0, min(wire.HeaderSize+len(payload), 512))
	frame = append(frame, header...)
	frame = append(frame, payload[:min(len(payload), 512-wire.HeaderSize)]...)
	tr.FrameSized(trace.DirRecv, ts, dur, frame, wire.HeaderSize+len(payload))
}

// writeReply writes the reply frame rep holds to c, counted in the memory budget while it is
// written, and in the trace when timed.
func (s *Server) writeReply(c transport.Conn, rep *wire.Encoder, tr *tracer.Tracer, timed bool) error {
	frame := rep.Finish()
	var ts int64
	if timed {
		ts = Monotonic()
	}
	// Only a reply with memory of its own counts, as a frame does (above
	// transport.KeepFrameBytes): a small one lives in the buffer the connection keeps anyway,
	// and counting it would let a client that already has its reply find the budget
	// still held for a moment.
	held := int64(0)
	if rep.Cap() > transport.KeepFrameBytes {
		held = int64(rep.Cap())
	}
	s.live.Bytes.Add(held)
	s.setWriteDeadline(c)
	_, err := c.Write(frame)
	s.live.Bytes.Add(-held)
	if timed {
		tr.Frame(trace.DirSend, ts, time.Duration(Monotonic()-ts), frame)
	}
	if err != nil {
		return err
	}
	if rep.Cap() > transport.KeepFrameBytes {
		rep.Free() // an idle connection keeps no large reply buffer
	}
	return nil
}

// execCommands executes the commands of one request payload on dev, writing the reply records
// of those that want one into rep, and the records of earlier failures that wanted none
// (deferred) after them when the frame has a reply. maxFrame, when above 0, bounds what each
// command may return so that the reply frame fits the cap the client reads with. It reports
// whether rep holds a reply, and a protocol error after which the connection must close (its
// error record is in rep first).
func execCommands(dev *device.Device, payload []byte, rep *wire.Encoder, deferred *[]deferredRec, maxFrame int) (wantAny bool, fatal error) {
	var cmd wire.Command
	it := wire.NewCommandIter(payload)
	for it.Next(&cmd) {
		want := cmd.Flags&wire.FlagReplyWanted != 0
		if cmd.Flags&^uint32(wire.FlagReplyWanted) != 0 {
			fatal = fmt.Errorf("%w: %s request %d: flags 0x%x not valid in a request", wire.ErrMalformed, cmd.Type, cmd.ReqID, cmd.Flags)
		} else if !cmd.Type.Known() {
			fatal = fmt.Errorf("unknown command type %d (request %d)", uint32(cmd.Type), cmd.ReqID)
		}
		if fatal != nil {
			off := rep.Begin(cmd.Type, wire.FlagReply, cmd.ReqID)
			rep.I32(wire.VkErrorFeatureNotPresent)
			rep.End(off)
			wantAny = true
			break
		}
		if maxFrame > 0 {
			// What a command may return shrinks as the reply frame fills.
			dev.SetMaxReply(max(0, maxFrame-rep.Len()-4*wire.CmdHeaderSize))
		}
		var off, resOff int
		var out *wire.Encoder
		if want {
			wantAny = true
			off = rep.Begin(cmd.Type, wire.FlagReply, cmd.ReqID)
			resOff = rep.Len()
			rep.I32(0)
			out = rep
		}
		res, perr := dev.Exec(&cmd, out)
		if perr != nil {
			if !want {
				off = rep.Begin(cmd.Type, wire.FlagReply, cmd.ReqID)
				resOff = rep.Len()
				rep.I32(0)
			}
			rep.Truncate(resOff + 4)
			rep.PutI32(resOff, res)
			rep.End(off)
			wantAny = true
			fatal = perr
			break
		}
		if want {
			rep.PutI32(resOff, res)
			if res != wire.VkSuccess {
				rep.Truncate(resOff + 4)
			}
			rep.End(off)
		} else if res < 0 && len(*deferred) < maxDeferred {
			*deferred = append(*deferred, deferredRec{cmd.Type, cmd.ReqID, res})
		}
	}
	if fatal == nil && it.Err() != nil {
		fatal = it.Err()
	}
	if wantAny {
		for _, d := range *deferred {
			off := rep.Begin(d.cmd, wire.FlagReply|wire.FlagDeferred, d.req)
			rep.I32(d.result)
			rep.End(off)
		}
		*deferred = (*deferred)[:0]
	}
	return wantAny, fatal
}

// openConn sets up the transport of an accepted client (the shm handshake, TCP tuning) and
// attaches it to sc. It reports false, with the client closed and a line logged, when that fails.
func (s *Server) openConn(sc *serverConn) (transport.Conn, bool) {
	c, err := transport.Accept(sc.raw, s.addr, transport.AcceptOptions{BufBytes: s.buf, ShmSpin: s.cfg.ShmSpin, Handshake: s.cfg.FrameTimeout})
	if err != nil {
		fmt.Fprintf(s.cfg.Log, "venusd: %s: %v\n", s.addr.Transport, err)
		sc.raw.Close()
		return nil, false
	}
	sc.mu.Lock()
	sc.c = c
	sc.mu.Unlock()
	return c, true
}

// evictIdleLocked makes room for a new connection when the server is full: it closes the idle
// connection (waiting for a frame) that matters least: one that never sent a complete frame
// (the oldest first), else the one idle the longest. Busy connections are never closed, so a
// working client keeps its place while idle or half-open ones hold the others. The caller holds
// s.mu.
func (s *Server) evictIdleLocked() {
	var victim *serverConn
	var vFramed bool
	var vSince int64
	for sc := range s.conns {
		sc.mu.Lock()
		idle := sc.idle
		sc.mu.Unlock()
		if !idle || sc.evicted {
			continue
		}
		framed, since := sc.framed.Load(), sc.since.Load()
		if victim == nil || !framed && vFramed || framed == vFramed && since < vSince {
			victim, vFramed, vSince = sc, framed, since
		}
	}
	if victim == nil {
		return
	}
	victim.evicted = true
	s.evicting++
	s.evictions.Add(1)
	victim.closeNow()
}

// leave undoes admit's bookkeeping when a client's goroutine ends.
func (s *Server) leave(sc *serverConn) {
	s.mu.Lock()
	delete(s.conns, sc)
	if sc.evicted {
		s.evicting--
	}
	s.mu.Unlock()
	s.active.Add(-1)
	s.wg.Done()
}

// admit checks an accepted connection (peer credentials, the connection limit, shutdown) and
// registers it. It reports false, with the connection closed and counted as rejected, when the
// client may not stay; on true the caller must start the client's goroutine, which defers
// s.leave.
func (s *Server) admit(nc net.Conn) (*serverConn, bool) {
	if err := transport.CheckPeer(nc); err != nil {
		fmt.Fprintf(s.cfg.Log, "venusd: refused %s: %v\n", s.addr.Transport, err)
		s.rejected.Add(1)
		nc.Close()
		return nil, false
	}
	s.mu.Lock()
	if !s.closing && len(s.conns)-s.evicting >= s.cfg.MaxConns {
		s.evictIdleLocked()
	}
	if s.closing || len(s.conns)-s.evicting >= s.cfg.MaxConns {
		s.mu.Unlock()
		s.rejected.Add(1)
		nc.Close()
		return nil, false
	}
	sc := &serverConn{raw: nc, idle: true}
	sc.since.Store(time.Now().UnixNano())
	s.conns[sc] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	s.accepted.Add(1)
	s.active.Add(1)
	return sc, true
}
