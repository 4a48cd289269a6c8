package venusd

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/perflab/perflab/trace"
	"github.com/perflab/perflab/venusd/link"
	"github.com/perflab/perflab/venusd/tracer"
	"github.com/perflab/perflab/venusd/transport"
	"github.com/perflab/perflab/venusd/wire"
)

// callKind says how a call relates to the application's sync points.
type callKind uint8

const (
	// kindAsync: a call whose result the application does not need at once (allocations,
	// recording, memory transfers). Coalesce modes bundle it; pipeline modes do not wait for it.
	kindAsync callKind = iota
	// kindSubmit: vkQueueSubmit, a frame boundary in coalesce modes; its result is deferred in
	// pipeline modes.
	kindSubmit
	// kindSync: a host-visible sync point (vkWaitForFences, a read of results): the
	// application blocks until the reply is in.
	kindSync
)

// coalesceMaxBytes bounds a coalesced frame: past it, the pending commands go out in a frame of
// their own (no reply wanted) before the next one is added.
const coalesceMaxBytes = 4 << 20

// reply is one reply record.
type reply struct {
	cmd      wire.CommandType
	req      uint32
	result   int32
	deferred bool
	data     []byte
}

type pending struct {
	sent int64 // Monotonic() at send
	cmd  wire.CommandType
	ch   chan []reply // nil: nobody waits (a pipelined call)
}

// client is the ICD side of one connection.
type client struct {
	mode     Mode
	depth    int
	fc       link.Frames
	link     *link.Link // the emulated link under fc, nil without one
	raw      transport.Conn
	tr       *tracer.Tracer
	maxFrame int

	enc     wire.Encoder
	nextReq uint32
	keyReq  uint32 // first reply-wanted command in enc, 0 when none
	keyCmd  wire.CommandType
	lastTS  int64 // non-pipeline: send time of the one outstanding request frame
	curOff  int   // offset of the command being built
	rs      []reply

	framesSent, framesRecv, bytesSent, bytesRecv atomic.Int64
	roundTrips, syncWaits                        atomic.Int64
	sendNs, sendMaxNs, recvNs, recvMaxNs         atomic.Int64
	connFirst                                    int64

	// onRTT, when set, is called for every completed round trip (from the receive goroutine in
	// pipeline modes).
	onRTT func(rtt time.Duration)

	// pipeline modes
	slots    chan struct{}
	mu       sync.Mutex
	pend     map[uint32]*pending
	firstErr error
	recvErr  error
	recvDone chan struct{}
	closed   bool
}

// dialClient connects and, in pipeline modes, starts the receive goroutine.
func dialClient(ctx context.Context, cfg *ClientConfig, getenv func(string) string) (*client, transport.Addr, error) {
	a, err := transport.ParseAddr(cfg.Connect)
	if err != nil {
		return nil, a, err
	}
	buf, err := transport.SocketBuffer(cfg.SocketBufferBytes, getenv)
	if err != nil {
		return nil, a, err
	}
	raw, err := transport.Dial(ctx, a, transport.DialOptions{BufBytes: buf, ShmSpin: cfg.ShmSpin})
	if err != nil {
		return nil, a, fmt.Errorf("connect %s: %w", a, err)
	}
	depth := cfg.Depth
	if depth <= 0 {
		depth = DefaultDepth
	}
	c := &client{mode: cfg.Mode, depth: depth, raw: raw, maxFrame: DefaultMaxFrameBytes, nextReq: 1,
		tr: tracer.New(cfg.Trace, cfg.TracePayloadBytes, getenv, cfg.Log)}
	c.enc.Reset()
	d := transport.NewDirectFrames(raw, c.maxFrame)
	c.fc = d
	if cfg.Delay > 0 || cfg.Jitter > 0 || cfg.Bandwidth > 0 {
		c.link = link.New(d, cfg.Delay, cfg.Jitter, cfg.Bandwidth, cfg.LLM.Seed+7)
		c.fc = c.link
	}
	c.connFirst = Monotonic()
	c.tr.Connection(raw.Family(), raw.LocalAddr(), raw.RemoteAddr(), c.connFirst, c.connFirst)
	if c.mode.Pipeline() {
		c.slots = make(chan struct{}, depth)
		c.pend = map[uint32]*pending{}
		c.recvDone = make(chan struct{})
		go c.receiver()
	}
	return c, a, nil
}

// close ends the connection and waits for the receive goroutine.
func (c *client) close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	err := c.fc.Close()
	if c.recvDone != nil {
		<-c.recvDone
	}
	now := Monotonic()
	c.tr.Connection(c.raw.Family(), c.raw.LocalAddr(), c.raw.RemoteAddr(), c.connFirst, now)
	c.tr.Finish()
	return err
}

