package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/models"
	"github.com/perflab/perflab/trace"
	"github.com/perflab/perflab/venusd"
	"github.com/perflab/perflab/venusd/transport"
)

// Schema is the schema field of `perflab bench --json`.
const Schema = "perflab.bench/v1"

// Defaults of Config.
var (
	DefaultTransports = []string{"tcp"}
	DefaultClients    = []int{1, 2, 4, 8, 16}
	DefaultDepths     = []int{1}
)

// DefaultDuration is how long each point of a sweep measures: one second gives tens of
// thousands of round trips per point on loopback, enough for a stable p99, and keeps the
// 15-point sweep of the README under half a minute.
const DefaultDuration = time.Second

// DefaultShmSpin is the shm spin `perflab bench` uses: 0, venusd's adaptive default (poll up
// to about 50 µs, yielding to other goroutines every 64 polls, back off where polling stops
// paying). It used to be 100 polls, which made every shm wait a futex sleep and a wake-up: on
// 2 vCPUs shm then ran at 9k round trips/s with one client against 44k/s over Unix sockets.
const DefaultShmSpin = 0

// MaxClients bounds the clients of one point; each is a connection and a goroutine.
const MaxClients = 256

// Config describes a sweep: every combination of transport, mode, depth and client count is a
// point. Zero fields take the defaults.
type Config struct {
	Transports []string      // tcp, unix, shm (default DefaultTransports)
	Modes      []venusd.Mode // client modes (default baseline)
	Clients    []int         // closed-loop clients per point (default DefaultClients)
	Depths     []int         // requests each client keeps in flight; >1 uses the pipeline mode (default 1)
	Duration   time.Duration // measured time per point, after a warm-up (default DefaultDuration)
	// Loop is the server's loop: "batch" (venusd.NewBatchServer, the default) or "conn".
	Loop string
	// Dir, when set, keeps one client-side trace per point there (the file name is the point's
	// label, the batch loop's counters during the point are in its footer stats), analyses it,
	// and adds its Little's-law row to the result.
	Dir string
	// Delay is an emulated one-way link delay added by each client's transport in each
	// direction (the RTT grows by 2×Delay): the network latency that batching overlaps.
	Delay time.Duration
	// ShmSpin is how many polls a shm ring reader makes before it sleeps on a futex, in the
	// server and in every client (0: venusd's default). With more clients than cores, short
	// spins leave the processors to the peers that have work.
	ShmSpin int
	// RequestBytes is the size of each ping request's payload, bytes (default 64).
	RequestBytes int
	// Progress, when set, is called after each point with the points done and the total.
	Progress func(done, total int, p *Point)
	// Log receives the servers' warnings (nil: discarded).
	Log io.Writer
	// ServerCommand, when set, runs each transport's server in a process of its own: the
	// command and its first arguments (perflab's `venus serve`), to which the sweep adds
	// --listen, --loop, --shm-spin, --max-conns and --stats. The kernel's count of the threads'
	// waits for a CPU is then split between the clients' side (perflab's process) and the
	// server's. Empty: the server runs in perflab's process, sharing its threads with the
	// clients, and the run queue is not split by side.
	ServerCommand []string
	// Evidence, when set, records each socket point's processes with the kernel's scheduler
	// evidence and reports each round trip's own wake-up and run-queue delay
	// (RunQueue.Evidence); EvidenceNote says why it is not set, when it could not be.
	Evidence     EvidenceRecorder
	EvidenceNote string
}

