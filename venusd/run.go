package venusd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/perflab/perflab/models"
	"github.com/perflab/perflab/venusd/link"
	"github.com/perflab/perflab/venusd/transport"
	"github.com/perflab/perflab/venusd/wire"
)

// ErrChecksum is returned (wrapped) with the Result when the llm workload's checksum differs
// from the in-process reference: what the application read back is wrong.
var ErrChecksum = errors.New("checksum differs from the in-process reference")

// RunWorkload connects to cfg.Connect, runs the workload and returns what it measured. When the
// llm workload's output is wrong it returns the Result together with an error wrapping
// ErrChecksum (Result.ChecksumOK is false).
func RunWorkload(ctx context.Context, cfg ClientConfig) (*Result, error) {
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Mode > ModeCoalescePipeline {
		return nil, fmt.Errorf("mode %d: unknown", cfg.Mode)
	}
	if err := link.Validate(cfg.Delay, cfg.Jitter, cfg.Bandwidth); err != nil {
		return nil, err
	}
	switch cfg.Workload {
	case "", "llm":
		return runLLM(ctx, cfg, getenv)
	case "ping":
		return runPing(ctx, cfg, getenv)
	}
	return nil, fmt.Errorf("workload %q: want llm or ping", cfg.Workload)
}

type counterSnap struct {
	framesSent, framesRecv, bytesSent, bytesRecv, roundTrips, syncWaits, sendCalls, recvCalls int64
}

func (c *client) snap() counterSnap {
	ctr := c.raw.Counters()
	return counterSnap{c.framesSent.Load(), c.framesRecv.Load(), c.bytesSent.Load(), c.bytesRecv.Load(),
		c.roundTrips.Load(), c.syncWaits.Load(), ctr.SendCalls.Load(), ctr.RecvCalls.Load()}
}

func (c *client) totals() Totals {
	ctr := c.raw.Counters()
	t := Totals{
		FramesSent: c.framesSent.Load(), FramesRecv: c.framesRecv.Load(),
		SendCalls: ctr.SendCalls.Load(), RecvCalls: ctr.RecvCalls.Load(),
		BytesSent: c.bytesSent.Load(), BytesRecv: c.bytesRecv.Load(),
		RoundTrips: c.roundTrips.Load(), SyncWaits: c.syncWaits.Load(),
		SendMaxUS: float64(c.sendMaxNs.Load()) / 1e3, RecvMaxUS: float64(c.recvMaxNs.Load()) / 1e3,
		EAGAIN: ctr.EAGAIN.Load(),
	}
	if t.FramesSent > 0 {
		t.SendAvgUS = float64(c.sendNs.Load()) / 1e3 / float64(t.FramesSent)
	}
	if t.FramesRecv > 0 {
		t.RecvAvgUS = float64(c.recvNs.Load()) / 1e3 / float64(t.FramesRecv)
	}
	return t
}

func newResult(cfg *ClientConfig, a transport.Addr, c *client) *Result {
	depth := 1
	if cfg.Mode.Pipeline() {
		depth = c.depth
	}
	return &Result{Schema: ResultSchema, Mode: cfg.Mode.String(), Transport: a.Transport, Depth: depth,
		DelayUS: float64(cfg.Delay) / 1e3, ChecksumOK: true}
}

// closeWithin closes c when ctx ends, so a blocked run returns.
func closeWithin(ctx context.Context, c *client) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
			c.abort()
		case <-done:
		}
	}()
	return func() { close(done); wg.Wait() }
}

// abort closes the transport under a blocked caller.
func (c *client) abort() { c.raw.Close() }

