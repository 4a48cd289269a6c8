package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// sweepJSON is the part of `perflab bench --server-pid ... --json` these tests read.
type sweepJSON struct {
	Kind   string `json:"kind"`
	Points []struct {
		Clients          int              `json:"clients"`
		ThroughputPerS   float64          `json:"throughput_per_s"`
		Requests         int64            `json:"requests"`
		Commands         map[string]int64 `json:"commands"`
		TraceRoundTrips  int64            `json:"trace_round_trips"`
		RequestsPerCycle float64          `json:"requests_per_cycle"`
		LoopThreads      int              `json:"loop_threads"`
		Loops            []struct {
			TID      uint32 `json:"tid"`
			Requests uint64 `json:"requests"`
			Cycles   uint64 `json:"cycles"`
		} `json:"loops"`
	} `json:"points"`
	LittlesLaw []struct {
		Label string  `json:"label"`
		Error float64 `json:"error"`
	} `json:"littles_law"`
	BatchFit *struct {
		TFixedUS  float64 `json:"t_fixed_us"`
		TPerReqUS float64 `json:"t_per_req_us"`
		R2        float64 `json:"r2"`
	} `json:"batch_fit"`
	Predictions []struct {
		Clients   int     `json:"clients"`
		Predicted float64 `json:"throughput_predicted_per_s"`
		Measured  float64 `json:"throughput_measured_per_s"`
	} `json:"predictions"`
	ClosedLoop *struct {
		CalibratedAt     int     `json:"calibrated_clients"`
		ZUS              float64 `json:"z_us"`
		ZShare           float64 `json:"z_share"`
		ProcessorNetwork string  `json:"processor_network"`
		Points           []struct {
			Clients    int     `json:"clients"`
			Predicted  float64 `json:"throughput_predicted_per_s"`
			Measured   float64 `json:"throughput_measured_per_s"`
			Error      float64 `json:"error"`
			Loops      float64 `json:"loops_per_s"`
			Processors float64 `json:"processors_per_s"`
			CPUUS      float64 `json:"cpu_us_per_req"`
			Available  float64 `json:"available_processors"`
			LimitedBy  string  `json:"limited_by"`
			Binds      string  `json:"binds"`
			Why        string  `json:"why"`
		} `json:"points"`
		LoopDemands string  `json:"loop_demands"`
		WakeUS      float64 `json:"wake_us"`
	} `json:"closed_loop"`
	Warnings []string `json:"warnings"`
}

// sweepClients are the client counts of the server sweeps.
var sweepClients = []int{1, 2, 4, 8, 16}