// Point is one measured point of a sweep. JSON field names are a contract (docs/design.md).
type Point struct {
	Transport      string  `json:"transport"`
	Mode           string  `json:"mode"`
	Clients        int     `json:"clients"`
	Depth          int     `json:"depth"`
	Requests       int64   `json:"requests"`         // round trips measured, all clients
	ThroughputPerS float64 `json:"throughput_per_s"` // completions per second, all clients, over the point's window
	RTTUS          RTT     `json:"rtt_us"`
	// InflightMean is L: the clients' time with a request outstanding (the sum of every RTT)
	// over the point's window, the slowest client's measured time.
	InflightMean float64 `json:"inflight_mean"`
	// RequestsPerCycle is the batch loop's mean requests per busy cycle during the point (batch
	// loop only).
	RequestsPerCycle float64 `json:"requests_per_cycle,omitempty"`
	// CycleUS is the batch loop's mean busy-cycle time (execute and flush), µs; CycleP50US and
	// CycleP99US are percentiles of the whole busy cycle (poll, execute, flush).
	CycleUS    float64 `json:"cycle_us,omitempty"`
	CycleP50US float64 `json:"cycle_p50_us,omitempty"`
	CycleP99US float64 `json:"cycle_p99_us,omitempty"`
	// EmptyCycleShare is the share of loop cycles that found no request.
	EmptyCycleShare float64 `json:"empty_cycle_share,omitempty"`
	// RunQueueUS is the time all of perflab's threads spent runnable waiting for a CPU during the
	// point, summed over the threads, per round trip, µs: the run-queue and wake-up delay the
	// kernel counts (schedstat). Go runs the clients' and the server's goroutines on one pool of
	// threads, so the sum is every thread's, not one side's; a thread that exited during the
	// point is left out. 0 where the kernel does not say.
	RunQueueUS float64 `json:"runqueue_us_per_rt,omitempty"`
	// RunQueue splits RunQueueUS between the clients' process and the server's (with
	// Config.ServerCommand), over the load window, and says how much of the mean RTT's rise
	// since the series' first point it accounts for.
	RunQueue *RunQueue `json:"runqueue,omitempty"`
	// CPUCores is the CPU time (user and system) of perflab's process during the point over its
	// wall time, with the server's process's (its threads' schedstat time on a CPU) when it runs
	// apart: the cores the clients and the server kept busy together, warm-up included.
	// CPUUSPerRT is that CPU time per round trip, µs.
	CPUCores   float64 `json:"cpu_cores,omitempty"`
	CPUUSPerRT float64 `json:"cpu_us_per_rt,omitempty"`
	// ShmSpin says how the shm ring waits went and whether polling paid (shm points).
	ShmSpin *ShmSpin `json:"shm_spin,omitempty"`
	Trace   string   `json:"trace,omitempty"` // the point's trace, with Config.Dir

	samples  []float64         // every RTT, µs
	warnings []string          // the clients' warnings (an emulated link that fell behind), each once
	loop     *venusd.LoopStats // the batch loop's counters during the point
	separate bool              // the server ran in a process of its own
}

// RTT summarises the round-trip times of a point, µs.
type RTT struct {
	P50  float64 `json:"p50"`
	Mean float64 `json:"mean"`
	P99  float64 `json:"p99"`
}

// Label names the point: "tcp/baseline/d1/c4".
func (p *Point) Label() string {
	return fmt.Sprintf("%s/%s/d%d/c%d", p.Transport, p.Mode, p.Depth, p.Clients)
}

// Machine describes where a sweep ran.
type Machine struct {
	Host   string `json:"host"`
	CPUs   int    `json:"cpus"`
	Kernel string `json:"kernel"`
	Go     string `json:"go"`
}

// Result is a sweep and its analysis: what `perflab bench --json` prints.
type Result struct {
	Schema    string  `json:"schema"`
	Machine   Machine `json:"machine"`
	Loop      string  `json:"loop"`
	DurationS float64 `json:"duration_s"` // measured time per point
	DelayUS   float64 `json:"delay_us"`   // emulated one-way link delay
	Points    []Point `json:"points"`
	// LittlesLaw checks L = λ·W at every point (label: the point's), from the clients' own
	// measurements; with Config.Dir a second row per point comes from its trace (label suffix
	// " trace"): the in-flight integral of the traced frames.
	LittlesLaw []analyzers.LittleRow `json:"littles_law"`
	// BatchFit is the first series' fit (every series has its own in Series).
	BatchFit *analyzers.BatchFit `json:"batch_fit,omitempty"`
	Series   []Series            `json:"series"`
	// Transports sets the transports side by side at each client count, when the sweep has shm
	// and another: whether shm was the fastest, and why not where it was not.
	Transports []TransportRow `json:"transports,omitempty"`
	// EvidenceNote says why the points have no kernel evidence of each round trip's wake-up
	// delay (RunQueue.Evidence), when none was recorded: no eBPF here, or switched off.
	EvidenceNote string   `json:"evidence_note,omitempty"`
	Warnings     []string `json:"warnings"`
}

