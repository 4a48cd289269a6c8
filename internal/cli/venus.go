//go:build linux

package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/perflab/perflab/lab"
	"github.com/perflab/perflab/trace"
	"github.com/perflab/perflab/units"
	"github.com/perflab/perflab/venusd"
	"github.com/perflab/perflab/venusd/link"
	"github.com/perflab/perflab/venusd/transport"
	"github.com/perflab/perflab/venusd/wire"
)

func init() {
	c := venusCommand()
	c.Run = func(ctx context.Context, env *Env, args []string) error { return runVenus(ctx, env, c, args) }
	Register(c)
}

func runVenus(ctx context.Context, env *Env, c *Command, args []string) error {
	if len(args) == 0 {
		return BadInput("want a subcommand: serve or run (see perflab venus serve -h, perflab venus run -h)")
	}
	switch args[0] {
	case "serve":
		return venusServe(ctx, env, &Command{Name: "venus serve", Summary: "serve the Venus-style protocol on an emulated device until SIGINT/SIGTERM",
			Usage: "[--listen ADDR] [--allow-remote] [--loop conn|batch] [--shm-spin N] [--trace FILE] [--stats]"}, args[1:])
	case "run":
		return venusRun(ctx, env, &Command{Name: "venus run", Summary: "run a Venus-style client workload against a server and report what it measured",
			Usage: "--connect ADDR [--workload llm|ping] [--tokens N] [--mode M] [--delay D] [--trace FILE] [--json]"}, args[1:])
	case "-h", "--help", "help":
		fmt.Fprintf(env.Stdout, "usage: perflab venus %s\n", c.Usage)
		return nil
	}
	return BadInput("unknown subcommand %q: want serve or run", args[0])
}

// openTrace creates a tracer trace file, or returns nil when path is empty.
func openTrace(path string, payload int) (*trace.Writer, error) {
	if path == "" {
		return nil, nil
	}
	meta := venusd.TraceMeta(os.Args, payload)
	meta.Version = BuildVersion()
	w, err := trace.Create(path, meta, nil)
	if err != nil {
		return nil, BadInput("--trace %s: %v", path, err)
	}
	return w, nil
}

