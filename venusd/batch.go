package venusd

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/perflab/perflab/trace"
	"github.com/perflab/perflab/venusd/device"
	"github.com/perflab/perflab/venusd/tracer"
	"github.com/perflab/perflab/venusd/transport"
	"github.com/perflab/perflab/venusd/wire"
)

// The batch loop: a single-threaded event loop modelled on the benchkv daemon of seed 003. Each
// connection has a reader goroutine that only turns bytes into frames and queues them; one loop
// goroutine owns every device. Each cycle it
//
//	poll:    takes every request that has arrived since the last cycle,
//	execute: runs them in arrival order, each on its connection's device,
//	flush:   hands all the replies of a connection to its writer, one write per connection.
//
// The more clients are waiting, the more requests a cycle carries, which is what makes the
// round-trip time grow with the number of clients once the loop is the bottleneck (seed 003 §5:
// T_cycle = T_fixed + T_per_req·N).

// LoopKinds lists the server loops: "conn" (a goroutine per connection, the default) and
// "batch" (NewBatchServer).
var LoopKinds = []string{"conn", "batch"}

// Serving is what a server of either loop offers.
type Serving interface {
	Serve(ctx context.Context) error
	Addr() string
	Stats() ServerStats
	Close() error
}

var (
	_ Serving = (*Server)(nil)
	_ Serving = (*BatchServer)(nil)
)

// NewLoopServer returns a server whose loop is named by loop: "conn" or "" (NewServer) or
// "batch" (NewBatchServer).
func NewLoopServer(loop string, cfg ServerConfig) (Serving, error) {
	switch loop {
	case "", "conn":
		return NewServer(cfg)
	case "batch":
		return NewBatchServer(cfg)
	}
	return nil, fmt.Errorf("loop %q: want conn or batch", loop)
}

// batchSpin is how long the loop keeps polling (yielding the processor between polls) after its
// last request before it sleeps until one arrives. Polling catches the next request of a
// closed-loop client that is already on its way without a wake-up, as the benchkv daemon's
// busy loop does; polling longer would take a core from the clients on a small machine (on 2 vCPUs, 5 µs
// gave the highest throughput of 5, 20 and 50 µs at every client count we tried).
var batchSpin = 5 * time.Microsecond

// batchConnDepth bounds the request frames of one connection queued for the loop; its reader
// stops reading past it, so a pipelining client cannot grow the queue without bound.
const batchConnDepth = 256

// LoopStats are the batch loop's counters since the server started. Times are in ns.
type LoopStats struct {
	Cycles      int64 // loop iterations, empty ones included
	EmptyCycles int64 // iterations that found no request
	Requests    int64 // request frames executed
	Writes      int64 // reply writes (at most one per connection per cycle)
	PollNs      int64 // time taking the arrived requests
	ExecNs      int64 // time executing them
	FlushNs     int64 // time handing the replies to the connections' writers
	MaxBatch    int64 // most requests one cycle carried
	// Time distributions of the busy cycles (seed 003 §6.2-6.3): the whole cycle and each
	// phase of it.
	Cycle, Poll, Exec, Flush LoopHist
}

// loopHistBuckets is 8 buckets per power of two over int64 nanoseconds.
const loopHistBuckets = 64 * 8

// LoopHist counts durations in ns in log-linear buckets, 8 per power of two: a quantile is
// within 12.5% of the true value.
type LoopHist [loopHistBuckets]uint64

func loopBucket(ns int64) int {
	if ns < 8 {
		return int(max(ns, 0))
	}
	l := bits.Len64(uint64(ns))
	return (l-3)*8 + int(uint64(ns)>>uint(l-4)) - 8
}

// loopBucketLow returns the smallest duration of bucket i, ns.
func loopBucketLow(i int) float64 {
	if i < 8 {
		return float64(i)
	}
	l, m := i/8+3, i%8+8
	return float64(uint64(m) << uint(l-4))
}

// N returns the durations counted.
func (h *LoopHist) N() uint64 {
	var n uint64
	for _, c := range h {
		n += c
	}
	return n
}

