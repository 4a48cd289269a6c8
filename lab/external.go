package lab

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/loops"
	"github.com/perflab/perflab/models"
	"github.com/perflab/perflab/protocol"
)

// ExternalLittleTolerance is how far L/λ may be from W at a point of an external sweep before it
// warns: 5%. L and W come from the trace over the load window and λ from the client's own
// count and clock, so their agreement checks that the trace saw the client's requests over the
// window the client timed.
const ExternalLittleTolerance = 0.05

// ExternalPredictionTolerance is how far the batch model's throughput may be from the client's
// at a point before the sweep warns: 20%.
const ExternalPredictionTolerance = 0.20

// ClientBusy is the busy share of the client's own event loop above which a point warns that
// the client, not the server, limits the throughput: 80%.
const ClientBusy = 0.8

// RunDelayShare is the share of a request's cycle (clients / throughput) the server's threads
// may spend waiting for a processor before a point warns that the machine's other work sets
// it: 25%.
const RunDelayShare = 0.25

// SteadyShare is the least share of a point's load window over which all its connections must
// be in flight together (its steady window) for the point to be taken as that many clients
// throughout without a warning: 90%.
const SteadyShare = 0.9

// ClientsPlaceholder is replaced by the point's client count in ExternalConfig.Client.
const ClientsPlaceholder = "{clients}"

// Recorder records the server processes and the client command, started by the recorder
// (argv, its stdout captured), from the client's first instruction until it exits, into the
// trace at path, with the wait calls (record --waits). It returns what the client printed.
type Recorder func(ctx context.Context, server []uint32, client []string, path string) (stdout []byte, err error)

// ExternalConfig describes a sweep of a server perflab did not start, driven by a closed-loop
// client command the user gives.
type ExternalConfig struct {
	Server      []uint32 // the server's processes (every thread is recorded)
	ServerLabel string   // how the report names the server ("redis-server", "pid 1234")
	// Client is the client command, run by sh -c, with ClientsPlaceholder where the client
	// count goes: "redis-benchmark -p 6379 -c {clients} -n 20000 -t get --csv".
	Client       string
	ClientFormat string // how its summary is read: auto, redis-benchmark, memtier, json (ParseClientOutput)
	ClientTest   string // with several tests in the client's summary, the one to use
	Clients      []int  // client counts (default DefaultClients)
	Dir          string // where the point traces are kept (a temporary directory, removed, when "")
	Protocol     string // the protocol the server speaks, as analyze's --protocol (auto when "")
	Record       Recorder
	Progress     func(done, total int, p *ExternalPoint)
}