func runLLM(ctx context.Context, cfg ClientConfig, getenv func(string) string) (*Result, error) {
	lc, err := cfg.LLM.normalize()
	if err != nil {
		return nil, fmt.Errorf("llm workload: %w", err)
	}
	cfg.LLM = lc
	inv, err := readInvalidatePolicy(getenv)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	mono0 := Monotonic()
	c, a, err := dialClient(ctx, &cfg, getenv)
	if err != nil {
		return nil, err
	}
	defer c.close()
	stop := closeWithin(ctx, c)
	defer stop()
	res := newResult(&cfg, a, c)
	res.Workload = "llm"
	res.Tokens = lc.Tokens

	r := &llmRun{cfg: lc, x: c, inv: inv}
	var genStart time.Time
	var genMono, tokMono int64
	var snap0 counterSnap
	r.onLoaded = func() {
		genStart = time.Now()
		genMono = Monotonic()
		snap0 = c.snap()
		res.LoadS = genStart.Sub(t0).Seconds()
		c.tr.Marker("phase", "load", 0, mono0, genMono)
	}
	r.onToken = func(t int, begin bool) {
		now := Monotonic()
		if begin {
			tokMono = now
			return
		}
		c.tr.Marker("token", "", int64(t), tokMono, now)
	}
	sum, runErr := r.run()
	if runErr != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("llm workload: %w", ctx.Err())
		}
		return nil, fmt.Errorf("llm workload: %w", runErr)
	}
	gen := time.Since(genStart)
	c.tr.Marker("phase", "generate", 0, genMono, Monotonic())
	snap1 := c.snap()
	res.GenerateS = gen.Seconds()
	if gen > 0 {
		res.TokensPerS = float64(lc.Tokens) / gen.Seconds()
	}
	res.Checksum = fmt.Sprintf("%016x", sum)
	res.Invalidate = r.stats
	if err := c.close(); err != nil && !errors.Is(err, os.ErrClosed) {
		fmt.Fprintf(cfg.Log, "venusd: close: %v\n", err)
	}
	res.Totals = c.totals()
	res.Warnings = c.linkWarnings(a.Transport)
	res.Link = c.linkStats()
	if lc.Tokens > 0 {
		res.PerToken = perToken(snap0, snap1, lc.Tokens)
	}
	if !cfg.NoVerify {
		if err := verifyLLM(res, lc, r); err != nil {
			if errors.Is(err, ErrChecksum) {
				return res, err // the result is returned with a wrong checksum
			}
			return nil, err
		}
	}
	return res, nil
}

// perToken is what the client's counters moved from snap0 to snap1, per token of n.
func perToken(snap0, snap1 counterSnap, n int) PerToken {
	d := func(a, b int64) float64 { return float64(b-a) / float64(n) }
	p := PerToken{
		FramesSent: d(snap0.framesSent, snap1.framesSent), FramesRecv: d(snap0.framesRecv, snap1.framesRecv),
		RoundTrips: d(snap0.roundTrips, snap1.roundTrips), SyncWaits: d(snap0.syncWaits, snap1.syncWaits),
		BytesSent: d(snap0.bytesSent, snap1.bytesSent), BytesRecv: d(snap0.bytesRecv, snap1.bytesRecv),
		SendCalls: d(snap0.sendCalls, snap1.sendCalls), RecvCalls: d(snap0.recvCalls, snap1.recvCalls),
	}
	p.Frames = p.FramesSent + p.FramesRecv
	return p
}

// verifyLLM runs the workload in-process and checks res's checksum against it: nil when they
// agree, ErrChecksum (wrapped, with the auto-invalidate policy r ran with) when not.
func verifyLLM(res *Result, lc LLMConfig, r *llmRun) error {
	ref, err := ReferenceChecksum(lc)
	if err != nil {
		return fmt.Errorf("reference run: %w", err)
	}
	res.ReferenceChecksum = ref
	res.ChecksumOK = ref == res.Checksum
	if !res.ChecksumOK {
		return fmt.Errorf("%w: got %s, reference %s (auto-invalidate: enabled=%v, %d of %d mappings, cap %d bytes)",
			ErrChecksum, res.Checksum, ref, r.inv.enabled, r.stats.Eligible, len(r.maps), r.inv.cap)
	}
	return nil
}

// normalize fills the ping defaults and checks sizes.
func (p PingConfig) normalize() (PingConfig, error) {
	d := DefaultPingConfig()
	if p.Requests == 0 {
		p.Requests = d.Requests
	}
	if p.Warmup == 0 {
		p.Warmup = d.Warmup
	}
	if p.RequestBytes == 0 {
		p.RequestBytes = d.RequestBytes
	}
	if p.ReplyBytes == 0 {
		p.ReplyBytes = d.ReplyBytes
	}
	switch {
	case p.Requests < 0 || p.Warmup < 0 || p.Duration < 0:
		return p, errors.New("ping: requests, warm-up and duration must not be negative")
	case p.RequestBytes < wire.CmdHeaderSize+4 || p.RequestBytes > 16<<20:
		return p, fmt.Errorf("ping: request of %d bytes: want %d to 16MiB", p.RequestBytes, wire.CmdHeaderSize+4)
	case p.ReplyBytes < wire.CmdHeaderSize+wire.ReplyFixedSize || p.ReplyBytes > 16<<20:
		return p, fmt.Errorf("ping: reply of %d bytes: want %d to 16MiB", p.ReplyBytes, wire.CmdHeaderSize+wire.ReplyFixedSize)
	case p.Pause < 0 || p.Pause > link.MaxDelay:
		return p, fmt.Errorf("ping: pause %v: want 0 to %v", p.Pause, link.MaxDelay)
	}
	return p, nil
}