// Series is the analysis of seed 003 on the points of one transport, mode and depth as the
// clients grow.
type Series struct {
	Transport string `json:"transport"`
	Mode      string `json:"mode"`
	Depth     int    `json:"depth"`
	// BatchFit fits RTT = T_fixed + T_per_req·N, N the mean requests in flight, over the points.
	BatchFit    *analyzers.BatchFit `json:"batch_fit,omitempty"`
	Predictions []Prediction        `json:"predictions,omitempty"`
	// Histogram and Modes are the RTT distribution of the series' largest client count and its
	// populations.
	HistogramClients int                    `json:"histogram_clients"`
	Histogram        []analyzers.HistBucket `json:"histogram"`
	Modes            []analyzers.Mode       `json:"modes"`
	// LoopPhases are the batch loop's busy-cycle and phase times at the series' largest client
	// count (seed 003 §6.2), when the batch loop ran.
	LoopPhases []PhaseTiming `json:"loop_phases,omitempty"`
	// Saturation is the smallest client count whose throughput came within 10% of the series'
	// highest: past it, more clients add RTT, not throughput (0 when only the last point did).
	Saturation int `json:"saturation_clients"`

	points []int // indexes into Result.Points
}

// PhaseTiming is the distribution of one phase of the batch loop's busy cycles, µs.
type PhaseTiming struct {
	Phase string  `json:"phase"` // poll, execute, flush, cycle
	P50US float64 `json:"p50_us"`
	P90US float64 `json:"p90_us"`
	P99US float64 `json:"p99_us"`
}

// Prediction is the batch model's throughput at one point against the measured one (seed 003
// §5.4).
type Prediction struct {
	Clients                 int     `json:"clients"`
	InFlight                float64 `json:"inflight"`
	CyclePredictedUS        float64 `json:"t_cycle_predicted_us"`
	ThroughputPredictedPerS float64 `json:"throughput_predicted_per_s"`
	ThroughputMeasuredPerS  float64 `json:"throughput_measured_per_s"`
}

// server is what the sweep needs of a venusd server: where it listens.
type server interface {
	Addr() string
}

// loopStatser is the batch server's optional counters.
type loopStatser interface {
	LoopStats() venusd.LoopStats
}

