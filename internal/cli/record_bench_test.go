//go:build linux

package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/perflab/perflab/collectors"
	"github.com/perflab/perflab/probes"
	"github.com/perflab/perflab/trace"
	"github.com/perflab/perflab/venusd"
)

// recordedRun is one run of a client program, recorded or not.
type recordedRun struct {
	stdout   []byte
	cpu      time.Duration // the client's user + system time
	events   uint64
	lost     uint64
	nsPerEv  int64
	evNsRun  int64 // the evidence programs' kernel time per run (0 without evidence)
	duration time.Duration
}

// pinnedCommand is the command that runs name with args on the CPUs of the list cpus (as
// taskset -c takes it: "0", "0,1"), or anywhere when cpus is "". taskset sets its own affinity
// and then execs name, so the command keeps taskset's pid and every thread it starts inherits
// the affinity.
func pinnedCommand(cpus, name string, args ...string) *exec.Cmd {
	if cpus == "" {
		return exec.Command(name, args...)
	}
	return exec.Command("taskset", append([]string{"-c", cpus, name}, args...)...)
}

// runMaybeRecorded runs the command args (the test binary as perflab, or as a target) once,
// on the CPUs cpus ("" for anywhere), with the probes recording it into a trace in dir when
// record is set, with the kernel evidence parts ev.
func runMaybeRecorded(b *testing.B, dir, cpus string, record bool, ev probes.Evidence, env []string, args ...string) recordedRun {
	b.Helper()
	cmd := pinnedCommand(cpus, os.Args[0], args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if !record {
		start := time.Now()
		if err := cmd.Run(); err != nil {
			b.Fatalf("%v: %v", args, err)
		}
		return recordedRun{stdout: out.Bytes(), duration: time.Since(start), cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}
	}
	p, err := probes.Open(probes.Config{PayloadBytes: -1, Evidence: ev})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	runtime.GC() // as record does: the kernel BTF parsed while loading is garbage now
	w, err := trace.Create(filepath.Join(dir, "bench.plt"), trace.Meta{Source: "ebpf"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	stop, err := p.FollowChildren(uint32(os.Getpid()))
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	err = cmd.Start()
	stop()
	if err != nil {
		b.Fatal(err)
	}
	res, err := collectors.Record(context.Background(), p, w, collectors.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		b.Fatalf("%v: %v", args, err)
	}
	d := time.Since(start)
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return recordedRun{stdout: out.Bytes(), events: res.Events, lost: res.LostTotal(),
		nsPerEv: res.Stats["probe_ns_per_event"], evNsRun: res.Stats["evidence_ns_per_run"], duration: d, cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}
}

// runSettle is the pause after every run of BenchmarkRecordOverhead.
const runSettle = 300 * time.Millisecond

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// pingArgs are the arguments of the ping workload of BenchmarkRecordOverhead, and pingRate its
// figure.
var pingArgs = []string{"--workload", "ping", "--requests", "60000", "--mode", "baseline"}

func pingRate(r *venusd.Result) float64 { return r.Ping.ThroughputPerS }

// BenchmarkRecordOverhead alternates venusd client runs without record, with record attached
// without kernel evidence, and with record as it runs by default (every evidence part on), in
// an order that turns every round, 9 rounds, against a venusd server in a process of its own
// (not recorded), and reports for each recorded way the median throughput ratio (recorded / plain of the same round), the median ratio of the
// client's CPU time (recorded / plain: less sensitive to the machine's other load), the events
// lost at the default ring size, and the kernel time per event as record prints it (the
// socket probe's; the evidence programs' time per run apart, evidence_ns/run_ev). Metrics of
// the default way end in _ev. Every run is followed by a pause of runSettle, so that what a
// recording leaves to the kernel after it is closed (freeing its programs, maps and 16 MiB ring
// on a work queue) is done before the next run starts, whichever way that run is. The llm
// loop generates 288 tokens a run (1.3 s at 227 tokens/s, a plain run at load 12), so that a run is not
// decided by a few scheduling delays. The ping runs three times over: with the server and
// the client wherever the scheduler puts them, both on CPU 0 (_cpu0), and the server on CPU 0
// and the client on CPU 1 (_cpu0_cpu1). On a 2-vCPU VM the scheduler's placement alone moves the
// plain ping's throughput fivefold (client and server on one vCPU hand over without a
// cross-CPU wakeup; on two, every request and reply wakes a halted vCPU), so the unpinned
// ratio measures the mix of placements each way drew; the pinned ones measure the recording
// in one placement each. The recorder itself is never pinned. Run it with: go test -run '^$'
// -bench RecordOverhead -benchtime 1x ./internal/cli (-benchtime 3x: 27 rounds, the medians
// over all of them, reported as rounds).
func BenchmarkRecordOverhead(b *testing.B) {
	if err := probes.CheckPrivileges(); err != nil {
		b.Skip(err)
	}
	workloads := []struct {
		name  string
		args  []string
		rate  func(r *venusd.Result) float64
		label string
		// The CPUs of the server and of the client (taskset -c lists; "" for anywhere).
		serverCPUs, clientCPUs string
	}{
		{"ping_tcp_baseline", pingArgs, pingRate, "requests/s", "", ""},
		{"ping_tcp_baseline_cpu0", pingArgs, pingRate, "requests/s", "0", "0"},
		{"ping_tcp_baseline_cpu0_cpu1", pingArgs, pingRate, "requests/s", "0", "1"},
		{"llm_tcp_baseline", []string{"--workload", "llm", "--tokens", "288", "--mode", "baseline"},
			func(r *venusd.Result) float64 { return r.TokensPerS }, "tokens/s", "", ""},
	}
	const rounds = 9
	for _, wl := range workloads {
		b.Run(wl.name, func(b *testing.B) {
			if wl.clientCPUs == "1" && runtime.NumCPU() < 2 {
				b.Skip("one CPU: no second CPU to put the client on")
			}
			addr := startServerProcess(b, wl.serverCPUs)
			args := append([]string{"venus", "run", "--connect", addr, "--json", "--no-verify"}, wl.args...)
			dir := b.TempDir()
			// The three ways of running it, alternated in every round: plain, recorded without
			// kernel evidence, recorded as perflab record does by default (every evidence part
			// on). The rounds accumulate over b.N: -benchtime 3x gives 3 * rounds of them.
			modes := []struct {
				record bool
				ev     probes.Evidence
			}{{false, 0}, {true, 0}, {true, probes.EvidenceAll}}
			var rates, ratios, cpuRatios [3][]float64
			var lost, events [3]uint64
			var nsPerEv, evNsRun [3][]float64
			var load []float64
			for i := 0; i < b.N; i++ {
				for r := 0; r < rounds; r++ {
					load = append(load, loadAverage())
					var rate [3]float64
					var cpu [3]time.Duration
					// The order turns every round (plain first, then second, then third), so
					// that what a run leaves behind (the previous recording's teardown in the
					// kernel) does not fall on one way only.
					for j := range modes {
						k := (j + r) % len(modes)
						m := modes[k]
						run := runMaybeRecorded(b, dir, wl.clientCPUs, m.record, m.ev, []string{recordMainEnv + "=1"}, args...)
						time.Sleep(runSettle)
						var res venusd.Result
						if err := json.Unmarshal(run.stdout, &res); err != nil {
							b.Fatalf("client output %q: %v", run.stdout, err)
						}
						rate[k] = wl.rate(&res)
						cpu[k] = run.cpu
						rates[k] = append(rates[k], rate[k])
						lost[k] += run.lost
						events[k] += run.events
						nsPerEv[k] = append(nsPerEv[k], float64(run.nsPerEv))
						evNsRun[k] = append(evNsRun[k], float64(run.evNsRun))
					}
					for k := 1; k < len(modes); k++ {
						ratios[k] = append(ratios[k], rate[k]/rate[0])
						cpuRatios[k] = append(cpuRatios[k], float64(cpu[k])/float64(cpu[0]))
					}
				}
			}
			b.ReportMetric(median(rates[0]), "plain_"+wl.label)
			// Without evidence (--evidence none), then as record runs by default (_ev).
			for k, suffix := range []string{"", "", "_ev"} {
				if k == 0 {
					continue
				}
				b.ReportMetric(median(ratios[k]), "ratio"+suffix)
				// The client's CPU time (user + system) recorded over plain: less sensitive
				// to the machine's other load than throughput.
				b.ReportMetric(median(cpuRatios[k]), "client_cpu_ratio"+suffix)
				b.ReportMetric(median(rates[k]), "recorded_"+wl.label+suffix)
				b.ReportMetric(float64(lost[k]), "lost"+suffix)
				b.ReportMetric(float64(events[k])/float64(len(load)), "events/run"+suffix)
				b.ReportMetric(median(nsPerEv[k]), "kernel_ns/event"+suffix)
			}
			b.ReportMetric(median(evNsRun[2]), "evidence_ns/run_ev")
			b.ReportMetric(median(load), "loadavg")
			b.ReportMetric(float64(len(load)), "rounds")
		})
	}
}

// startServerProcess starts a venusd server in a process of its own (the test binary as perflab:
// perflab venus serve), as a recorded client's server would be, so that the recorder's own work
// (draining the ring, writing the trace) does not share a process with it, and returns its
// address; the server is stopped when the benchmark ends.
func startServerProcess(b *testing.B, cpus string) string {
	b.Helper()
	cmd := pinnedCommand(cpus, os.Args[0], "venus", "serve", "--listen", "tcp://127.0.0.1:0")
	cmd.Env = append(os.Environ(), recordMainEnv+"=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		// "venusd: listening on tcp://127.0.0.1:PORT (stop with ...)"
		if _, rest, ok := strings.Cut(sc.Text(), "listening on "); ok {
			addr, _, _ := strings.Cut(rest, " ")
			go io.Copy(io.Discard, stderr)
			return addr
		}
	}
	b.Fatalf("venus serve gave no address: %v", sc.Err())
	return ""
}

// BenchmarkRecordDrain drives events as fast as 1 or 2 processes of blocking socket-pair
// ping-pong can (one event per system call) for 2 s under record at the default ring size,
// and reports the rate drained and the events lost.
// Run it with: go test -run '^$' -bench RecordDrain -benchtime 1x ./internal/cli
func BenchmarkRecordDrain(b *testing.B) {
	p0 := probes.CheckPrivileges()
	if p0 != nil {
		b.Skip(p0)
	}
	for _, procs := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("procs=%d", procs), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				p, err := probes.Open(probes.Config{PayloadBytes: -1})
				if err != nil {
					b.Fatal(err)
				}
				w, err := trace.Create(filepath.Join(b.TempDir(), "drain.plt"), trace.Meta{Source: "ebpf"}, nil)
				if err != nil {
					b.Fatal(err)
				}
				stop, _ := p.FollowChildren(uint32(os.Getpid()))
				var cmds []*exec.Cmd
				for j := 0; j < procs; j++ {
					cmd := exec.Command(os.Args[0])
					cmd.Env = append(os.Environ(), recordTargetEnv+"=forever", recordCountsEnv+"="+os.DevNull)
					if err := cmd.Start(); err != nil {
						b.Fatal(err)
					}
					cmds = append(cmds, cmd)
				}
				stop()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				start := time.Now()
				res, err := collectors.Record(ctx, p, w, collectors.Options{})
				cancel()
				elapsed := time.Since(start)
				for _, c := range cmds {
					c.Process.Kill()
					c.Wait()
				}
				if err != nil {
					b.Fatal(err)
				}
				w.Close()
				p.Close()
				b.ReportMetric(float64(res.Events)/elapsed.Seconds(), "events/s")
				b.ReportMetric(float64(res.LostTotal()), "lost")
				b.ReportMetric(float64(res.Stats["probe_ns_per_event"]), "kernel_ns/event")
			}
		})
	}
}