// runSweep runs perflab bench against the server pid with the client command and checks what
// holds whatever the machine's load (exact counts, a loop per point, requests per cycle rising
// with the clients, a processor station at every point, a warning in the report at every point
// the model misses by more than 20%) with countOK and fails the test on those; it returns the
// sweep and what missed among the checks that need a machine to itself (Little's law within 5%
// at every point, L and W from the trace over the load window and λ the client's own
// throughput; the closed-loop model's predictions within 20% of the client's throughput at
// every point, the one it is calibrated at too).
func runSweep(t *testing.T, pid int, client string, countOK func(t *testing.T, s *sweepJSON)) (s *sweepJSON, missed []string) {
	t.Helper()
	dir := t.TempDir()
	sweeps++
	var cs []string
	for _, c := range sweepClients {
		cs = append(cs, strconv.Itoa(c))
	}
	r := perflabCmd(t, dir, "bench", "--server-pid", strconv.Itoa(pid), "--client", client,
		"--clients", strings.Join(cs, ","), "--json", "-o", filepath.Join(dir, "sweep"))
	if r.code != 0 || strings.Contains(r.stderr, "panic") {
		t.Fatalf("bench exited %d: %s", r.code, r.stderr)
	}
	s = &sweepJSON{}
	if err := json.Unmarshal([]byte(r.stdout), s); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, r.stdout)
	}
	// Each sweep's JSON is kept for reading afterwards, as the browser test keeps its
	// screenshots.
	keep := filepath.Join(repoRoot, "build", "e2e")
	if err := os.MkdirAll(keep, 0o755); err == nil {
		name := fmt.Sprintf("%s-%s-%d.json", strings.ToLower(strings.TrimPrefix(t.Name(), "Test")), sweepsStarted, sweeps)
		if err := os.WriteFile(filepath.Join(keep, name), []byte(r.stdout), 0o644); err == nil {
			t.Logf("sweep JSON in build/e2e/%s", name)
		}
	}
	if s.Kind != "external" || len(s.Points) != len(sweepClients) {
		t.Fatalf("sweep kind %q with %d points, want external with %d", s.Kind, len(s.Points), len(sweepClients))
	}
	for _, p := range s.Points {
		t.Logf("c%-2d %8.0f/s  N %.2f per loop  loop threads %d  requests %d", p.Clients, p.ThroughputPerS, p.RequestsPerCycle, p.LoopThreads, p.Requests)
	}
	if f := s.BatchFit; f != nil {
		t.Logf("fit T_fixed %.2f µs, T_per_req %.3f µs, R² %.3f", f.TFixedUS, f.TPerReqUS, f.R2)
	}
	countOK(t, s)
	first, last := s.Points[0], s.Points[len(s.Points)-1]
	if !(last.RequestsPerCycle > first.RequestsPerCycle) {
		t.Errorf("requests per cycle %.2f at %d clients, %.2f at %d: not rising", first.RequestsPerCycle, first.Clients, last.RequestsPerCycle, last.Clients)
	}
	if s.BatchFit == nil || len(s.Predictions) != len(s.Points) || len(s.LittlesLaw) != len(s.Points) {
		t.Fatalf("fit %+v with %d predictions and %d Little's-law rows, want %d", s.BatchFit, len(s.Predictions), len(s.LittlesLaw), len(s.Points))
	}
	worstLittle := 0.0
	for _, l := range s.LittlesLaw {
		worstLittle = math.Max(worstLittle, math.Abs(l.Error))
		if math.Abs(l.Error) > 0.05 {
			missed = append(missed, fmt.Sprintf("%s: Little's law off by %.1f%%", l.Label, 100*l.Error))
		}
	}
	cl := s.ClosedLoop
	if cl == nil {
		t.Fatalf("no closed-loop model; warnings %q", s.Warnings)
	}
	if len(cl.Points) != len(s.Points) {
		// a point the model gives no throughput (a fit with no time at all) is a miss, not a
		// broken sweep
		missed = append(missed, fmt.Sprintf("the closed-loop model predicts %d of the %d points", len(cl.Points), len(s.Points)))
	}
	t.Logf("closed loop: calibrated at c%d, loops of %q demands, wake-up %.1f µs, Z %.1f µs, %.0f%% of a request's time outside the server; processor network %q", cl.CalibratedAt, cl.LoopDemands, cl.WakeUS, cl.ZUS, 100*cl.ZShare, cl.ProcessorNetwork)
	worstPred := 0.0
	defer func() {
		t.Logf("sweep at load average %.1f: Little's law largest error %.1f%%, closed-loop predictions largest error %.1f%%", loadAverage(), 100*worstLittle, 100*worstPred)
	}()
	// The processor station: every point has its processors' time over the load window.
	for _, p := range cl.Points {
		if p.Processors <= 0 || p.CPUUS <= 0 || p.Available <= 0 {
			t.Errorf("c%d: no processor station (%.0f/s from D_cpu %.1f µs on %.2f processors)", p.Clients, p.Processors, p.CPUUS, p.Available)
		}
		// The loops' network of each point's own measured demands, and what binds each point.
		if cl.LoopDemands != "point" || p.Binds == "" || p.Why == "" {
			t.Errorf("c%d: loops of %q demands, binds %q (%q); want each point's own demands and the station that binds", p.Clients, cl.LoopDemands, p.Binds, p.Why)
		}
	}
	warned := strings.Join(s.Warnings, "\n")
	for _, p := range cl.Points {
		worstPred = math.Max(worstPred, math.Abs(p.Error))
		t.Logf("c%-2d closed loop predicts %8.0f/s, measured %8.0f/s (%+.1f%%): loops %8.0f/s, processors %8.0f/s (D_cpu %.1f µs on %.2f processors), limited by the %s; %s: %s",
			p.Clients, p.Predicted, p.Measured, 100*p.Error, p.Loops, p.Processors, p.CPUUS, p.Available, p.LimitedBy, p.Binds, p.Why)
		if math.Abs(p.Error) > 0.20 {
			missed = append(missed, fmt.Sprintf("c%d: the closed-loop model predicts %.0f/s, the client measured %.0f/s (%+.0f%%)", p.Clients, p.Predicted, p.Measured, 100*p.Error))
			// A miss is never hidden: the report warns at that point, whatever the load.
			if !strings.Contains(warned, fmt.Sprintf("c%d: the closed-loop model predicts", p.Clients)) {
				t.Errorf("c%d: the prediction is off by %+.0f%% and the sweep does not warn", p.Clients, 100*p.Error)
			}
		}
	}
	return s, missed
}

// sweeps counts the sweeps of this test binary, to name their JSON files.
var sweeps int