// ExternalPoint is one client count of an external sweep. JSON field names are a contract
// (docs/design.md); transport, mode and depth are "external", "closed-loop" and 1, so that
// scripts reading `perflab bench --json` points find them.
type ExternalPoint struct {
	Transport string `json:"transport"`
	Mode      string `json:"mode"`
	Clients   int    `json:"clients"`
	Depth     int    `json:"depth"`
	// ThroughputPerS and RTTUS are the client's own figures (its summary); Client is that
	// summary as read.
	ThroughputPerS float64      `json:"throughput_per_s"`
	RTTUS          RTT          `json:"rtt_us"`
	Client         ClientReport `json:"client"`
	// InflightMean is L from the trace over the load window (LoadWindow): the round trips of
	// the closed loop's connections (request's first byte out to the reply's last byte in)
	// summed over the window from the first request to the last reply.
	InflightMean float64 `json:"inflight_mean"`
	// TraceRoundTrips is every round trip of the client in the trace (its set-up's included);
	// TraceThroughputPerS and TraceRTTMeanUS are the load window's.
	TraceRoundTrips     int64   `json:"trace_round_trips"`
	TraceThroughputPerS float64 `json:"trace_throughput_per_s"`
	TraceRTTMeanUS      float64 `json:"trace_rtt_mean_us"`
	// LoadWindow is the run of the closed loop's connections (the clients connections with
	// the most round trips), the window a benchmark times itself over; SetupRoundTrips the
	// client's round trips outside it (redis-benchmark's CONFIG GETs on a connection of their
	// own). SteadyWindow is the part where all of them were active, when there is one.
	LoadWindow      Window  `json:"load_window"`
	SetupRoundTrips int64   `json:"setup_round_trips"`
	SteadyWindow    *Window `json:"steady_window,omitempty"`
	// ClientLatencyExcessUS is the client's own mean latency minus the trace's mean RTT, µs:
	// the time per request between the client's clock reads and its system calls (its own
	// processing and scheduling), which the trace's round trips leave out.
	ClientLatencyExcessUS float64 `json:"client_latency_excess_us"`
	// ServerResidenceUS is the server's mean time per request, from its first read of the
	// request to its reply's last byte, µs.
	ServerResidenceUS float64 `json:"server_residence_us"`
	// ServerCPUUS and ServerRunDelayUS are, per round trip of the load, the time the server's
	// threads ran on a processor and the time they waited runnable for one while the point ran
	// (the kernel's schedstat), µs; 0 where the kernel does not say.
	ServerCPUUS      float64 `json:"server_cpu_us,omitempty"`
	ServerRunDelayUS float64 `json:"server_run_delay_us,omitempty"`
	// CPU is the processor time over the load window: the whole machine's and the point's own
	// processes' (server, client, perflab), per round trip, and the processors they had; nil
	// where /proc does not say.
	CPU *WindowCPU `json:"cpu,omitempty"`
	// ClientLoop is the client's own event loop, when it has one.
	ClientLoop *ClientLoop `json:"client_loop,omitempty"`
	// Requests is the requests the server's loop threads received in complete cycles;
	// Commands counts the server's received requests by command name.
	Requests int64            `json:"requests"`
	Commands map[string]int64 `json:"commands,omitempty"`
	// The server's loops while they served (their active spans): N per loop thread (requests
	// per cycle, empty cycles included) and the server's cycle (µs): the time that carries
	// all the loop threads' N at their throughput (one loop: its mean cycle); the mean busy
	// part of the cycles that received requests; the busy share of all their time; how many
	// loop threads served.
	RequestsPerCycle float64 `json:"requests_per_cycle"`
	CycleUS          float64 `json:"cycle_us"`
	BusyUS           float64 `json:"busy_us"`
	Utilization      float64 `json:"utilization"`
	LoopThreads      int     `json:"loop_threads"`
	// Loops are the server's loop threads at this point (analyze's loops section).
	Loops []loops.Thread `json:"loops,omitempty"`
	Trace string         `json:"trace,omitempty"`

	samples  []float64 // the client's RTTs from the trace, µs, sorted
	loadSpan [2]int64  // the load window's ends on the trace clock, ns
	traceP50 float64   // their median, µs
	summary  *analyzers.Summary
}

// ExternalResult is an external sweep and its analysis (`perflab bench --server ... --json`).
type ExternalResult struct {
	Schema string          `json:"schema"`
	Kind   string          `json:"kind"` // "external"
	Server string          `json:"server"`
	Client string          `json:"client"`
	Points []ExternalPoint `json:"points"`
	// LittlesLaw checks at every point L (the trace's client round trips) against λ and W
	// (the client's own throughput and mean latency).
	LittlesLaw []analyzers.LittleRow `json:"littles_law"`
	// BatchFit fits the server's whole loop cycle T_cycle = T_fixed + T_per_req·N over the
	// points, N the requests per cycle of all its loop threads together (loop threads × their
	// mean N); Predictions are its throughput N/T_cycle(N) at each point against the client's.
	BatchFit    *loops.Fit   `json:"batch_fit,omitempty"`
	Predictions []Prediction `json:"predictions,omitempty"`
	// ClosedLoop predicts the client's throughput at every point from the server's and the
	// client's loops and the delay outside them, calibrated at the smallest client count.
	ClosedLoop       *ClosedLoop            `json:"closed_loop,omitempty"`
	Ranges           []loops.NRange         `json:"t_per_req_by_n,omitempty"`
	Histogram        []analyzers.HistBucket `json:"histogram,omitempty"` // client RTTs at the largest client count
	HistogramClients int                    `json:"histogram_clients,omitempty"`
	Modes            []analyzers.Mode       `json:"modes"`
	Saturation       int                    `json:"saturation_clients"`
	Warnings         []string               `json:"warnings"`
}

