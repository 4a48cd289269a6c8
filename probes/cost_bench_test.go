//go:build linux && amd64

package probes

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/perflab/perflab/trace"
)

// BenchmarkEventCost records a target making socket calls as fast as it can, alternating runs
// without and with the recording (rounds of A B, medians), and reports:
//
//   - ns/event: the probes' kernel time per recorded event as record prints it
//     (probe_ns_per_event: the programs timing their own runs on the target's threads in the
//     sampled windows);
//   - added_ns/event: what the target paid per event, all told: its CPU time (user + system)
//     recorded less plain, over the events (the tracepoints' dispatch included, which no
//     program can time itself);
//   - <program>_ns/run: from the kernel's BPF run-time statistics, on for whole runs with the
//     self-timing off, net of what the statistics add to a run (their runs include other
//     processes' socket calls and context switches, which only test whether the thread is a
//     target).
//
// The workloads: burst, write/read pairs of 16 bytes on a unix socket pair in one thread (no
// waiting, no TCP: the socket hooks alone); echo_tcp, a Go echo client and server over TCP in
// one process (64-byte messages, non-blocking sockets, EAGAIN reads, goroutine switches: every
// hook).
//
// Run it with: go test -run '^$' -bench EventCost -benchtime 1x ./probes
func BenchmarkEventCost(b *testing.B) {
	if err := CheckPrivileges(); err != nil {
		b.Skip(err)
	}
	const rounds = 5
	for _, wl := range costWorkloads {
		b.Run(wl.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				var load []float64
				var runs []costRun
				for r := 0; r < rounds; r++ {
					load = append(load, loadAverage())
					plain := helperCPU(b, wl.mode, wl.arg)
					runs = append(runs, measureCost(b, wl.mode, wl.arg, plain))
				}
				b.ReportMetric(medianOf(load), "loadavg")
				reportCost(b, runs, "")
			}
		})
	}
}

// vsObject is another build of bpf/record.bpf.c (its record_x86_bpfel.o) for
// BenchmarkEventCostVs to compare with the embedded object.
var vsObject = flag.String("probes.vs", "", "`file` of another build of the record object, compared by BenchmarkEventCostVs")

// BenchmarkEventCostVs compares the embedded record object (A) with another build of it (B,
// given with -probes.vs FILE) in one run: every round measures the target plain, then
// recorded with A and with B (BenchmarkEventCost's figures each), the order of A and B
// turning every round; it reports the medians of both, B's metrics prefixed "vs_", and
// vs/a_ns/event, the median of the rounds' ratios of record's figure B/A.
//
// Run it with (the object before a change, from git):
//
//	git show main:probes/record_x86_bpfel.o > /tmp/before.o
//	go test -run '^$' -bench EventCostVs -benchtime 1x ./probes -args -probes.vs /tmp/before.o
func BenchmarkEventCostVs(b *testing.B) {
	if err := CheckPrivileges(); err != nil {
		b.Skip(err)
	}
	if *vsObject == "" {
		b.Skip("no -probes.vs object to compare with")
	}
	vs := func() (*ebpf.CollectionSpec, error) { return ebpf.LoadCollectionSpec(*vsObject) }
	const rounds = 7
	for _, wl := range costWorkloads {
		b.Run(wl.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				var load, ratio []float64
				var as, bs []costRun
				for r := 0; r < rounds; r++ {
					load = append(load, loadAverage())
					plain := helperCPU(b, wl.mode, wl.arg)
					var a, o costRun
					for k := 0; k < 2; k++ {
						if (k+r)%2 == 0 {
							a = measureCost(b, wl.mode, wl.arg, plain)
							continue
						}
						recordSpec = vs
						o = measureCost(b, wl.mode, wl.arg, plain)
						recordSpec = loadRecord
					}
					as, bs = append(as, a), append(bs, o)
					if a.perEvent > 0 {
						ratio = append(ratio, o.perEvent/a.perEvent)
					}
				}
				b.ReportMetric(medianOf(load), "loadavg")
				reportCost(b, as, "")
				reportCost(b, bs, "vs_")
				b.ReportMetric(medianOf(ratio), "vs/a_ns/event")
			}
		})
	}
}