// sweepsStarted names this test process's sweeps in build/e2e (UTC, to the second), so that a
// later run, or `go test ./...` running these tests again, does not overwrite them.
var sweepsStarted = time.Now().UTC().Format("20060102T150405")

// sweepRounds is how many times a sweep is run before its load-dependent checks fail: one
// point can be slowed by other work on the machine (the counts must hold in every run).
const sweepRounds = 3

// sweepUntilGood runs the sweep and checks its counts every time. Little's law within 5% and
// the closed-loop predictions within 20% at every point compare timings taken apart (the
// trace's and the client's clocks, a model over the points and each point): they are timed
// assertions, judged only on request (PERFLAB_PERF_ASSERT=1, as for model and gate), then over
// up to sweepRounds sweeps on a machine whose load average stayed under twice its processors.
// Otherwise a miss is logged, not failed: the client and the server share the machine's
// processors with whatever else runs, which no model of the two loops can know (docs/lab.md
// has the figures).
func sweepUntilGood(t *testing.T, pid int, client string, countOK func(t *testing.T, s *sweepJSON)) {
	t.Helper()
	judge := os.Getenv("PERFLAB_PERF_ASSERT") == "1"
	var missed []string
	maxLoad := loadAverage()
	busy := func() bool { return maxLoad > 2*float64(runtime.NumCPU()) }
	for round := 1; round <= sweepRounds; round++ {
		_, missed = runSweep(t, pid, client, countOK)
		maxLoad = math.Max(maxLoad, loadAverage())
		if len(missed) == 0 || busy() || !judge {
			break
		}
		t.Logf("sweep %d: %s", round, strings.Join(missed, "; "))
	}
	switch {
	case len(missed) == 0:
	case !judge:
		t.Logf("Little's law and the predictions not judged (timed; PERFLAB_PERF_ASSERT=1 judges them), at load average %.1f: %s", maxLoad, strings.Join(missed, "; "))
	case busy():
		t.Logf("Little's law and the predictions not judged: load average reached %.1f on %d processors (%s)", maxLoad, runtime.NumCPU(), strings.Join(missed, "; "))
	default:
		t.Errorf("%d sweeps at load average %.1f or less missed: %s", sweepRounds, maxLoad, strings.Join(missed, "; "))
	}
}