// Quantile returns the q-quantile (0..1) in ns, the middle of its bucket; 0 when empty.
func (h *LoopHist) Quantile(q float64) float64 {
	n := h.N()
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	rank = max(1, min(rank, n))
	var acc uint64
	for i, c := range h {
		acc += c
		if acc >= rank {
			return (loopBucketLow(i) + loopBucketLow(i+1)) / 2
		}
	}
	return loopBucketLow(loopHistBuckets - 1)
}

func (h *LoopHist) sub(o *LoopHist) LoopHist {
	var d LoopHist
	for i := range h {
		d[i] = h[i] - o[i]
	}
	return d
}

// loopHistLive is a LoopHist the loop adds to while others read it.
type loopHistLive [loopHistBuckets]atomic.Uint64

func (h *loopHistLive) add(d time.Duration) { h[loopBucket(int64(d))].Add(1) }

func (h *loopHistLive) load() LoopHist {
	var out LoopHist
	for i := range h {
		out[i] = h[i].Load()
	}
	return out
}

// BusyCycles returns the cycles that carried at least one request.
func (s LoopStats) BusyCycles() int64 { return s.Cycles - s.EmptyCycles }

// RequestsPerCycle returns the mean requests carried by a busy cycle (the batch size N of seed
// 003's model), 0 before the first request.
func (s LoopStats) RequestsPerCycle() float64 {
	if b := s.BusyCycles(); b > 0 {
		return float64(s.Requests) / float64(b)
	}
	return 0
}

// CycleMeanNs returns the mean time of a busy cycle (execute and flush), in ns.
func (s LoopStats) CycleMeanNs() float64 {
	if b := s.BusyCycles(); b > 0 {
		return float64(s.ExecNs+s.FlushNs) / float64(b)
	}
	return 0
}

// Sub returns the counters accumulated between o and s (MaxBatch is s's).
func (s LoopStats) Sub(o LoopStats) LoopStats {
	return LoopStats{Cycles: s.Cycles - o.Cycles, EmptyCycles: s.EmptyCycles - o.EmptyCycles,
		Requests: s.Requests - o.Requests, Writes: s.Writes - o.Writes, PollNs: s.PollNs - o.PollNs,
		ExecNs: s.ExecNs - o.ExecNs, FlushNs: s.FlushNs - o.FlushNs, MaxBatch: s.MaxBatch,
		Cycle: s.Cycle.sub(&o.Cycle), Poll: s.Poll.sub(&o.Poll), Exec: s.Exec.sub(&o.Exec), Flush: s.Flush.sub(&o.Flush)}
}

// BatchServer is a venusd server whose commands all run on one event loop (see LoopStats).
// Its transports, limits, peer checks and tracing are the Server's.
type BatchServer struct {
	*Server

	qmu    sync.Mutex
	queue  []batchReq
	wake   chan struct{}
	sleeps atomic.Bool

	cycles, empty, requests, writes   atomic.Int64
	pollNs, execNs, flushNs, maxBatch atomic.Int64
	hCycle, hPoll, hExec, hFlush      loopHistLive
}

// batchReq is one request frame waiting for the loop.
type batchReq struct {
	bc      *batchConn
	payload []byte // owned by the request
	free    func() // frees payload once executed
	resume  bool   // not a request: the writer of bc drained its replies; run bc's backlog
}

// batchConn is the loop's side of one client.
//
// Backpressure: the loop never writes. It hands each cycle's replies to the connection's own
// writer goroutine, which writes them with FrameTimeout as deadline. While more than
// batchConnOutBytes of replies wait for the writer, the connection's reader reads no more
// requests, and the loop sets the connection's requests aside (its backlog, in order) instead
// of executing them, until the writer has caught up. So a client that does not read its
// replies costs the loop nothing, holds at most batchConnOutBytes plus one reply frame of
// server memory, and is closed FrameTimeout after its replies stopped moving.
type batchConn struct {
	sc       *serverConn
	c        transport.Conn
	dev      *device.Device
	tr       *tracer.Tracer
	slots    chan struct{} // one token per queued request
	deferred []deferredRec
	out      []byte // replies of the current cycle (loop)

	backlog  []batchReq   // requests set aside while the writer is behind (loop)
	backed   atomic.Bool  // backlog is not empty
	resuming atomic.Bool  // a resume request is queued
	unsent   atomic.Int64 // reply bytes handed to the writer and not yet written

	wmu    sync.Mutex
	wq     []byte        // replies for the writer (under wmu)
	wake   chan struct{} // the writer has replies to write
	room   chan struct{} // the writer wrote some: a waiting reader may go on
	wDone  chan struct{} // the writer ended
	budget *device.Budget

	fatal    atomic.Pointer[error] // a protocol error: the writer closes the connection once its error reply is out
	killOnce sync.Once
	dead     error         // why the connection was given up; set before done is closed
	done     chan struct{} // closed when the connection is given up
}