func venusServe(ctx context.Context, env *Env, c *Command, args []string) error {
	fs := NewFlagSet(env, c)
	listen := fs.String("listen", venusd.DefaultListen, "listen on `ADDR`: tcp://HOST:PORT, unix:///PATH or shm:///NAME")
	allowRemote := fs.Bool("allow-remote", false, "allow a TCP address that is not loopback (there is no authentication)")
	maxConns := fs.Int("max-conns", venusd.DefaultMaxConns, "serve at most `N` clients at once")
	maxFrame := fs.String("max-frame", "64MiB", "largest frame payload accepted, in `bytes`")
	maxMem := fs.String("max-memory", "1GiB", "device memory quota per client, in `bytes`")
	maxTotal := fs.String("max-total-memory", "8GiB", "device memory of all clients together, in `bytes`")
	idle := fs.Duration("idle-timeout", venusd.DefaultIdleTimeout, "close a client that sends no frame for `D`")
	frameTimeout := fs.Duration("frame-timeout", venusd.DefaultFrameTimeout, "close a client whose frame, once begun, or whose first frame, does not arrive within `D`, or that does not take a reply for as long")
	tracePath := fs.String("trace", "", "write a perflab trace of every frame to `FILE`")
	payload := fs.Int("payload-bytes", 64, "keep the first `N` bytes of each frame in the trace, 0..256")
	loop := fs.String("loop", "conn", "server `loop`: conn (a goroutine per client) or batch (one event loop that executes every arrived request, then flushes one write per connection, like the benchkv key-value daemon)")
	shmSpin := fs.Int("shm-spin", 0, "most polls of a shm ring before sleeping on a futex (0: venusd's adaptive default)")
	stats := fs.Bool("stats", false, "answer each line read on stdin with one JSON line of the server's counters on stdout (loop: the batch loop's, shm: the shm ring waits); stop at the end of stdin")
	Choice(fs, "loop", "conn", "batch")
	IntRange(fs, "max-conns", 1, maxVenusConns)
	IntRange(fs, "shm-spin", 0, 1<<24)
	ByteRange(fs, "payload-bytes", 0, trace.MaxPayload)
	DurationRange(fs, "idle-timeout", venusd.MinTimeout, venusd.MaxTimeout)
	DurationRange(fs, "frame-timeout", venusd.MinTimeout, venusd.MaxTimeout)
	FlagCheck(fs, "max-frame", byteRange(4096, 1<<30, "4KiB to 1GiB"))
	FlagCheck(fs, "max-memory", byteRange(1, 1<<50, "a byte count like 1GiB"))
	FlagCheck(fs, "max-total-memory", byteRange(1, 1<<50, "a byte count like 8GiB"))
	pos, err := ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return BadInput("unexpected argument %q", pos[0])
	}
	if *loop != "conn" && *loop != "batch" {
		return BadInput("--loop %q: want conn or batch", *loop)
	}
	mf, err := units.ParseBytes(*maxFrame)
	if err != nil || mf < 4096 || mf > 1<<30 {
		return BadInput("--max-frame %q: want 4KiB to 1GiB", *maxFrame)
	}
	mm, err := units.ParseBytes(*maxMem)
	if err != nil || mm < 1 {
		return BadInput("--max-memory %q: want a byte count", *maxMem)
	}
	mt, err := units.ParseBytes(*maxTotal)
	if err != nil || mt < 1 {
		return BadInput("--max-total-memory %q: want a byte count", *maxTotal)
	}
	if *payload < 0 || *payload > trace.MaxPayload {
		return BadInput("--payload-bytes %d: want 0..%d", *payload, trace.MaxPayload)
	}
	if *maxConns < 1 {
		return BadInput("--max-conns %d: want at least 1", *maxConns)
	}
	if *shmSpin < 0 || *shmSpin > 1<<24 {
		return BadInput("--shm-spin %d: want 0 to %d", *shmSpin, 1<<24)
	}
	tw, err := openTrace(*tracePath, *payload)
	if err != nil {
		return err
	}
	srv, err := venusd.NewLoopServer(*loop, venusd.ServerConfig{
		Listen: *listen, AllowRemote: *allowRemote, MaxConns: *maxConns, MaxFrameBytes: int(mf),
		MaxMemoryBytes: mm, MaxTotalMemoryBytes: mt, IdleTimeout: *idle, FrameTimeout: *frameTimeout, Trace: tw, TracePayloadBytes: *payload,
		ShmSpin: *shmSpin, Getenv: env.Getenv, Log: env.Stderr,
	})
	if err != nil {
		if tw != nil {
			tw.Close()
		}
		return BadInput("%v", err)
	}
	fmt.Fprintf(env.Stderr, "venusd: listening on %s (stop with Ctrl-C or SIGTERM)\n", srv.Addr())
	if *stats {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go answerStats(env, srv, cancel)
	}
	serr := srv.Serve(ctx)
	st := srv.Stats()
	fmt.Fprintf(env.Stderr, "venusd: stopped: %d clients served, %d frames, %d refused, %d closed for protocol errors\n",
		st.Accepted, st.Frames, st.Rejected, st.ProtocolErrors)
	if tw != nil {
		if err := tw.Close(); err != nil && serr == nil {
			serr = fmt.Errorf("close trace: %w", err)
		}
	}
	if serr != nil {
		return Failed("%v", serr)
	}
	return nil
}

// answerStats writes one JSON line of srv's counters to env's stdout for each line read on its
// stdin, and calls stop at the end of stdin (the process that asked has gone).
func answerStats(env *Env, srv venusd.Serving, stop func()) {
	defer stop()
	in := bufio.NewScanner(env.Stdin)
	enc := json.NewEncoder(env.Stdout)
	for in.Scan() {
		c := lab.ServerCounters{Shm: transport.ShmWaits()}
		if ls, ok := srv.(interface{ LoopStats() venusd.LoopStats }); ok {
			st := ls.LoopStats()
			c.Loop = &st
		}
		if enc.Encode(c) != nil {
			return
		}
	}
}

// maxVenusConns bounds --max-conns: each client is a goroutine and a socket.
const maxVenusConns = 1 << 16

// byteRange returns a check of a byte-count flag (units.ParseBytes) against lo..hi.
func byteRange(lo, hi int64, want string) func(string) error {
	return func(s string) error {
		n, err := units.ParseBytes(s)
		if err != nil || n < lo || n > hi {
			return errors.New(want)
		}
		return nil
	}
}