// costWorkloads are the targets of the cost benchmarks: burst, write/read pairs of 16 bytes on
// a unix socket pair in one thread (no waiting, no TCP: the socket hooks alone); echo_tcp, a
// Go echo client and server over TCP in one process (64-byte messages, non-blocking sockets,
// EAGAIN reads, goroutine switches: every hook).
var costWorkloads = []struct{ name, mode, arg string }{
	{"burst", "burst", "200000"},
	{"echo_tcp", "echo-tcp", "30000"},
}

// costPrograms are the programs whose run-time statistics the cost benchmarks report.
var costPrograms = []string{"perflab_send", "perflab_recv", "perflab_tcpsend", "perflab_switch"}

// costRun is one recorded run's figures (see BenchmarkEventCost).
type costRun struct {
	perEvent float64            // record's figure: probe_ns_per_event
	added    float64            // the target's CPU time recorded less plain, per event
	perRun   map[string]float64 // program -> ns per run from the statistics, net of theirs
	events   int
}

// measureCost records the helper twice: as record runs (self-timing in sampled windows), for
// record's figure and the CPU time it added over plain; then with the kernel's run-time
// statistics on for the whole run and the self-timing off, for each program's ns per run.
func measureCost(b *testing.B, mode, arg string, plain time.Duration) costRun {
	b.Helper()
	p, err := Open(Config{PayloadBytes: -1})
	if err != nil {
		b.Fatal(err)
	}
	cmd, out := startHelper(b, p, mode, arg)
	rec := &recording{conns: map[uint64]trace.Connection{}}
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background(), rec.emit) }()
	helperResult(b, cmd, out)
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	stats := p.Stats()
	p.Close()
	run := costRun{perRun: map[string]float64{}, events: len(rec.events)}
	run.perEvent = float64(stats["probe_ns_per_event"])
	if run.events > 0 {
		run.added = float64(cpu-plain) / float64(run.events)
	}

	p, err = Open(Config{PayloadBytes: -1})
	if err != nil {
		b.Fatal(err)
	}
	p.closeStats()
	p.cost.statsErr = errors.New("self-timing off")
	st, err := ebpf.EnableStats(bpfStatsRunTime)
	if err != nil {
		p.Close()
		b.Skip(err)
	}
	s0 := p.progStats()
	recordHelper(b, p, mode, arg)
	s1 := p.progStats()
	st.Close()
	nop := p.cost.nopNs
	p.Close()
	for _, pr := range costPrograms {
		if runs := s1[pr].RunCount - s0[pr].RunCount; runs > 0 {
			run.perRun[pr] = float64(s1[pr].Runtime-s0[pr].Runtime)/float64(runs) - nop
		}
	}
	return run
}

// reportCost reports the medians of runs' figures, each metric's unit prefixed with prefix.
func reportCost(b *testing.B, runs []costRun, prefix string) {
	var perEvent, added []float64
	perRun := map[string][]float64{}
	for _, r := range runs {
		perEvent = append(perEvent, r.perEvent)
		added = append(added, r.added)
		for pr, v := range r.perRun {
			perRun[pr] = append(perRun[pr], v)
		}
	}
	b.ReportMetric(medianOf(perEvent), prefix+"ns/event")
	b.ReportMetric(medianOf(added), prefix+"added_ns/event")
	if len(runs) > 0 {
		b.ReportMetric(float64(runs[len(runs)-1].events), prefix+"events")
	}
	for _, pr := range costPrograms {
		if len(perRun[pr]) > 0 {
			b.ReportMetric(medianOf(perRun[pr]), prefix+pr[len(ProgramPrefix):]+"_ns/run")
		}
	}
}

// helperCPU runs a helper without recording it and returns its CPU time.
func helperCPU(b *testing.B, mode, arg string) time.Duration {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", arg)
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("helper: %v: %s", err, out)
	}
	return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

// loadAverage returns the one-minute load average, or -1.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f, _, _ := strings.Cut(string(b), " ")
	v, err := strconv.ParseFloat(f, 64)
	if err != nil {
		return -1
	}
	return v
}

func medianOf(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