// batchConnOutBytes bounds the replies of one connection waiting for its writer before the
// connection's requests wait too.
const batchConnOutBytes = 1 << 20

func (bc *batchConn) isDead() bool {
	select {
	case <-bc.done:
		return true
	default:
		return false
	}
}

// behind reports whether the connection's replies are too far behind for more requests to run.
func (bc *batchConn) behind() bool {
	return bc.unsent.Load()+int64(len(bc.out)) > batchConnOutBytes
}

// hand gives the cycle's replies to the writer (loop).
func (bc *batchConn) hand() {
	n := int64(len(bc.out))
	bc.unsent.Add(n)
	bc.budget.Bytes.Add(n)
	bc.wmu.Lock()
	if len(bc.wq) == 0 {
		bc.wq, bc.out = bc.out, bc.wq[:0]
	} else {
		bc.wq = append(bc.wq, bc.out...)
		bc.out = bc.out[:0]
	}
	bc.wmu.Unlock()
	select {
	case bc.wake <- struct{}{}:
	default:
	}
}

// writer writes the replies the loop hands over until the connection ends.
func (b *BatchServer) writer(bc *batchConn) {
	defer close(bc.wDone)
	var buf []byte
	for {
		select {
		case <-bc.wake:
		case <-bc.done:
			return
		}
		bc.wmu.Lock()
		buf, bc.wq = bc.wq, buf[:0]
		bc.wmu.Unlock()
		if len(buf) == 0 {
			if f := bc.fatal.Load(); f != nil {
				b.kill(bc, *f)
				b.resume(bc)
				return
			}
			continue
		}
		ts := Monotonic()
		w0 := time.Now()
		b.setWriteDeadline(bc.c)
		_, err := bc.c.Write(buf)
		traceFrames(bc.tr, ts, time.Since(w0), buf)
		bc.unsent.Add(-int64(len(buf)))
		bc.budget.Bytes.Add(-int64(len(buf)))
		if cap(buf) > transport.KeepFrameBytes {
			buf = nil
		}
		select {
		case bc.room <- struct{}{}:
		default:
		}
		if err != nil {
			b.kill(bc, err)
			b.resume(bc) // the loop drops the backlog
			return
		}
		if f := bc.fatal.Load(); f != nil {
			bc.wmu.Lock()
			more := len(bc.wq) > 0
			bc.wmu.Unlock()
			if !more {
				// The error reply is out: now close.
				b.kill(bc, *f)
				b.resume(bc)
				return
			}
		}
		if bc.backed.Load() && !bc.behind() {
			b.resume(bc)
		}
	}
}

// resume asks the loop to run bc's backlog (or drop it, once bc is dead).
func (b *BatchServer) resume(bc *batchConn) {
	if bc.resuming.CompareAndSwap(false, true) {
		b.enqueue(batchReq{bc: bc, resume: true})
	}
}

// NewBatchServer checks cfg and binds its address as NewServer does; the server runs every
// command on a single event loop.
func NewBatchServer(cfg ServerConfig) (*BatchServer, error) {
	s, err := NewServer(cfg)
	if err != nil {
		return nil, err
	}
	return &BatchServer{Server: s, wake: make(chan struct{}, 1)}, nil
}

