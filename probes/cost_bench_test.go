//go:build linux && amd64

package probes

import (
	"context"
	"errors"
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
	progs := []string{"perflab_send", "perflab_recv", "perflab_tcpsend", "perflab_switch"}
	for _, wl := range []struct{ name, mode, arg string }{
		{"burst", "burst", "200000"},
		{"echo_tcp", "echo-tcp", "30000"},
	} {
		b.Run(wl.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				var perEvent, added, load []float64
				perRun := map[string][]float64{}
				var events int
				for r := 0; r < rounds; r++ {
					load = append(load, loadAverage())
					plain := helperCPU(b, wl.mode, wl.arg)
					// As record runs: self-timing in sampled windows.
					p, err := Open(Config{PayloadBytes: -1})
					if err != nil {
						b.Fatal(err)
					}
					cmd, out := startHelper(b, p, wl.mode, wl.arg)
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
					events = len(rec.events)
					perEvent = append(perEvent, float64(stats["probe_ns_per_event"]))
					added = append(added, float64(cpu-plain)/float64(events))

					// Untimed, with the statistics on for the whole run.
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
					recordHelper(b, p, wl.mode, wl.arg)
					s1 := p.progStats()
					st.Close()
					nop := p.cost.nopNs
					p.Close()
					for _, pr := range progs {
						if runs := s1[pr].RunCount - s0[pr].RunCount; runs > 0 {
							perRun[pr] = append(perRun[pr], float64(s1[pr].Runtime-s0[pr].Runtime)/float64(runs)-nop)
						}
					}
				}
				b.ReportMetric(medianOf(perEvent), "ns/event")
				b.ReportMetric(medianOf(added), "added_ns/event")
				b.ReportMetric(float64(events), "events")
				b.ReportMetric(medianOf(load), "loadavg")
				for _, pr := range progs {
					if len(perRun[pr]) > 0 {
						b.ReportMetric(medianOf(perRun[pr]), pr[len(ProgramPrefix):]+"_ns/run")
					}
				}
			}
		})
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