// parseLinkRate reads --bandwidth (units.ParseRate: "100Mbit", "12MB", "15M"), in bytes per
// second; empty or 0 is 0, no limit.
func parseLinkRate(s string) (float64, error) {
	if s == "" {
		return 0, nil
	}
	return units.ParseRate(s)
}

// checkLinkRate accepts what parseLinkRate reads, within the emulated link's range.
func checkLinkRate(s string) error {
	bw, err := parseLinkRate(s)
	if err == nil {
		err = link.Validate(0, 0, bw)
	}
	if err != nil {
		return errors.New("want empty (unlimited) or a rate from 1kbit to 1Tbit, like 100Mbit, 12MB or 12MiB (bytes per second)")
	}
	return nil
}

func venusRun(ctx context.Context, env *Env, c *Command, args []string) error {
	fs := NewFlagSet(env, c)
	d := venusd.DefaultLLMConfig()
	p := venusd.DefaultPingConfig()
	f := defineVenusFlags(fs, &d, &p)
	pos, err := ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return BadInput("unexpected argument %q", pos[0])
	}
	m, bw, err := checkVenusFlags(f, &d)
	if err != nil {
		return err
	}
	tw, err := openTrace(*f.tracePath, *f.payload)
	if err != nil {
		return err
	}
	cfg := venusd.ClientConfig{
		Connect: *f.connect, Workload: *f.workload, Mode: m, Depth: *f.depth, Delay: *f.delay, Jitter: *f.jitter,
		Bandwidth: bw, LLM: d, Ping: p, Trace: tw, TracePayloadBytes: *f.payload, NoVerify: *f.noVerify,
		Getenv: env.Getenv, Log: env.Stderr,
	}
	res, runErr := venusd.RunWorkload(ctx, cfg)
	if tw != nil {
		if err := tw.Close(); err != nil && runErr == nil {
			runErr = fmt.Errorf("close trace: %w", err)
		}
	}
	if res != nil {
		if err := writeVenusResult(env, res, *f.asJSON); err != nil {
			return err
		}
	}
	if runErr != nil {
		if errors.Is(runErr, flag.ErrHelp) {
			return runErr
		}
		return Failed("%v", runErr)
	}
	return nil
}

// venusFlags holds the flags of venus run that are not fields of the workload configurations.
type venusFlags struct {
	connect, workload, mode, bandwidth, tracePath *string
	depth, payload                                *int
	delay, jitter                                 *time.Duration
	asJSON, noVerify                              *bool
	seed                                          *uint64
}