func runPing(ctx context.Context, cfg ClientConfig, getenv func(string) string) (*Result, error) {
	pc, err := cfg.Ping.normalize()
	if err != nil {
		return nil, err
	}
	c, a, err := dialClient(ctx, &cfg, getenv)
	if err != nil {
		return nil, err
	}
	defer c.close()
	stop := closeWithin(ctx, c)
	defer stop()
	res := newResult(&cfg, a, c)
	res.Workload = "ping"
	res.ChecksumOK = true

	p := newPinger(c, pc, cfg.Mode)
	if err := p.warmUp(); err != nil {
		return nil, err
	}
	samples, n, elapsed, err := p.measure(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.close(); err != nil && !errors.Is(err, os.ErrClosed) {
		fmt.Fprintf(cfg.Log, "venusd: close: %v\n", err)
	}
	res.Totals = c.totals()
	res.Warnings = c.linkWarnings(a.Transport)
	res.Link = c.linkStats()
	res.Ping = pingStats(n, elapsed, samples, pc.KeepSamples)
	return res, nil
}

// pinger sends the pings of one run: vnPing commands of a fixed size asking for replies of a
// fixed size, synchronous or pipelined as the mode says.
type pinger struct {
	c         *client
	pc        PingConfig
	pad       []byte
	replyData uint32
	kind      callKind
}

func newPinger(c *client, pc PingConfig, mode Mode) *pinger {
	p := &pinger{c: c, pc: pc, kind: kindSync,
		pad:       make([]byte, pc.RequestBytes-wire.CmdHeaderSize-4),
		replyData: uint32(pc.ReplyBytes - wire.CmdHeaderSize - wire.ReplyFixedSize)}
	if mode.Pipeline() {
		p.kind = kindSubmit // pipelined: sent at once, up to Depth in flight
	}
	return p
}

// ping sends one ping of kind k, after the pause the config asks for.
func (p *pinger) ping(k callKind) error {
	if p.pc.Pause > 0 {
		link.SleepUntil(time.Now().Add(p.pc.Pause))
	}
	e := p.c.start(wire.CmdPing, k)
	e.U32(p.replyData)
	e.Bytes(p.pad)
	_, err := p.c.done(k)
	return err
}

// warmUp sends the warm-up pings and drains them with a synchronous one.
func (p *pinger) warmUp() error {
	for i := 0; i < p.pc.Warmup; i++ {
		if err := p.ping(p.kind); err != nil {
			return fmt.Errorf("ping warm-up: %w", err)
		}
	}
	if err := p.ping(kindSync); err != nil { // drain the warm-up
		return fmt.Errorf("ping warm-up: %w", err)
	}
	return nil
}

// measure sends the measured pings (Requests of them, or for Duration), the last one
// synchronous so that every reply is in, and returns their round-trip times (µs), how many
// there were and how long they took.
func (p *pinger) measure(ctx context.Context) (samples []float64, n int, elapsed time.Duration, err error) {
	var mu sync.Mutex
	rtts := make([]float64, 0, min(p.pc.Requests, 1<<20))
	p.c.onRTT = func(d time.Duration) {
		mu.Lock()
		rtts = append(rtts, float64(d)/1e3)
		mu.Unlock()
	}
	start := time.Now()
	deadline := start.Add(p.pc.Duration)
	for {
		if p.pc.Duration > 0 {
			if n%64 == 0 && time.Now().After(deadline) {
				break
			}
		} else if n >= p.pc.Requests-1 {
			break
		}
		if ctx.Err() != nil {
			return nil, 0, 0, ctx.Err()
		}
		if err := p.ping(p.kind); err != nil {
			return nil, 0, 0, fmt.Errorf("ping %d: %w", n, err)
		}
		n++
	}
	if err := p.ping(kindSync); err != nil {
		return nil, 0, 0, fmt.Errorf("ping %d: %w", n, err)
	}
	n++
	elapsed = time.Since(start)
	mu.Lock()
	samples = append([]float64(nil), rtts...)
	mu.Unlock()
	p.c.onRTT = nil
	return samples, n, elapsed, nil
}

// pingStats summarises n pings that took elapsed, with their round-trip times (µs): throughput,
// RTT min, max, mean and nearest-rank percentiles (models.Quantile), and the mean in flight by
// Little's law.
func pingStats(n int, elapsed time.Duration, samples []float64, keep bool) *PingStats {
	st := &PingStats{Requests: int64(n)}
	if elapsed > 0 {
		st.ThroughputPerS = float64(n) / elapsed.Seconds()
	}
	if len(samples) > 0 {
		sorted := append([]float64(nil), samples...)
		sort.Float64s(sorted)
		sum := 0.0
		for _, v := range sorted {
			sum += v
		}
		st.RTTMinUS, st.RTTMaxUS = sorted[0], sorted[len(sorted)-1]
		st.RTTP50US, st.RTTP99US = models.Quantile(sorted, 0.50), models.Quantile(sorted, 0.99)
		st.RTTMeanUS = sum / float64(len(sorted))
		st.InflightMean = st.ThroughputPerS * st.RTTMeanUS / 1e6 // Little's law
	}
	if keep {
		st.RTTsUS = samples
	}
	return st
}