// start begins a command of kind k in the frame being built and returns the encoder for its
// arguments; finish it with done.
func (c *client) start(t wire.CommandType, k callKind) *wire.Encoder {
	want := !(c.mode.Coalesce() && k == kindAsync)
	flags := uint32(0)
	req := c.nextReq
	c.nextReq++
	if c.nextReq == 0 {
		c.nextReq = 1
	}
	if want {
		flags = wire.FlagReplyWanted
		if c.keyReq == 0 { // the first command wanting a reply labels the frame
			c.keyReq, c.keyCmd = req, t
		}
	}
	off := c.enc.Begin(t, flags, req)
	c.curOff = off
	return &c.enc
}

// done finishes the command begun by start and carries it out as its kind asks. For kindSync it
// returns the reply records of the frame (their data valid until the next call).
func (c *client) done(k callKind) ([]reply, error) {
	c.enc.End(c.curOff)
	co := c.mode.Coalesce()
	if co && k == kindAsync {
		if c.enc.Len() >= coalesceMaxBytes {
			return nil, c.flushNoReply()
		}
		return nil, c.deferredErr()
	}
	if c.mode.Pipeline() && k != kindSync {
		return nil, c.sendPipelined(nil)
	}
	key := c.keyReq
	rs, err := c.roundTrip()
	if err != nil || k == kindSync {
		return rs, err
	}
	for _, r := range rs {
		if r.req == key && r.result < 0 {
			return nil, &wire.VkError{Cmd: r.cmd, ReqID: r.req, Result: r.result}
		}
	}
	return rs, nil
}

// finishCmd ends the command begun by start without carrying it out: the next command joins
// the same frame (coalesce modes only).
func (c *client) finishCmd() { c.enc.End(c.curOff) }

func (c *client) coalescing() bool { return c.mode.Coalesce() }

// flushNoReply sends the pending commands as a frame that wants no reply.
func (c *client) flushNoReply() error {
	if c.enc.Empty() {
		return nil
	}
	if err := c.send(); err != nil {
		return err
	}
	return c.deferredErr()
}

// send writes the frame being built and resets it.
func (c *client) send() error {
	frame := c.enc.Finish()
	ts := Monotonic()
	var next []byte // the buffer of the next frame, when the link took this one's
	var err error
	if c.link != nil {
		next, err = c.link.WriteOwned(frame)
	} else {
		err = c.fc.WriteFrame(frame)
	}
	dur := time.Duration(Monotonic() - ts)
	c.lastTS = ts
	c.framesSent.Add(1)
	c.bytesSent.Add(int64(len(frame)))
	addDur(&c.sendNs, &c.sendMaxNs, dur)
	c.tr.Frame(trace.DirSend, ts, dur, frame) // the link only reads frame until it is written
	if next != nil {
		c.enc.ResetOn(next)
	} else {
		c.enc.Reset()
	}
	c.keyReq = 0
	if err != nil {
		return fmt.Errorf("send frame: %w", err)
	}
	return nil
}