// defineVenusFlags declares venus run's flags on fs, binding the workload knobs straight into d and p,
// with their range checks.
func defineVenusFlags(fs *flag.FlagSet, d *venusd.LLMConfig, p *venusd.PingConfig) *venusFlags {
	f := &venusFlags{}
	f.connect = fs.String("connect", "", "connect to `ADDR`: tcp://HOST:PORT, unix:///PATH or shm:///NAME")
	f.workload = fs.String("workload", "llm", "`NAME`: llm (llama.cpp token loop) or ping (small-command ping-pong)")
	f.mode = fs.String("mode", "baseline", "`MODE`: baseline, coalesce, pipeline or coalesce+pipeline")
	f.depth = fs.Int("depth", venusd.DefaultDepth, "requests in flight in pipeline modes")
	f.delay = fs.Duration("delay", 0, "emulated one-way link delay `D` in each direction (e.g. 2ms)")
	f.jitter = fs.Duration("jitter", 0, "uniform random extra delay up to `D` per frame")
	f.bandwidth = fs.String("bandwidth", "", "emulated link `RATE` (e.g. 100Mbit, 12MB per second); empty: unlimited")
	f.tracePath = fs.String("trace", "", "write a perflab trace of every frame to `FILE`")
	f.payload = fs.Int("payload-bytes", 64, "keep the first `N` bytes of each frame in the trace, 0..256")
	f.asJSON = fs.Bool("json", false, "print the result as JSON (schema perflab.venus.run/v1)")
	f.noVerify = fs.Bool("no-verify", false, "skip the in-process reference run that checks the checksum")
	fs.IntVar(&d.Tokens, "tokens", d.Tokens, "llm: tokens to generate")
	fs.IntVar(&d.Hidden, "hidden", d.Hidden, "llm: hidden size of the model, floats")
	fs.IntVar(&d.SubmitsPerToken, "submits", d.SubmitsPerToken, "llm: vkQueueSubmit calls per token")
	fs.IntVar(&d.WaitsPerToken, "waits", d.WaitsPerToken, "llm: vkWaitForFences calls per token (divides --submits)")
	fs.IntVar(&d.SubmitMinBytes, "submit-min", d.SubmitMinBytes, "llm: smallest payload sent with a submit, bytes")
	fs.IntVar(&d.SubmitMaxBytes, "submit-max", d.SubmitMaxBytes, "llm: largest payload sent with a submit, bytes")
	fs.IntVar(&d.StateBytes, "state-bytes", d.StateBytes, "llm: host-coherent mapping 0x9 (hidden state), bytes")
	fs.IntVar(&d.LogitsBytes, "logits-bytes", d.LogitsBytes, "llm: host-coherent mapping 0x11 (logits), bytes")
	fs.IntVar(&d.ParamsBytes, "params-bytes", d.ParamsBytes, "llm: host-coherent mapping 0x19 (token parameters), bytes")
	fs.IntVar(&d.UploadChunk, "upload-chunk", d.UploadChunk, "llm: bytes per weight-upload command")
	f.seed = fs.Uint64("seed", d.Seed, "llm: seed of the weights, data and first token")
	fs.IntVar(&p.Requests, "requests", p.Requests, "ping: requests to send")
	fs.DurationVar(&p.Duration, "duration", 0, "ping: run for `D` instead of a request count")
	fs.IntVar(&p.Warmup, "warmup", p.Warmup, "ping: requests before measuring")
	fs.IntVar(&p.RequestBytes, "request-bytes", p.RequestBytes, "ping: request frame payload, bytes")
	fs.IntVar(&p.ReplyBytes, "reply-bytes", p.ReplyBytes, "ping: reply frame payload, bytes")
	Choice(fs, "workload", "llm", "ping")
	IntRange(fs, "depth", 1, 1<<16)
	DurationRange(fs, "delay", 0, link.MaxDelay)
	DurationRange(fs, "jitter", 0, link.MaxDelay)
	FlagCheck(fs, "bandwidth", checkLinkRate)
	ByteRange(fs, "payload-bytes", 0, trace.MaxPayload)
	IntRange(fs, "tokens", 1, 1<<20)
	IntRange(fs, "hidden", 1, 4096)
	IntRange(fs, "submits", 1, 64)
	IntRange(fs, "waits", 1, 64)
	IntRange(fs, "submit-min", 4, 16<<20)
	IntRange(fs, "submit-max", 4, 16<<20)
	IntRange(fs, "state-bytes", 8, 64<<20)
	IntRange(fs, "logits-bytes", 8, 64<<20)
	IntRange(fs, "params-bytes", 8, 1<<20)
	IntRange(fs, "upload-chunk", 4096, 16<<20)
	IntRange(fs, "requests", 1, 1e9)
	DurationRange(fs, "duration", 0, 24*time.Hour)
	IntRange(fs, "warmup", 0, 1e9)
	ByteRange(fs, "request-bytes", wire.CmdHeaderSize+4, 16<<20)
	ByteRange(fs, "reply-bytes", wire.CmdHeaderSize+wire.ReplyFixedSize, 16<<20)
	return f
}