// RunExternal measures every client count of cfg: it records the server while the client
// command runs, reads the client's summary, analyses the trace, and fits the batch model over
// the points.
func RunExternal(ctx context.Context, cfg ExternalConfig) (*ExternalResult, error) {
	if cfg.Record == nil || len(cfg.Server) == 0 || cfg.Client == "" {
		return nil, errors.New("external sweep: needs the server's pids, a client command and a recorder")
	}
	if !strings.Contains(cfg.Client, ClientsPlaceholder) {
		return nil, fmt.Errorf("client command %q: no %s where the client count goes", cfg.Client, ClientsPlaceholder)
	}
	if len(cfg.Clients) == 0 {
		cfg.Clients = DefaultClients
	}
	var spec *protocol.Spec
	if cfg.Protocol != "" && cfg.Protocol != "auto" {
		s, err := protocol.BuiltinSpec(cfg.Protocol)
		if err != nil {
			return nil, err
		}
		spec = s
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "perflab-bench-")
		if err != nil {
			return nil, fmt.Errorf("make trace directory: %w", err)
		}
		defer os.RemoveAll(d)
		dir = d
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("make trace directory: %w", err)
	}
	res := &ExternalResult{Schema: Schema, Kind: "external", Server: cfg.ServerLabel, Client: cfg.Client,
		LittlesLaw: []analyzers.LittleRow{}, Modes: []analyzers.Mode{}, Warnings: []string{}}
	for k, n := range cfg.Clients {
		p, err := measureExternal(ctx, &cfg, spec, dir, n)
		if err != nil {
			return nil, fmt.Errorf("point c%d: %w", n, err)
		}
		if k < len(cfg.Clients)-1 {
			p.samples = nil
		}
		if cfg.Dir == "" {
			p.Trace = ""
		}
		res.Points = append(res.Points, *p)
		if cfg.Progress != nil {
			cfg.Progress(k+1, len(cfg.Clients), p)
		}
	}
	analyzeExternal(res)
	return res, nil
}

func measureExternal(ctx context.Context, cfg *ExternalConfig, spec *protocol.Spec, dir string, n int) (*ExternalPoint, error) {
	p := &ExternalPoint{Transport: "external", Mode: "closed-loop", Depth: 1, Clients: n,
		Trace: filepath.Join(dir, fmt.Sprintf("c%d.plt", n))}
	argv := []string{"sh", "-c", strings.ReplaceAll(cfg.Client, ClientsPlaceholder, strconv.Itoa(n))}
	before, timed := processTimes(cfg.Server)
	sampler := startMachineSampler(ctx, cfg.Server)
	out, err := cfg.Record(ctx, cfg.Server, argv, p.Trace)
	samples := sampler.finish()
	if err != nil {
		return nil, err
	}
	var server threadSched
	if after, ok := processTimes(cfg.Server); ok && timed {
		server = threadsSince(before, after)
	}
	cr, err := ParseClientOutput(out, cfg.ClientFormat, cfg.ClientTest)
	if err != nil {
		return nil, err
	}
	p.Client = *cr
	p.ThroughputPerS = cr.ThroughputPerS
	p.RTTUS = RTT{P50: cr.LatencyP50US, Mean: cr.LatencyMeanUS, P99: cr.LatencyP99US}
	servers := map[uint32]bool{}
	for _, pid := range cfg.Server {
		servers[pid] = true
	}
	if err := clientRoundTrips(p, spec, servers); err != nil {
		return nil, err
	}
	opt := analyzers.Options{Protocol: cfg.Protocol}
	if opt.Protocol == "" {
		opt.Protocol = "auto"
	}
	s, err := analyzers.Analyze(protocol.Files([]string{p.Trace}, nil), opt)
	if err != nil {
		return nil, fmt.Errorf("analyze trace: %w", err)
	}
	p.summary = s
	if s.Loops != nil {
		addServerLoops(p, s.Loops, servers)
	}
	if w, ok := windowCPU(samples, p.loadSpan[0], p.loadSpan[1], p.LoadWindow.RoundTrips, numCPU()); ok {
		p.CPU = &w
	}
	if k := p.LoadWindow.RoundTrips; k > 0 && server.onCPU > 0 {
		p.ServerCPUUS = round3(float64(server.onCPU) / float64(k) / 1e3)
		p.ServerRunDelayUS = round3(float64(server.runDelay) / float64(k) / 1e3)
	}
	return p, nil
}