func addDur(sum, mx *atomic.Int64, d time.Duration) {
	sum.Add(int64(d))
	for {
		m := mx.Load()
		if int64(d) <= m || mx.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

// recv reads one frame and parses its reply records into rs (data aliasing the frame). It
// returns when (Monotonic) the frame was in.
func (c *client) recv(rs []reply) ([]reply, int64, error) {
	ts := Monotonic()
	frame, err := c.fc.ReadFrame()
	end := Monotonic()
	dur := time.Duration(end - ts)
	if err != nil {
		return rs, end, err
	}
	c.framesRecv.Add(1)
	c.bytesRecv.Add(int64(len(frame)))
	addDur(&c.recvNs, &c.recvMaxNs, dur)
	c.tr.Frame(trace.DirRecv, ts, dur, frame)
	it := wire.NewCommandIter(frame[wire.HeaderSize:])
	var cmd wire.Command
	for it.Next(&cmd) {
		if cmd.Flags&wire.FlagReply == 0 || len(cmd.Args) < wire.ReplyFixedSize {
			return rs, end, fmt.Errorf("%w: reply record %s request %d without a result", wire.ErrMalformed, cmd.Type, cmd.ReqID)
		}
		rs = append(rs, reply{cmd: cmd.Type, req: cmd.ReqID, deferred: cmd.Flags&wire.FlagDeferred != 0,
			result: int32(binary.LittleEndian.Uint32(cmd.Args)), data: cmd.Args[wire.ReplyFixedSize:]})
	}
	if it.Err() != nil {
		return rs, end, fmt.Errorf("reply frame: %w", it.Err())
	}
	return rs, end, nil
}

// noteErr keeps the first error of a call whose result was not awaited.
func (c *client) noteErr(r *reply) {
	if r.result >= 0 { // VK_NOT_READY and VK_TIMEOUT are answers, not errors
		return
	}
	c.mu.Lock()
	if c.firstErr == nil {
		c.firstErr = &wire.VkError{Cmd: r.cmd, ReqID: r.req, Result: r.result, Deferred: true}
	}
	c.mu.Unlock()
}

func (c *client) deferredErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.firstErr != nil {
		return c.firstErr
	}
	return c.recvErr
}

// roundTrip sends the frame being built and blocks for its reply frame; it returns the frame's
// reply records. Errors of earlier calls that were not awaited surface here.
func (c *client) roundTrip() ([]reply, error) {
	key, keyCmd := c.keyReq, c.keyCmd
	c.syncWaits.Add(1)
	if c.mode.Pipeline() {
		ch := make(chan []reply, 1)
		if err := c.sendPipelined(ch); err != nil {
			return nil, err
		}
		select {
		case rs := <-ch:
			return c.checkReplies(rs, key)
		case <-c.recvDone:
			// The reply may have been delivered just before the receiver stopped.
			select {
			case rs := <-ch:
				return c.checkReplies(rs, key)
			default:
			}
			return nil, c.deferredErr()
		}
	}
	if err := c.send(); err != nil {
		return nil, err
	}
	c.rs = c.rs[:0]
	for {
		var err error
		var ts int64
		start := len(c.rs)
		c.rs, ts, err = c.recv(c.rs)
		if err != nil {
			return nil, fmt.Errorf("receive reply to %s request %d: %w", keyCmd, key, err)
		}
		found := false
		for _, r := range c.rs[start:] {
			if r.req == key && !r.deferred {
				found = true
			}
		}
		if found {
			rtt := time.Duration(ts - c.lastTS)
			c.roundTrips.Add(1)
			c.tr.RoundTrip(c.lastTS, rtt, keyCmd, key)
			if c.onRTT != nil {
				c.onRTT(rtt)
			}
			return c.checkReplies(c.rs, key)
		}
	}
}

// checkReplies records deferred errors and returns the first error among them, or the reply
// records of the frame.
func (c *client) checkReplies(rs []reply, key uint32) ([]reply, error) {
	for i := range rs {
		if rs[i].deferred {
			c.noteErr(&rs[i])
		}
	}
	if err := c.deferredErr(); err != nil {
		return nil, err
	}
	return rs, nil
}

// sendPipelined sends the frame being built, taking an in-flight slot when it wants a reply;
// ch, when not nil, receives the reply records.
func (c *client) sendPipelined(ch chan []reply) error {
	if err := c.deferredErr(); err != nil {
		return err
	}
	key, keyCmd := c.keyReq, c.keyCmd
	if key != 0 {
		select {
		case c.slots <- struct{}{}:
		case <-c.recvDone:
			return c.deferredErr()
		}
		c.mu.Lock()
		c.pend[key] = &pending{sent: Monotonic(), cmd: keyCmd, ch: ch}
		c.mu.Unlock()
	}
	return c.send()
}

// receiver collects replies in pipeline modes.
func (c *client) receiver() {
	defer close(c.recvDone)
	var rs []reply
	for {
		var err error
		var ts int64
		rs, ts, err = c.recv(rs[:0])
		if err != nil {
			c.mu.Lock()
			if c.recvErr == nil && !c.closed {
				if errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				c.recvErr = fmt.Errorf("receive: %w", err)
			}
			if c.recvErr == nil {
				c.recvErr = errors.New("connection closed")
			}
			c.mu.Unlock()
			return
		}
		for i := range rs {
			r := &rs[i]
			if r.deferred {
				c.noteErr(r)
				continue
			}
			c.mu.Lock()
			p := c.pend[r.req]
			delete(c.pend, r.req)
			c.mu.Unlock()
			if p == nil {
				c.noteErr(r)
				continue
			}
			rtt := time.Duration(ts - p.sent)
			c.roundTrips.Add(1)
			c.tr.RoundTrip(p.sent, rtt, p.cmd, r.req)
			if c.onRTT != nil {
				c.onRTT(rtt)
			}
			<-c.slots
			if p.ch != nil {
				cp := make([]reply, len(rs))
				for j := range rs {
					cp[j] = rs[j]
					cp[j].data = append([]byte(nil), rs[j].data...)
				}
				p.ch <- cp
			} else {
				c.noteErr(r)
			}
		}
	}
}

// linkWarnings returns the emulated link's warnings (link.Link.Warnings) over the named
// transport; nil without a link.
func (c *client) linkWarnings(transport string) []string {
	if c.link == nil {
		return nil
	}
	return c.link.Warnings(transport)
}

// linkStats returns what each direction of the emulated link did; nil without a link.
func (c *client) linkStats() *LinkStats {
	if c.link == nil {
		return nil
	}
	tx, rx := c.link.Stats()
	dir := func(s link.Stats) LinkDirection {
		us := func(d time.Duration) float64 { return float64(d) / 1e3 }
		return LinkDirection{Frames: s.Frames, Late: s.Late,
			HandOverP50US: us(s.HandOver.Quantile(0.5)), HandOverP99US: us(s.HandOver.Quantile(0.99)), HandOverMaxUS: us(s.HandOver.Max())}
	}
	return &LinkStats{Sent: dir(tx), Received: dir(rx), SpinMarginUS: float64(link.SpinMargin()) / 1e3}
}