// checkVenusFlags validates the parsed flags and returns the link mode and the bandwidth (bytes per
// second, 0 for unlimited); it sets d.Seed from --seed.
func checkVenusFlags(f *venusFlags, d *venusd.LLMConfig) (venusd.Mode, float64, error) {
	if *f.connect == "" {
		return 0, 0, BadInput("--connect ADDR is required (e.g. tcp://127.0.0.1:5556)")
	}
	if _, err := transport.ParseAddr(*f.connect); err != nil {
		return 0, 0, BadInput("--connect: %v", err)
	}
	m, err := venusd.ParseMode(*f.mode)
	if err != nil {
		return 0, 0, BadInput("--mode: %v", err)
	}
	if *f.workload != "llm" && *f.workload != "ping" {
		return 0, 0, BadInput("--workload %q: want llm or ping", *f.workload)
	}
	if *f.depth < 1 || *f.depth > 1<<16 {
		return 0, 0, BadInput("--depth %d: want 1 to 65536", *f.depth)
	}
	bw, err := parseLinkRate(*f.bandwidth)
	if err != nil {
		return 0, 0, BadInput("--bandwidth: %v", err)
	}
	if *f.payload < 0 || *f.payload > trace.MaxPayload {
		return 0, 0, BadInput("--payload-bytes %d: want 0..%d", *f.payload, trace.MaxPayload)
	}
	d.Seed = *f.seed
	if *f.workload == "llm" {
		if d.Tokens < 1 {
			return 0, 0, BadInput("--tokens %d: want at least 1", d.Tokens)
		}
		if err := d.Validate(); err != nil {
			return 0, 0, BadInput("%v", err)
		}
	}
	return m, bw, nil
}

// writeVenusResult prints res on env's stdout, as indented JSON when asJSON is set.
func writeVenusResult(env *Env, res *venusd.Result, asJSON bool) error {
	if !asJSON {
		printVenusResult(env, res)
		return nil
	}
	enc := json.NewEncoder(env.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return Failed("write result: %v", err)
	}
	return nil
}

func printVenusResult(env *Env, r *venusd.Result) {
	w := env.Stdout
	fmt.Fprintf(w, "workload %s, mode %s, transport %s, depth %d, delay %.0fµs\n", r.Workload, r.Mode, r.Transport, r.Depth, r.DelayUS)
	if r.Workload == "llm" {
		ok := "ok"
		if !r.ChecksumOK {
			ok = "WRONG (reference " + r.ReferenceChecksum + ")"
		} else if r.ReferenceChecksum == "" {
			ok = "not verified"
		}
		fmt.Fprintf(w, "tokens %d in %.3fs: %.1f tokens/s; load %.3fs\n", r.Tokens, r.GenerateS, r.TokensPerS, r.LoadS)
		fmt.Fprintf(w, "checksum %s %s\n", r.Checksum, ok)
		fmt.Fprintf(w, "per token: %.1f frames, %.1f round trips, %.1f blocking waits, %.0f bytes sent, %.0f bytes received\n",
			r.PerToken.Frames, r.PerToken.RoundTrips, r.PerToken.SyncWaits, r.PerToken.BytesSent, r.PerToken.BytesRecv)
		fmt.Fprintf(w, "auto-invalidate: enabled=%v, %d mappings, %d bytes per wait, cap %d\n",
			r.Invalidate.Enabled, r.Invalidate.Eligible, r.Invalidate.BytesPerWait, r.Invalidate.CapBytes)
	}
	if p := r.Ping; p != nil {
		fmt.Fprintf(w, "ping: %d requests, %.0f/s, rtt min %.1fµs p50 %.1fµs mean %.1fµs p99 %.1fµs max %.1fµs\n",
			p.Requests, p.ThroughputPerS, p.RTTMinUS, p.RTTP50US, p.RTTMeanUS, p.RTTP99US, p.RTTMaxUS)
	}
	t := r.Totals
	fmt.Fprintf(w, "totals: %d frames sent, %d received, %d send calls, %d recv calls, %d bytes sent, %d received\n",
		t.FramesSent, t.FramesRecv, t.SendCalls, t.RecvCalls, t.BytesSent, t.BytesRecv)
	fmt.Fprintf(w, "send avg %.1fµs max %.1fµs; recv avg %.1fµs max %.1fµs\n", t.SendAvgUS, t.SendMaxUS, t.RecvAvgUS, t.RecvMaxUS)
	if l := r.Link; l != nil {
		fmt.Fprintf(w, "link: %d frames sent, handed over p50 %.1fµs p99 %.1fµs max %.1fµs after their time; %d received, p50 %.1fµs p99 %.1fµs max %.1fµs; spin %.0fµs\n",
			l.Sent.Frames, l.Sent.HandOverP50US, l.Sent.HandOverP99US, l.Sent.HandOverMaxUS,
			l.Received.Frames, l.Received.HandOverP50US, l.Received.HandOverP99US, l.Received.HandOverMaxUS, l.SpinMarginUS)
	}
	for _, m := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", m)
	}
}