// whileRecordingIdle runs fn while the probes record an idle process (a sleep that makes no
// system call), from 1.2 s after the recording starts: everything fn runs is another process
// to the probes.
func whileRecordingIdle(b *testing.B, fn func()) {
	b.Helper()
	idle := exec.Command("sleep", "1000")
	if err := idle.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { idle.Process.Kill(); idle.Wait() }()
	p, err := probes.Open(probes.Config{PayloadBytes: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	if err := p.AddPID(uint32(idle.Process.Pid)); err != nil {
		b.Fatal(err)
	}
	w, err := trace.Create(filepath.Join(b.TempDir(), "idle.plt"), trace.Meta{Source: "ebpf"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := collectors.Record(ctx, p, w, collectors.Options{})
		done <- err
	}()
	// The steady state of a recording: past its first statistics window, which stays open up
	// to 1 s while a target that is starting has nothing to show (the statistics then cost
	// every program run of every process).
	time.Sleep(1200 * time.Millisecond)
	fn()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRecordNeighbours measures what processes that are not recorded pay while perflab
// records another (idle) process, alternating runs without and with the recording (A B A B,
// 9 rounds, medians):
//
//   - dd: dd if=/dev/zero of=/dev/null bs=1 count=1000000, two million system calls and no
//     socket: its wall time and CPU time, recorded over plain (goal: at most 1.03);
//   - ping: a venusd client's small-frame ping-pong over TCP against an in-process server,
//     neither recorded: throughput, recorded over plain (goal: at least 0.90, i.e. at most
//     10% slower).
//
// Run it with: go test -run '^$' -bench RecordNeighbours -benchtime 1x ./internal/cli
func BenchmarkRecordNeighbours(b *testing.B) {
	if err := probes.CheckPrivileges(); err != nil {
		b.Skip(err)
	}
	const rounds = 9
	b.Run("dd", func(b *testing.B) {
		if _, err := exec.LookPath("dd"); err != nil {
			b.Skip(err)
		}
		dd := func() (wall, cpu time.Duration) {
			cmd := exec.Command("dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=1000000")
			start := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("dd: %v: %s", err, out)
			}
			return time.Since(start), cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		}
		// Pairs accumulate over b.N: -benchtime 3x gives 3 * rounds pairs.
		var wall, cpu, plainWall, load []float64
		for i := 0; i < b.N; i++ {
			for r := 0; r < rounds; r++ {
				load = append(load, loadAverage())
				w0, c0 := dd()
				var w1, c1 time.Duration
				whileRecordingIdle(b, func() { w1, c1 = dd() })
				wall = append(wall, float64(w1)/float64(w0))
				cpu = append(cpu, float64(c1)/float64(c0))
				plainWall = append(plainWall, w0.Seconds())
			}
		}
		b.ReportMetric(median(wall), "wall_ratio")
		b.ReportMetric(median(cpu), "cpu_ratio")
		b.ReportMetric(median(plainWall), "plain_s")
		b.ReportMetric(median(load), "loadavg")
		b.ReportMetric(float64(len(cpu)), "pairs")
	})
	b.Run("tcp_pingpong_not_recorded", func(b *testing.B) {
		// Pairs accumulate over b.N: -benchtime 3x gives 3 * rounds pairs.
		var rate, cpu, plainRate, plainCPU, load []float64
		for i := 0; i < b.N; i++ {
			for r := 0; r < rounds; r++ {
				load = append(load, loadAverage())
				r0, c0 := tcpPingPong(b, 20000)
				var r1 float64
				var c1 time.Duration
				whileRecordingIdle(b, func() { r1, c1 = tcpPingPong(b, 20000) })
				rate = append(rate, r1/r0)
				cpu = append(cpu, float64(c1)/float64(c0))
				plainRate = append(plainRate, r0)
				plainCPU = append(plainCPU, float64(c0))
			}
		}
		b.ReportMetric(median(rate), "ratio")
		b.ReportMetric(median(cpu), "cpu_ratio")
		b.ReportMetric(median(plainRate), "plain_rt/s")
		b.ReportMetric(median(plainCPU), "plain_cpu_ns/rt")
		b.ReportMetric(median(load), "loadavg")
		b.ReportMetric(float64(len(rate)), "pairs")
	})
	b.Run("ping_tcp_not_recorded", func(b *testing.B) {
		srv, err := venusd.NewServer(venusd.ServerConfig{Listen: "tcp://127.0.0.1:0"})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ctx) }()
		defer func() { cancel(); <-done }()
		args := []string{"venus", "run", "--connect", srv.Addr(), "--json", "--no-verify", "--workload", "ping", "--requests", "30000", "--mode", "baseline"}
		ping := func() float64 {
			cmd := exec.Command(os.Args[0], args...)
			cmd.Env = append(os.Environ(), recordMainEnv+"=1")
			out, err := cmd.Output()
			if err != nil {
				b.Fatalf("%v: %v", args, err)
			}
			var res venusd.Result
			if err := json.Unmarshal(out, &res); err != nil {
				b.Fatalf("client output %q: %v", out, err)
			}
			return res.Ping.ThroughputPerS
		}
		var ratios, plain, load []float64
		for i := 0; i < b.N; i++ {
			for r := 0; r < rounds; r++ {
				load = append(load, loadAverage())
				r0 := ping()
				var r1 float64
				whileRecordingIdle(b, func() { r1 = ping() })
				ratios = append(ratios, r1/r0)
				plain = append(plain, r0)
			}
		}
		b.ReportMetric(median(ratios), "ratio")
		b.ReportMetric(median(plain), "plain_requests/s")
		b.ReportMetric(median(load), "loadavg")
		b.ReportMetric(float64(len(ratios)), "pairs")
	})
}