// loadAverage returns the machine's 1-minute load average (0 when unknown).
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// TestRedisSweep sweeps redis-server from Debian with redis-benchmark at 1, 2, 4, 8 and 16
// clients: every GET counted exactly, each point's requests in cycles of redis's main thread,
// Little's law within 5% of redis-benchmark's own throughput, requests per cycle rising with
// the clients, and the closed-loop model's predictions within 20% of the throughput
// (sweepUntilGood says when these are judged).
func TestRedisSweep(t *testing.T) {
	redis := need(t, "redis-server", "redis-server")
	need(t, "redis-benchmark", "redis-tools")
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	pid := startDaemon(t, addr, redis, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	const n = 20000
	client := fmt.Sprintf("redis-benchmark -h 127.0.0.1 -p %d -c {clients} -n %d -t get --csv", port, n)
	sweepUntilGood(t, pid, client, func(t *testing.T, s *sweepJSON) {
		for _, p := range s.Points {
			if p.Commands["GET"] != n {
				t.Errorf("c%d: the server received %d GETs, redis-benchmark sent %d", p.Clients, p.Commands["GET"], n)
			}
			var all int64
			for _, c := range p.Commands {
				all += c
			}
			if p.LoopThreads != 1 || len(p.Loops) != 1 || p.Loops[0].TID != uint32(pid) || p.Requests != all {
				t.Errorf("c%d: %d loop threads %+v with %d requests; want redis's main thread (tid %d) with all %d", p.Clients, p.LoopThreads, p.Loops, p.Requests, pid, all)
			}
			if p.TraceRoundTrips < n {
				t.Errorf("c%d: %d client round trips in the trace, want at least %d", p.Clients, p.TraceRoundTrips, n)
			}
		}
	})
}

// mcLoopEnv makes the e2e test binary the memcached sweep's closed-loop client (runMcLoop):
// "ADDR,REQUESTS,CLIENTS".
const mcLoopEnv = "PERFLAB_E2E_MC_LOOP"

// TestMemcachedSweep sweeps memcached with 4 worker threads (one event loop each), driven by a
// closed-loop Go client (memtier_benchmark is not in Debian): every get counted exactly, the
// requests found in the worker threads' cycles, one loop thread per client up to 4, and the
// same load-dependent checks as for redis (the closed-loop model with the 4 workers as 4
// stations; the client, a thread per connection, has no loop of its own: its time is Z).
func TestMemcachedSweep(t *testing.T) {
	memcached := need(t, "memcached", "memcached")
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	pid := startDaemon(t, addr, memcached, "-u", "root", "-l", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "0", "-t", "4", "-m", "16")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const n = 20000
	client := fmt.Sprintf("env %s=%s,%d,{clients} %s", mcLoopEnv, addr, n, exe)
	sweepUntilGood(t, pid, client, func(t *testing.T, s *sweepJSON) {
		for _, p := range s.Points {
			if p.Commands["get"] != n {
				t.Errorf("c%d: the server received %d gets, the client sent %d", p.Clients, p.Commands["get"], n)
			}
			// The client's one set comes on a connection of its own, which may be a worker's
			// only request (no loop): the loops' requests are the gets, and maybe the set.
			if p.Requests != n && p.Requests != n+p.Commands["set"] {
				t.Errorf("c%d: %d requests in the loops' cycles, want the %d gets (and the set)", p.Clients, p.Requests, n)
			}
			if want := min(p.Clients, 4); p.LoopThreads != want {
				t.Errorf("c%d: %d loop threads served requests, want %d (memcached gives each connection to one of 4 workers in turn)", p.Clients, p.LoopThreads, want)
			}
		}
	})
}

// runMcLoop is a closed-loop memcached client: CLIENTS connections, each sending "get" for
// one key and reading the reply before the next, REQUESTS in all; it prints its throughput and
// mean latency as the JSON line perflab bench reads (--client-format json).
func runMcLoop(spec string) error {
	f := strings.Split(spec, ",")
	if len(f) != 3 {
		return fmt.Errorf("%s=%q: want ADDR,REQUESTS,CLIENTS", mcLoopEnv, spec)
	}
	total, err1 := strconv.Atoi(f[1])
	clients, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil || total < 1 || clients < 1 {
		return fmt.Errorf("%s=%q: want ADDR,REQUESTS,CLIENTS", mcLoopEnv, spec)
	}
	// The key exists, so that every get has the same reply.
	c, err := net.Dial("tcp", f[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(c, "set perflab 0 0 5\r\nhello\r\n")
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != "STORED\r\n" {
		return fmt.Errorf("set: %q %v", line, err)
	}
	c.Close()
	// Each client is a blocking socket on a thread of its own, timed right around its write
	// and read system calls, so that the latency it reports is the round trip's, not the Go
	// scheduler's (as a C client's would be). A P for every client thread: a thread back from
	// a blocking read would otherwise wait for a P, inside its measured latency.
	runtime.GOMAXPROCS(clients + 1)
	fds := make([]int, clients)
	for i := range fds {
		c, err := net.Dial("tcp", f[0])
		if err != nil {
			return err
		}
		fl, err := c.(*net.TCPConn).File() // a blocking duplicate of the socket
		c.Close()
		if err != nil {
			return err
		}
		defer fl.Close()
		fds[i] = int(fl.Fd())
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		sumNS int64
		last  time.Time // the last reply's end: the run's window closes there, not when the
		errs  []error   // threads have been waited for (a wake-up the trace does not see)
	)
	// The run's window opens once the clients are connected, before the first of them sends
	// (as redis-benchmark's does): the set and the dials before it are not the load.
	start := time.Now()
	// The requests are taken one at a time from what is left, by whichever connection is free
	// (as redis-benchmark's clients do): every connection stays in flight to the end. A fixed
	// share each would let a connection that ran faster finish first and leave the others to
	// run the rest with fewer in flight than the clients asked for.
	left := int64(total)
	for _, fd := range fds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			req := []byte("get perflab\r\n")
			buf := make([]byte, 4096)
			var local int64
			fail := func(err error) {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
			for atomic.AddInt64(&left, -1) >= 0 {
				t0 := time.Now()
				// Raw system calls: this thread and its P are the client's alone
				// (GOMAXPROCS above), so the Go scheduler need not know it blocks.
				if _, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&req[0])), uintptr(len(req))); e != 0 {
					fail(e)
					return
				}
				got := 0
				for !bytes.HasSuffix(buf[:got], []byte("END\r\n")) {
					n, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&buf[got])), uintptr(len(buf)-got))
					if e != 0 || n == 0 {
						fail(fmt.Errorf("read: %v (%d bytes)", e, n))
						return
					}
					got += int(n)
				}
				local += time.Since(t0).Nanoseconds()
			}
			end := time.Now()
			mu.Lock()
			sumNS += local
			if end.After(last) {
				last = end
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	wall := last.Sub(start)
	if len(errs) > 0 {
		return errs[0]
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"requests": total,
		"throughput_per_s": float64(total) / wall.Seconds(), "latency_mean_us": float64(sumNS) / float64(total) / 1e3})
}