// clientRoundTrips reads the point's trace once for the client's round trips (the replies its
// processes received) into p's samples and trace figures over the load window, the server's
// residence per request and the commands it received, and the client's own event loop.
func clientRoundTrips(p *ExternalPoint, spec *protocol.Spec, server map[uint32]bool) error {
	sc := &pointScan{server: server, commands: map[string]int64{}, waits: map[uint32]*waitCalls{}}
	if err := protocol.Scan(protocol.Files([]string{p.Trace}, nil), spec, sc); err != nil {
		return fmt.Errorf("read trace: %w", err)
	}
	p.Commands = sc.commands
	if sc.res > 0 {
		p.ServerResidenceUS = round3(sc.resNS / float64(sc.res) / 1e3)
	}
	p.samples = make([]float64, 0, len(sc.trips))
	for _, rt := range sc.trips {
		p.samples = append(p.samples, float64(rt.End-rt.Start)/1e3)
	}
	sort.Float64s(p.samples)
	if len(p.samples) > 0 {
		p.traceP50 = round3(p.samples[len(p.samples)/2])
	}
	p.TraceRoundTrips = int64(len(sc.trips))
	load := loadConns(sc.trips, p.Clients)
	p.LoadWindow, p.loadSpan = loadWindow(sc.trips, load)
	p.SetupRoundTrips = p.TraceRoundTrips - p.LoadWindow.RoundTrips
	p.InflightMean = p.LoadWindow.InflightMean
	p.TraceThroughputPerS = p.LoadWindow.ThroughputPerS
	p.TraceRTTMeanUS = p.LoadWindow.RTTMeanUS
	if w, ok := steadyWindow(sc.trips, load); ok {
		p.SteadyWindow = &w
	}
	if p.TraceRTTMeanUS > 0 && p.RTTUS.Mean > 0 {
		p.ClientLatencyExcessUS = round3(p.RTTUS.Mean - p.TraceRTTMeanUS)
	}
	p.ClientLoop = clientLoop(sc.trips, load, sc.waits)
	return nil
}

// addServerLoops sets p's loop figures from the event-loop threads of the server processes.
func addServerLoops(p *ExternalPoint, lr *loops.Report, server map[uint32]bool) {
	// The loops over their active spans (the idle time before the client came and after it
	// left is not the loop's cycle): the server's N is the sum of its loop threads' N (requests
	// per cycle, empty cycles included) and its cycle the time that carries them at the loops'
	// throughput, so that N/T_cycle is what the loops served. One loop: its own N and mean
	// cycle. And the busy part of the cycles that received requests.
	var busyCycles uint64
	var nServer, served, busyNS, allBusy, allTime float64
	for _, t := range lr.Threads {
		if !server[t.PID] {
			continue
		}
		p.Loops = append(p.Loops, t)
		p.LoopThreads++
		p.Requests += int64(t.Requests)
		allBusy += t.BusyS
		allTime += t.BusyS + t.IdleS
		if t.ActiveCycleUS > 0 {
			nServer += t.ActiveRequestsPerCycle
			served += t.ActiveRequestsPerCycle / t.ActiveCycleUS
		}
		for _, g := range t.ByN {
			if g.N > 0 {
				busyCycles += g.Cycles
				busyNS += g.BusyUS * float64(g.Cycles)
			}
		}
	}
	if served > 0 {
		p.RequestsPerCycle = round3(nServer / float64(p.LoopThreads))
		p.CycleUS = round3(nServer / served)
	}
	if busyCycles > 0 {
		p.BusyUS = round3(busyNS / float64(busyCycles))
	}
	if allTime > 0 {
		p.Utilization = math.Round(allBusy/allTime*1e4) / 1e4
	}
}

// serverN is the requests the server's loops carry per cycle side by side: the sum of the loop
// threads' N. One loop (redis) is its own N; several (memcached's workers) share the machine's
// processors, so their cycles are fitted as one server cycle that carries all their requests.
func (p *ExternalPoint) serverN() float64 { return float64(p.LoopThreads) * p.RequestsPerCycle }

// analyzeExternal fills the Little's-law rows, the fit of the server's cycles over the points
// and its predictions, and the RTT populations at the largest client count.
func analyzeExternal(res *ExternalResult) {
	pts := checkExternalPoints(res)
	fit, warns, err := loops.FitPoints(pts, loops.DefaultConfidence)
	if err != nil {
		res.Warnings = append(res.Warnings, "no batch fit over the points: "+err.Error())
	} else {
		res.BatchFit = fit
		res.Warnings = append(res.Warnings, warns...)
		res.Warnings = append(res.Warnings, fit.Check()...)
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, q := range pts {
			lo, hi = math.Min(lo, q.N), math.Max(hi, q.N)
		}
		if hi-lo < 0.5 {
			res.Warnings = append(res.Warnings, fmt.Sprintf("N barely varies over the sweep (%.2f to %.2f requests per cycle): T_per_req cannot be told apart from T_fixed", lo, hi))
		}
		predictExternal(res, fit)
		res.Ranges = append(res.Ranges, fitRanges(pts, fit)...)
	}
	closedLoop(res)
	var tp []Point
	for _, p := range res.Points {
		tp = append(tp, Point{Clients: p.Clients, ThroughputPerS: p.ThroughputPerS})
	}
	idx := make([]int, len(tp))
	for i := range idx {
		idx[i] = i
	}
	res.Saturation = saturation(tp, idx)
	latencyShape(res)
	for i := range res.Points {
		res.Points[i].summary = nil
	}
}