func (c *Config) normalize() error {
	if len(c.Transports) == 0 {
		c.Transports = DefaultTransports
	}
	if len(c.Modes) == 0 {
		c.Modes = []venusd.Mode{venusd.ModeBaseline}
	}
	if len(c.Clients) == 0 {
		c.Clients = DefaultClients
	}
	if len(c.Depths) == 0 {
		c.Depths = DefaultDepths
	}
	if c.Duration <= 0 {
		c.Duration = DefaultDuration
	}
	if c.Loop == "" {
		c.Loop = "batch"
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	for _, t := range c.Transports {
		if t != "tcp" && t != "unix" && t != "shm" {
			return fmt.Errorf("transport %q: want tcp, unix or shm", t)
		}
	}
	for _, n := range c.Clients {
		if n < 1 || n > MaxClients {
			return fmt.Errorf("clients %d: want 1 to %d", n, MaxClients)
		}
	}
	for _, d := range c.Depths {
		if d < 1 || d > 1024 {
			return fmt.Errorf("depth %d: want 1 to 1024", d)
		}
	}
	if c.Delay < 0 || c.Delay > time.Second {
		return fmt.Errorf("delay %s: want 0 to 1s", c.Delay)
	}
	if c.Loop != "batch" && c.Loop != "conn" {
		return fmt.Errorf("loop %q: want batch or conn", c.Loop)
	}
	return nil
}

// Run measures every point of the sweep and analyses it. It starts one venusd server per
// transport on a fresh loopback address and stops it before returning.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	meta := venusd.TraceMeta(nil, 0)
	res := &Result{Schema: Schema, Loop: cfg.Loop, DurationS: cfg.Duration.Seconds(), DelayUS: float64(cfg.Delay) / 1e3,
		Machine:    Machine{Host: meta.Host, CPUs: runtime.NumCPU(), Kernel: meta.Kernel, Go: runtime.Version()},
		LittlesLaw: []analyzers.LittleRow{}, Series: []Series{}, Warnings: []string{}, EvidenceNote: cfg.EvidenceNote}
	if cfg.Dir != "" {
		if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
			return nil, fmt.Errorf("make trace directory: %w", err)
		}
	}
	total := len(cfg.Transports) * len(cfg.Modes) * len(cfg.Depths) * len(cfg.Clients)
	done := 0
	for _, tr := range cfg.Transports {
		err := withServer(ctx, &cfg, tr, func(srv server) error {
			for _, m := range cfg.Modes {
				for _, d := range cfg.Depths {
					s := Series{Transport: tr, Mode: m.String(), Depth: d}
					for _, n := range cfg.Clients {
						p, err := measure(ctx, &cfg, srv, tr, m, d, n)
						if err != nil {
							return fmt.Errorf("point %s/%s/d%d/c%d: %w", tr, m, d, n, err)
						}
						// Only the series' last point keeps its samples (for the histogram):
						// a 1 s point at 16 clients holds about a million RTTs.
						if k := len(s.points); k > 0 {
							res.Points[s.points[k-1]].samples = nil
							res.Points[s.points[k-1]].loop = nil
						}
						for _, w := range p.warnings {
							res.Warnings = append(res.Warnings, p.Label()+": "+w)
						}
						p.warnings = nil
						res.Points = append(res.Points, *p)
						s.points = append(s.points, len(res.Points)-1)
						done++
						if cfg.Progress != nil {
							cfg.Progress(done, total, p)
						}
					}
					res.Series = append(res.Series, s)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	analyze(res, &cfg)
	return res, nil
}

// withServer runs a server of the configured loop on a fresh address of transport tr while fn
// runs: in a process of its own with cfg.ServerCommand, else in this one.
func withServer(ctx context.Context, cfg *Config, tr string, fn func(server) error) error {
	var listen string
	switch tr {
	case "tcp":
		listen = "tcp://127.0.0.1:0"
	case "unix":
		dir, err := os.MkdirTemp("", "perflab-bench-")
		if err != nil {
			return fmt.Errorf("make socket directory: %w", err)
		}
		defer os.RemoveAll(dir)
		listen = "unix://" + filepath.Join(dir, "venus.sock")
	case "shm":
		listen = fmt.Sprintf("shm:///perflab-bench-%d-%d", os.Getpid(), time.Now().UnixNano()%1e9)
	}
	if len(cfg.ServerCommand) > 0 {
		c, err := startChild(ctx, cfg.ServerCommand, listen, cfg.Loop, cfg.ShmSpin, MaxClients+8, cfg.Log)
		if err != nil {
			return err
		}
		ferr := fn(c)
		if err := c.stop(); err != nil && ferr == nil {
			ferr = fmt.Errorf("server process: %w", err)
		}
		return ferr
	}
	scfg := venusd.ServerConfig{Listen: listen, Log: cfg.Log, MaxConns: MaxClients + 8, ShmSpin: cfg.ShmSpin}
	srv, err := venusd.NewLoopServer(cfg.Loop, scfg)
	if err != nil {
		return fmt.Errorf("start venusd: %w", err)
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx) }()
	ferr := fn(srv)
	stop()
	if err := <-served; err != nil && ferr == nil {
		ferr = fmt.Errorf("venusd: %w", err)
	}
	return ferr
}

// serverSnap is what the sweep reads of the server before and after a point: the batch loop's
// counters (nil with the conn loop) and, for a server in a process of its own, its shm ring
// waits (in this process they are counted with the clients').
type serverSnap struct {
	loop *venusd.LoopStats
	shm  transport.ShmWaitStats
}

// snapServer reads srv's counters.
func snapServer(srv server) (serverSnap, error) {
	switch s := srv.(type) {
	case *childServer:
		c, err := s.counters()
		return serverSnap{loop: c.Loop, shm: c.Shm}, err
	case loopStatser:
		st := s.LoopStats()
		return serverSnap{loop: &st}, nil
	}
	return serverSnap{}, nil
}

// measure runs n closed-loop ping clients for cfg.Duration and aggregates what they measured.
func measure(ctx context.Context, cfg *Config, srv server, tr string, m venusd.Mode, depth, n int) (*Point, error) {
	p := &Point{Transport: tr, Mode: m.String(), Clients: n, Depth: depth}
	mode := pointMode(m, depth)
	var tw *trace.Writer
	if cfg.Dir != "" {
		p.Trace = filepath.Join(cfg.Dir, strings.NewReplacer("/", "-", "+", "-").Replace(p.Label())+".plt")
		var err error
		tw, err = trace.Create(p.Trace, venusd.TraceMeta([]string{"perflab", "bench", p.Label()}, 64), nil)
		if err != nil {
			return nil, fmt.Errorf("create trace: %w", err)
		}
	}
	before, err := snapServer(srv)
	if err != nil {
		return nil, err
	}
	child, separate := srv.(*childServer)
	serverPid := 0
	if separate {
		serverPid = child.Pid()
	}
	p.separate = separate
	rec, err := startEvidence(ctx, cfg, p, serverPid)
	if err != nil {
		p.warnings = append(p.warnings, "kernel evidence: "+err.Error())
	}
	sampler := startRQSampler(serverPid, cfg.Duration)
	u0 := readUsage()
	results := make([]*venusd.Result, n)
	ends := make([]time.Time, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = venusd.RunWorkload(ctx, venusd.ClientConfig{
				Connect: srv.Addr(), Workload: "ping", Mode: mode, Depth: depth, Delay: cfg.Delay, ShmSpin: cfg.ShmSpin, Trace: tw, Log: cfg.Log,
				Ping: venusd.PingConfig{Duration: cfg.Duration, Warmup: pointWarmup, RequestBytes: cfg.RequestBytes, KeepSamples: true},
			})
			ends[i] = time.Now()
		}()
	}
	wg.Wait()
	u1 := readUsage()
	samples := sampler.finish()
	after, aerr := snapServer(srv)
	if aerr == nil && before.loop != nil && after.loop != nil {
		setLoopFigures(p, after.loop.Sub(*before.loop))
	}
	var ev *RunQueueEvidence
	if rec != nil {
		var err error
		if ev, err = rec.finish(p); err != nil {
			p.warnings = append(p.warnings, "kernel evidence: "+err.Error())
		}
	}
	if tw != nil {
		if p.loop != nil {
			writeLoopStats(tw, p.loop)
		}
		if err := tw.Close(); err != nil {
			return nil, fmt.Errorf("close trace: %w", err)
		}
	}
	if err := errors.Join(append(errs, aerr)...); err != nil {
		return nil, err
	}
	if err := addClientResults(p, results); err != nil {
		return nil, err
	}
	p.warnings = clientWarnings(results)
	from, to := pointWindow(results, ends)
	allRTs := p.Requests + int64(n*(pointWarmup+1))
	runQueueOver(p, samples, from, to, allRTs, separate)
	if ev != nil {
		if p.RunQueue == nil {
			p.RunQueue = &RunQueue{Separate: separate}
		}
		p.RunQueue.Evidence = ev
	}
	// The whole point's figures (warm-up included, as the CPU time is): the threads' run delay
	// for the shm note, and the server process's time on a CPU.
	var rqNs, serverCPU int64 = -1, 0
	if first, last := samples[0], samples[len(samples)-1]; first.ok && last.ok {
		rqNs = threadsSince(first.client, last.client).runDelay
		if separate {
			st := threadsSince(first.server, last.server)
			rqNs += st.runDelay
			serverCPU = st.onCPU
		}
	}
	u1.cpu += time.Duration(serverCPU)
	if separate {
		u0.shm = addShm(u0.shm, before.shm)
		u1.shm = addShm(u1.shm, after.shm)
	}
	setUsage(p, u0, u1, allRTs, rqNs)
	return p, nil
}

// addShm adds the shm wait counts of two processes.
func addShm(a, b transport.ShmWaitStats) transport.ShmWaitStats {
	return transport.ShmWaitStats{Waits: a.Waits + b.Waits, Polled: a.Polled + b.Polled, Yielded: a.Yielded + b.Yielded,
		Slept: a.Slept + b.Slept, Late: a.Late + b.Late, BackedOff: a.BackedOff + b.BackedOff, PollNs: a.PollNs + b.PollNs}
}

// pointWindow is when every client of a point was measuring: from the last client's start of
// measuring (its end less its measured time, Requests/ThroughputPerS) to the first client's end.
func pointWindow(results []*venusd.Result, ends []time.Time) (from, to time.Time) {
	for i, r := range results {
		if r == nil || r.Ping == nil || r.Ping.ThroughputPerS <= 0 {
			continue
		}
		start := ends[i].Add(-time.Duration(float64(r.Ping.Requests) / r.Ping.ThroughputPerS * 1e9))
		if from.IsZero() || start.After(from) {
			from = start
		}
		if to.IsZero() || ends[i].Before(to) {
			to = ends[i]
		}
	}
	return from, to
}

// maxPointWarnings is how many of its clients' warnings a point repeats; the rest are counted.
const maxPointWarnings = 2

// clientWarnings gathers the warnings of a point's clients, each once, at most maxPointWarnings
// of them and then a count of the others (16 clients behind one busy link say much the same).
func clientWarnings(results []*venusd.Result) []string {
	var out []string
	more := 0
	for _, r := range results {
		for _, w := range r.Warnings {
			switch {
			case slices.Contains(out, w):
			case len(out) < maxPointWarnings:
				out = append(out, w)
			default:
				more++
			}
		}
	}
	if more > 0 {
		out = append(out, fmt.Sprintf("and %d more warnings of this point's clients", more))
	}
	return out
}

// pointMode is the client mode that runs m with depth requests in flight: more than one in flight
// needs the pipeline mode.
func pointMode(m venusd.Mode, depth int) venusd.Mode {
	mode := m
	if depth > 1 && !mode.Pipeline() {
		mode = venusd.ModePipeline
		if m.Coalesce() {
			mode = venusd.ModeCoalescePipeline
		}
	}
	return mode
}

// setLoopFigures sets p's event-loop figures from the batch server's loop counters d during the
// point.
func setLoopFigures(p *Point, d venusd.LoopStats) {
	p.loop = &d
	p.RequestsPerCycle = round3(d.RequestsPerCycle())
	p.CycleUS = round3(d.CycleMeanNs() / 1e3)
	p.CycleP50US = round3(d.Cycle.Quantile(0.5) / 1e3)
	p.CycleP99US = round3(d.Cycle.Quantile(0.99) / 1e3)
	if d.Cycles > 0 {
		p.EmptyCycleShare = round3(float64(d.EmptyCycles) / float64(d.Cycles))
	}
}

// writeLoopStats records the loop's counters during the point, d, as stats of the point's trace,
// next to the clients' frames.
func writeLoopStats(tw *trace.Writer, d *venusd.LoopStats) {
	for name, v := range map[string]int64{"loop.cycles": d.Cycles, "loop.empty_cycles": d.EmptyCycles,
		"loop.requests": d.Requests, "loop.writes": d.Writes, "loop.poll_ns": d.PollNs,
		"loop.exec_ns": d.ExecNs, "loop.flush_ns": d.FlushNs, "loop.cycle_p50_ns": int64(d.Cycle.Quantile(0.5)),
		"loop.cycle_p99_ns": int64(d.Cycle.Quantile(0.99))} {
		tw.SetStat(name, v)
	}
}

// addClientResults sets p's samples, round trips, throughput and mean requests in flight from the
// clients' results.
func addClientResults(p *Point, results []*venusd.Result) error {
	// One window for the point: from the clients' common start to the end of the slowest
	// client's measured time (each client measures for Duration after its warm-up, then
	// finishes the request it has in flight). λ is the completions in that window, L the
	// clients' time with a request outstanding (the sum of their RTTs) over it, W the mean RTT.
	var wallS, sumRTT float64
	for _, r := range results {
		st := r.Ping
		if st == nil {
			return errors.New("client returned no ping measurement")
		}
		if st.ThroughputPerS > 0 {
			wallS = math.Max(wallS, float64(st.Requests)/st.ThroughputPerS)
		}
		p.samples = append(p.samples, st.RTTsUS...)
	}
	sort.Float64s(p.samples)
	for _, v := range p.samples {
		sumRTT += v
	}
	p.Requests = int64(len(p.samples))
	if k := len(p.samples); k > 0 && wallS > 0 {
		p.RTTUS = RTT{P50: round3(models.Quantile(p.samples, 0.5)), Mean: round3(sumRTT / float64(k)), P99: round3(models.Quantile(p.samples, 0.99))}
		p.ThroughputPerS = float64(k) / wallS
		p.InflightMean = sumRTT / 1e6 / wallS
	}
	p.ThroughputPerS = math.Round(p.ThroughputPerS)
	p.InflightMean = round3(p.InflightMean)
	return nil
}

func round3(v float64) float64 { return math.Round(v*1e3)/1e3 + 0 }