// LoopStats returns the loop's counters.
func (b *BatchServer) LoopStats() LoopStats {
	return LoopStats{Cycles: b.cycles.Load(), EmptyCycles: b.empty.Load(), Requests: b.requests.Load(),
		Writes: b.writes.Load(), PollNs: b.pollNs.Load(), ExecNs: b.execNs.Load(), FlushNs: b.flushNs.Load(),
		MaxBatch: b.maxBatch.Load(), Cycle: b.hCycle.load(), Poll: b.hPoll.load(), Exec: b.hExec.load(), Flush: b.hFlush.load()}
}

// Serve accepts clients and runs the loop until ctx is cancelled or Close is called; shutdown
// is the Server's. When the server traces, the loop's counters go into the trace's footer
// stats ("loop.cycles", "loop.empty_cycles", "loop.requests", "loop.writes", "loop.poll_ns",
// "loop.exec_ns", "loop.flush_ns", "loop.max_batch", "loop.requests_per_cycle_milli",
// "loop.cycle_p50_ns", "loop.cycle_p90_ns", "loop.cycle_p99_ns").
func (b *BatchServer) Serve(ctx context.Context) error {
	s := b.Server
	if !s.serving.CompareAndSwap(false, true) {
		return errors.New("serve: already serving")
	}
	loopCtx, stopLoop := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	bg.Add(2)
	go func() { defer bg.Done(); b.loop(loopCtx) }()
	stop := make(chan struct{})
	go func() {
		defer bg.Done()
		select {
		case <-ctx.Done():
			s.shutdown(s.cfg.ShutdownGrace)
		case <-stop:
		}
	}()
	defer func() {
		close(stop)
		s.shutdown(0)
		stopLoop()
		bg.Wait()
		b.exportStats()
	}()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if s.isClosing() {
				s.wg.Wait()
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("accept: %w", err)
		}
		sc, ok := s.admit(nc)
		if !ok {
			continue
		}
		go b.reader(sc)
	}
}

// exportStats writes the loop counters into the trace footer.
func (b *BatchServer) exportStats() {
	w := b.cfg.Trace
	if w == nil {
		return
	}
	st := b.LoopStats()
	for name, v := range map[string]int64{
		"loop.cycles": st.Cycles, "loop.empty_cycles": st.EmptyCycles, "loop.requests": st.Requests,
		"loop.writes": st.Writes, "loop.poll_ns": st.PollNs, "loop.exec_ns": st.ExecNs,
		"loop.flush_ns": st.FlushNs, "loop.max_batch": st.MaxBatch,
		"loop.requests_per_cycle_milli": int64(st.RequestsPerCycle() * 1000),
		"loop.cycle_p50_ns":             int64(st.Cycle.Quantile(0.5)), "loop.cycle_p90_ns": int64(st.Cycle.Quantile(0.9)),
		"loop.cycle_p99_ns": int64(st.Cycle.Quantile(0.99)),
	} {
		w.SetStat(name, v)
	}
}