// checkExternalPoints adds each point's Little's-law row and its warnings to res and returns the
// (requests per cycle, cycle) points of those with a server event loop, for the batch fit.
func checkExternalPoints(res *ExternalResult) []loops.Point {
	var pts []loops.Point
	for i := range res.Points {
		p := &res.Points[i]
		label := fmt.Sprintf("c%d", p.Clients)
		// L and W from the trace over the load window, λ from the client: with L and W over one
		// window L/W is the trace's throughput there, so the check is whether the trace's round
		// trips over the window the client times itself over are the client's throughput.
		row := analyzers.LittleFromTable([]analyzers.LittlePoint{{Label: label, InFlight: p.InflightMean,
			ThroughputPerS: p.ThroughputPerS, RTTMeasuredUS: p.TraceRTTMeanUS, RTTMedianUS: p.traceP50}})[0]
		res.LittlesLaw = append(res.LittlesLaw, roundLittle(row))
		switch {
		case p.TraceRoundTrips == 0:
			res.Warnings = append(res.Warnings, label+": the trace has none of the client's round trips (record the client too: it is, unless it runs elsewhere)")
		case math.Abs(row.Error) > ExternalLittleTolerance:
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s: Little's law off by %.1f%%: the trace's L over the client's throughput is not the trace's mean RTT (the trace's %d round trips over its %.3f s load window are not the client's count over the window it timed)",
				label, 100*row.Error, p.LoadWindow.RoundTrips, p.LoadWindow.Seconds))
		}
		if st := p.Client.LatencyStepUS; st > 0 && p.RTTUS.Mean > 0 && st/2/p.RTTUS.Mean > ExternalLittleTolerance/2 {
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s: the client prints its mean latency in steps of %.0f µs, %.1f%% of it", label, st, 100*st/p.RTTUS.Mean))
		}
		if cl := p.ClientLoop; cl != nil && cl.Utilization > ClientBusy && cl.Utilization > p.Utilization {
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s: the client's own event loop (thread %d) was busy %.0f%% of its time, the server's loops %.0f%%: the client, not the server, sets this throughput",
				label, cl.TID, 100*cl.Utilization, 100*p.Utilization))
		}
		if cycle := float64(p.Clients) / p.ThroughputPerS * 1e6; p.ThroughputPerS > 0 && p.ServerRunDelayUS > RunDelayShare*cycle {
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s: the server's threads waited %.1f µs per request for a processor (run queue), %.0f%% of each request's %.1f µs: %s",
				label, p.ServerRunDelayUS, 100*p.ServerRunDelayUS/cycle, cycle, runQueueCause(p.CPU)))
		}
		if w := p.SteadyWindow; p.Clients > 1 && p.LoadWindow.Seconds > 0 && (w == nil || w.Seconds < SteadyShare*p.LoadWindow.Seconds) {
			steady := 0.0
			if w != nil {
				steady = w.Seconds
			}
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s: all %d connections were in flight together for %.0f%% of the %.3f s load window (%.2f in flight on average): the client's connections started or finished apart (a client that gives each connection a fixed share of the requests ends them one by one), so this point is not %d clients throughout, as the closed-loop model takes it",
				label, p.Clients, 100*steady/p.LoadWindow.Seconds, p.LoadWindow.Seconds, p.InflightMean, p.Clients))
		}
		if p.LoopThreads == 0 {
			res.Warnings = append(res.Warnings, label+": no event loop found in the server (its wait calls were not recorded, or it serves requests without them)")
			continue
		}
		pts = append(pts, loops.Point{N: p.serverN(), TUS: p.CycleUS, Weight: 1})
	}
	return pts
}