// reader sets up one client's transport, then turns its bytes into request frames for the loop.
func (b *BatchServer) reader(sc *serverConn) {
	s := b.Server
	defer s.leave(sc)
	c, ok := s.openConn(sc)
	if !ok {
		return
	}
	defer c.Close()

	bc := &batchConn{sc: sc, c: c, slots: make(chan struct{}, batchConnDepth), done: make(chan struct{}),
		dev:  device.New(s.cfg.MaxObjects, s.cfg.MaxMemoryBytes, s.cfg.MaxFrameBytes-4096, &s.live),
		tr:   tracer.New(s.cfg.Trace, s.cfg.TracePayloadBytes, s.getenv, s.cfg.Log),
		wake: make(chan struct{}, 1), room: make(chan struct{}, 1), wDone: make(chan struct{}), budget: &s.live}
	go b.writer(bc)
	first := Monotonic()
	bc.tr.Connection(c.Family(), c.LocalAddr(), c.RemoteAddr(), first, first)
	defer func() {
		// Give up the connection: the writer stops, the loop drops the backlog. Wait until the
		// loop has no request of this client left, then free its device.
		b.kill(bc, net.ErrClosed)
		<-bc.wDone
		b.resume(bc)
		for i := 0; i < batchConnDepth; i++ {
			bc.slots <- struct{}{}
		}
		bc.wmu.Lock()
		s.live.Bytes.Add(-int64(len(bc.wq)))
		bc.unsent.Add(-int64(len(bc.wq)))
		bc.wq = nil
		bc.wmu.Unlock()
		bc.dev.Release()
		bc.tr.Connection(c.Family(), c.LocalAddr(), c.RemoteAddr(), first, Monotonic())
		bc.tr.Finish()
	}()
	if err := b.readFrames(bc); err != nil {
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

func (b *BatchServer) readFrames(bc *batchConn) error {
	s := b.Server
	fr := transport.NewFrameReader(bc.c, s.cfg.MaxFrameBytes)
	fr.Frame = s.cfg.FrameTimeout
	fr.Budget = &s.live
	defer fr.Release()
	for {
		if !s.setIdle(bc.sc, true) {
			return nil
		}
		fr.Idle = s.cfg.IdleTimeout
		ts := Monotonic()
		t0 := time.Now()
		payload, err := fr.Read()
		if err != nil {
			if errors.Is(err, wire.ErrBadMagic) || errors.Is(err, wire.ErrFrameTooLarge) {
				return s.protocolError(err)
			}
			return err
		}
		s.setIdle(bc.sc, false)
		s.activity(bc.sc)
		s.frames.Add(1)
		if bc.tr.Timed() {
			frame := make([]byte, 0, min(wire.HeaderSize+len(payload), 512))
			frame = append(frame, fr.Header()...)
			frame = append(frame, payload[:min(len(payload), 512-wire.HeaderSize)]...)
			bc.tr.FrameSized(trace.DirRecv, ts, time.Since(t0), frame, wire.HeaderSize+len(payload))
		}
		// Backpressure: no more requests while this client's replies wait for its writer.
		for bc.unsent.Load() > batchConnOutBytes {
			select {
			case <-bc.room:
			case <-bc.done:
				return bc.dead
			}
		}
		select {
		case bc.slots <- struct{}{}:
		case <-bc.done:
			return bc.dead
		}
		p, free := fr.Take(payload)
		b.enqueue(batchReq{bc: bc, payload: p, free: free})
	}
}

// enqueue hands a request to the loop and wakes it if it sleeps.
func (b *BatchServer) enqueue(r batchReq) {
	b.qmu.Lock()
	b.queue = append(b.queue, r)
	b.qmu.Unlock()
	if b.sleeps.Load() {
		select {
		case b.wake <- struct{}{}:
		default:
		}
	}
}

// loop is the single thread that executes every command.
func (b *BatchServer) loop(ctx context.Context) {
	var batch []batchReq
	var touched []*batchConn
	lastWork := time.Now()
	for ctx.Err() == nil {
		// Phase 1: poll.
		t0 := time.Now()
		b.qmu.Lock()
		batch, b.queue = b.queue, batch[:0]
		b.qmu.Unlock()
		t1 := time.Now()
		b.cycles.Add(1)
		b.pollNs.Add(int64(t1.Sub(t0)))
		if len(batch) == 0 {
			b.empty.Add(1)
			if t1.Sub(lastWork) < batchSpin {
				runtime.Gosched()
				continue
			}
			b.idle(ctx)
			lastWork = time.Now()
			continue
		}
		n := b.countRequests(batch)
		// Phase 2: execute, in arrival order; replies collect per connection.
		touched = b.executeAll(batch, touched[:0])
		t2 := time.Now()
		// Phase 3: flush: each connection's replies go to its writer, one write per connection.
		for _, bc := range touched {
			if !bc.isDead() {
				bc.hand()
				b.writes.Add(1)
			}
			bc.out = bc.out[:0]
		}
		t3 := time.Now()
		lastWork = t3
		if n > 0 {
			b.execNs.Add(int64(t2.Sub(t1)))
			b.flushNs.Add(int64(t3.Sub(t2)))
			b.hCycle.add(t3.Sub(t0))
			b.hPoll.add(t1.Sub(t0))
			b.hExec.add(t2.Sub(t1))
			b.hFlush.add(t3.Sub(t2))
		}
		clear(batch)
	}
}

// idle sleeps until a request arrives (or ctx ends), unless one came in meanwhile.
func (b *BatchServer) idle(ctx context.Context) {
	b.sleeps.Store(true)
	b.qmu.Lock()
	pending := len(b.queue)
	b.qmu.Unlock()
	if pending == 0 {
		select {
		case <-b.wake:
		case <-ctx.Done():
		}
	}
	b.sleeps.Store(false)
}

// countRequests counts the new requests of a cycle (not the backlogs it resumes) in the loop's
// figures, before any reply goes out, so that a client that has its reply sees it counted.
func (b *BatchServer) countRequests(batch []batchReq) int64 {
	var n int64
	for i := range batch {
		if !batch[i].resume {
			n++
		}
	}
	b.requests.Add(n)
	if n > b.maxBatch.Load() {
		b.maxBatch.Store(n)
	}
	if n == 0 {
		// Only backlogs to resume or drop: not a cycle of requests in the loop's figures.
		b.empty.Add(1)
	}
	return n
}

// executeAll executes a cycle's requests in arrival order (a resumed connection's backlog in
// its place) and returns the connections that have replies, appended to touched.
func (b *BatchServer) executeAll(batch []batchReq, touched []*batchConn) []*batchConn {
	for i := range batch {
		r := &batch[i]
		bc := r.bc
		if r.resume {
			bc.resuming.Store(false)
			backlog := bc.backlog
			bc.backlog = nil
			bc.backed.Store(false)
			for j := range backlog {
				touched = b.execute(&backlog[j], touched)
			}
			clear(backlog)
		} else {
			touched = b.execute(r, touched)
		}
		*r = batchReq{}
	}
	return touched
}

// traceFrames records each frame of one write (the write's time goes to each).
func traceFrames(tr *tracer.Tracer, ts int64, dur time.Duration, out []byte) {
	if !tr.Timed() {
		return
	}
	for off := 0; off+wire.HeaderSize <= len(out); {
		size := wire.HeaderSize + int(binary.LittleEndian.Uint32(out[off+4:]))
		end := min(off+size, len(out))
		tr.FrameSized(trace.DirSend, ts, dur, out[off:min(end, off+512)], size)
		off = end
	}
}

// execute runs one request of the loop's cycle, or sets it aside when its connection's
// replies are behind, and returns touched with the request's connection added when it has
// replies to flush (loop).
func (b *BatchServer) execute(r *batchReq, touched []*batchConn) []*batchConn {
	bc := r.bc
	live := !bc.isDead() && bc.fatal.Load() == nil
	if live && (len(bc.backlog) > 0 || bc.behind()) {
		bc.backlog = append(bc.backlog, *r)
		bc.backed.Store(true)
		return touched
	}
	if live {
		if len(bc.out) == 0 {
			touched = append(touched, bc)
		}
		var err error
		bc.out, err = execFrame(bc.dev, r.payload, bc.out, &bc.deferred, min(b.cfg.MaxFrameBytes, max(1, b.live.Room())))
		if err != nil {
			b.protoErr.Add(1)
			bc.fatal.Store(&err)
		}
	}
	r.free()
	<-bc.slots
	return touched
}

// kill gives up a connection (a protocol error, a failed write, or its reader ended).
func (b *BatchServer) kill(bc *batchConn, err error) {
	bc.killOnce.Do(func() {
		bc.dead = err
		close(bc.done)
		bc.sc.closeNow()
	})
}

// execFrame executes the commands of one request frame on dev and appends its reply frame, if
// any command wants one, to out; maxFrame, above 0, bounds the reply frame. It returns a protocol error after which the connection must
// close (the error reply is appended first). This is the per-frame work of Server.serveConn.
func execFrame(dev *device.Device, payload []byte, out []byte, deferred *[]deferredRec, maxFrame int) ([]byte, error) {
	var rep wire.Encoder
	rep.ResetOn(out[len(out):])
	wantAny, fatal := execCommands(dev, payload, &rep, deferred, maxFrame)
	if !wantAny {
		return out, fatal
	}
	// When the frame was built in out's spare capacity, append copies it onto itself.
	return append(out, rep.Finish()...), fatal
}