// predictExternal adds the batch model fit's throughput prediction for each point with a server
// event loop to res, with a warning where it misses the client's measurement by more than
// ExternalPredictionTolerance.
func predictExternal(res *ExternalResult, fit *loops.Fit) {
	b := models.Batch{TFixedUS: fit.TFixedUS, TPerReqUS: fit.TPerReqUS}
	for i := range res.Points {
		p := &res.Points[i]
		if p.LoopThreads == 0 {
			continue
		}
		pred := b.Throughput(p.serverN())
		res.Predictions = append(res.Predictions, Prediction{Clients: p.Clients, InFlight: round3(p.serverN()),
			CyclePredictedUS: round3(b.Cycle(p.serverN())), ThroughputPredictedPerS: math.Round(pred),
			ThroughputMeasuredPerS: p.ThroughputPerS})
		if p.ThroughputPerS > 0 && math.Abs(pred/p.ThroughputPerS-1) > ExternalPredictionTolerance {
			res.Warnings = append(res.Warnings, fmt.Sprintf("c%d: the batch model predicts %.0f/s, the client measured %.0f/s (%+.0f%%)",
				p.Clients, pred, p.ThroughputPerS, 100*(pred/p.ThroughputPerS-1)))
		}
	}
}

// fitRanges groups pts by requests per cycle in powers of two and gives each group's mean N, mean
// cycle and the per-request time that the fit's fixed time leaves.
func fitRanges(pts []loops.Point, fit *loops.Fit) []loops.NRange {
	var ranges []loops.NRange
	for lo := 1; lo <= 4096; lo *= 2 {
		var r loops.NRange
		var sn, st float64
		for _, q := range pts {
			if q.N >= float64(lo) && q.N < float64(2*lo) {
				r.Cycles++
				sn += q.N
				st += q.TUS
			}
		}
		if r.Cycles == 0 {
			continue
		}
		r.NFrom, r.NTo = lo, 2*lo-1
		r.MeanN, r.MeanUS = round3(sn/float64(r.Cycles)), round3(st/float64(r.Cycles))
		r.TPerReqUS = round3((r.MeanUS - fit.TFixedUS) / r.MeanN)
		ranges = append(ranges, r)
	}
	return ranges
}

// latencyShape sets res's latency histogram and modes from the last point's samples, then drops
// the samples.
func latencyShape(res *ExternalResult) {
	if k := len(res.Points); k > 0 {
		last := &res.Points[k-1]
		res.HistogramClients = last.Clients
		h, modes := rttShape(last.samples)
		res.Histogram, res.Modes = h, append(res.Modes, modes...)
		last.samples = nil
	}
}

// closedLoopInputs is what the closed-loop model needs of each of a sweep's points.
func closedLoopInputs(points []ExternalPoint) []closedLoopInput {
	in := make([]closedLoopInput, 0, len(points))
	for _, p := range points {
		q := closedLoopInput{Clients: p.Clients, ThroughputPerS: p.ThroughputPerS, LoopThreads: p.LoopThreads,
			ResidenceUS: p.ServerResidenceUS, CPUUS: p.ServerCPUUS, RunDelayUS: p.ServerRunDelayUS, N: p.RequestsPerCycle, Client: p.ClientLoop, CPU: p.CPU}
		q.setServerLoops(p.Loops)
		in = append(in, q)
	}
	return in
}

// closedLoop fits the closed-loop model over the points (ClosedLoop) into res.
func closedLoop(res *ExternalResult) {
	cl, warns, err := fitClosedLoop(closedLoopInputs(res.Points), runtime.NumCPU(), loops.DefaultConfidence)
	if err != nil {
		res.Warnings = append(res.Warnings, "no closed-loop prediction: "+err.Error())
		return
	}
	res.ClosedLoop = cl
	res.Warnings = append(res.Warnings, warns...)
}

// runQueueCause says whose work kept a point's threads waiting for a processor: the machine's
// other work, when it took more than OwnShare of the processors over the point's window, else
// the point's own threads (the server's, the client's and the recorder's, runnable at once or
// placed on one processor while another idled).
func runQueueCause(c *WindowCPU) string {
	if c == nil || c.Processors <= 0 {
		return "the machine's other work or the point's own threads, which no model of the loops tells apart, set this point"
	}
	others := float64(c.Processors) - c.AvailableProcessors
	if others > OwnShare {
		return fmt.Sprintf("the machine's other work (%.2f of the %d processors), which no model of the loops sees, sets this point", others, c.Processors)
	}
	return fmt.Sprintf("the machine's other work took only %.2f of the %d processors, so the point's own threads (server, client, recorder) waited for each other, runnable together or placed on one processor while another idled; the loops' model holds that wait only as part of the demands it measured", math.Max(others, 0), c.Processors)
}
