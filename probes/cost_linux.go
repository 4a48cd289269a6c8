//go:build linux && amd64

package probes

import (
	"errors"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// bpfStatsRunTime is BPF_STATS_RUN_TIME (linux/bpf.h).
const bpfStatsRunTime = 0

// The kernel's BPF run-time statistics add two clock reads to every run of every program while
// they are on, so they are sampled: on for at least statsWindow at the start, and then for
// statsWindow in every statsPeriod (2%). A window that has seen events stays open past
// statsWindow until it has seen statsMinEvents or statsMaxWindow has gone by, so that a quiet
// target still gets a figure (on at most a fifth of the time); after the first, one that has
// seen none closes. Until the windows have timed statsEnoughEvents, a window also opens as soon
// as statsEnoughEvents have been recorded since the last one closed: a target whose burst of
// work fell between two windows (a benchmark of a second, started after the recording) would
// otherwise get no figure at all.
const (
	statsWindow       = 100 * time.Millisecond
	statsMaxWindow    = time.Second
	statsPeriod       = 5 * time.Second
	statsMinEvents    = 1000
	statsEnoughEvents = 100
)

// cost is what the probes cost, as measured: on recorded threads, the time the programs take,
// timed by themselves in sampled windows; for other processes, the kernel's run-time
// statistics of their paths at start, with what the statistics add to each run taken out.
type cost struct {
	statsErr error // why the statistics could not be enabled; nil when they could

	// Per-run kernel time of the paths other processes take, from the calibration window at
	// Open (no target yet, so every run is another process's), and of an empty program: what
	// the statistics add to every run by their own clock reads.
	sockOtherNs, switchOtherNs, nopNs float64
	calib                             map[string]ebpf.ProgramStats // program statistics at the end of calibration

	from       time.Time // the open window's start
	c0         Counts    // counters at the open window's start
	inWindows  Counts    // counter increments inside closed windows
	windowOpen bool
	windows    int    // windows closed so far
	closedAt   uint64 // events produced when the last window closed
}

// socketCalls makes n write/read pairs on a unix socket pair: perflab's own socket calls,
// which the probes see as another process's.
func socketCalls(n int) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return
	}
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	b := []byte{1}
	for i := 0; i < n; i++ {
		syscall.Write(fds[0], b)
		syscall.Read(fds[1], b)
	}
}

// calibrate measures, once the probes are attached and before any target is added, what
// processes that are not recorded pay: the probes' per-run kernel time on their paths, from
// the statistics, and what the statistics themselves add to a run. It then opens the first
// statistics window.
func (p *Probe) calibrate() {
	st, err := ebpf.EnableStats(bpfStatsRunTime)
	if err != nil {
		p.cost.statsErr = err
		return
	}
	nop, nerr := link.AttachTracing(link.TracingOptions{Program: p.objs.PerflabNop, AttachType: ebpf.AttachTraceRawTp})
	socketCalls(5000)
	time.Sleep(20 * time.Millisecond) // let other processes switch and talk a little
	p.cost.calib = p.progStats()
	if nerr == nil {
		if s, err := p.objs.PerflabNop.Stats(); err == nil && s.RunCount > 0 {
			p.cost.nopNs = float64(s.Runtime) / float64(s.RunCount)
		}
		nop.Close()
	}
	st.Close()
	per := func(names ...string) float64 {
		var ns, runs uint64
		for _, n := range names {
			s := p.cost.calib[n]
			ns += uint64(s.Runtime)
			runs += s.RunCount
		}
		if runs == 0 {
			return 0
		}
		return float64(ns) / float64(runs)
	}
	p.cost.sockOtherNs = per("perflab_send", "perflab_recv")
	p.cost.switchOtherNs = per("perflab_switch")
	p.openStats()
}

// progStats reads every program's run-time statistics.
func (p *Probe) progStats() map[string]ebpf.ProgramStats {
	out := map[string]ebpf.ProgramStats{}
	progs := p.programs()
	if p.ev != nil {
		progs = append(progs, p.ev.progs...)
	}
	for _, pr := range progs {
		if pr.prog == nil {
			continue
		}
		if s, err := pr.prog.Stats(); err == nil {
			out[pr.name] = *s
		}
	}
	if p.u != nil { // the uprobe object's programs: probe_uentry_ns, probe_uret_ns, ...
		for name, pr := range p.u.coll.Programs {
			if s, err := pr.Stats(); err == nil {
				out[name] = *s
			}
		}
	}
	return out
}

// openStats opens a statistics window.
func (p *Probe) openStats() {
	if p.cost.statsErr != nil || p.stats != nil {
		return
	}
	st, err := ebpf.EnableStats(bpfStatsRunTime)
	if err != nil {
		p.cost.statsErr = err
		return
	}
	if err := p.setMeasuring(1); err != nil {
		st.Close()
		p.cost.statsErr = err
		return
	}
	p.stats = st
	p.cost.from = time.Now()
	p.cost.c0, _ = p.Counts()
	p.cost.windowOpen = true
}

// setMeasuring sets the measuring flag of the base object and of every other object that has
// one (their programs then time themselves into the same counters).
func (p *Probe) setMeasuring(v uint32) error {
	if err := p.objs.Measuring.Set(v); err != nil {
		return err
	}
	for _, c := range p.extra {
		if m, ok := c.Variables["measuring"]; ok {
			if err := m.Set(v); err != nil {
				return err
			}
		}
	}
	return nil
}

// busyUnmeasured reports whether the windows have timed fewer than statsEnoughEvents while at
// least that many were recorded since the last window closed.
func (p *Probe) busyUnmeasured() bool {
	if p.cost.inWindows.Produced >= statsEnoughEvents {
		return false
	}
	c, err := p.Counts()
	return err == nil && c.Produced >= p.cost.closedAt+statsEnoughEvents
}

// closeStats closes the open statistics window, if any.
func (p *Probe) closeStats() {
	if p.stats == nil {
		return
	}
	if c, err := p.Counts(); err == nil {
		w := &p.cost.inWindows
		w.Produced += c.Produced - p.cost.c0.Produced
		w.Other += c.Other - p.cost.c0.Other
		w.TargetSwitches += c.TargetSwitches - p.cost.c0.TargetSwitches
		w.TargetNs += c.TargetNs - p.cost.c0.TargetNs
		w.TargetRuns += c.TargetRuns - p.cost.c0.TargetRuns
		p.cost.closedAt = c.Produced
	}
	p.setMeasuring(0)
	p.stats.Close()
	p.stats = nil
	p.cost.from = time.Now()
	p.cost.windowOpen = false
	p.cost.windows++
}

// sampleStats opens and closes the statistics windows on the clock.
func (p *Probe) sampleStats() {
	if p.cost.statsErr != nil {
		return
	}
	since := time.Since(p.cost.from)
	if p.stats == nil {
		if since >= statsPeriod-statsWindow || p.busyUnmeasured() {
			p.openStats()
		}
		return
	}
	if since < statsWindow {
		return
	}
	c, err := p.Counts()
	n := c.Produced - p.cost.c0.Produced
	// After the first (which waits for a starting target's first events), a window that has
	// seen no event closes on time: the statistics cost every program run of every process,
	// and an idle target has nothing to measure.
	idle := n == 0 && p.cost.windows > 0
	if err != nil || idle || n >= statsMinEvents || since >= statsMaxWindow {
		p.closeStats()
	}
}

// Stats returns the probes' counters and costs for the trace footer (all times in ns):
//
//   - probe_events, probe_lost_events, probe_lost_connections: the counters;
//   - probe_ns_per_event: kernel time of the probes on recorded threads per recorded event,
//     timed by the programs themselves in the sampled windows (each run less its own clock
//     reads, which it measures), over probe_stats_events events;
//   - probe_other_ns_per_call: the probes' kernel time per socket send or receive of a process
//     that is not recorded (measured at Open, on perflab's own calls and whatever else ran);
//     their other system calls run no probe at all;
//   - probe_other_ns_per_switch: the probes' kernel time per context switch of other threads;
//   - probe_stats_ns_per_run: what the statistics themselves add to each program run (their
//     clock reads), measured with an empty program at Open and taken out of the figures above;
//   - probe_runs, probe_run_ns, probe_<program>_runs, probe_<program>_ns: the statistics;
//   - probe_stats_errno: when the statistics could not be enabled, the errno the kernel gave
//     (the ns figures are then absent);
//   - probe_waits: the loop probe was on, attached to the syscall tracepoints (1) or to the
//     raw sys_enter/sys_exit (2): every system call of every process then takes the kernel's
//     slower path.
func (p *Probe) Stats() map[string]int64 {
	p.closeStats()
	st := map[string]int64{}
	if p.cfg.Waits {
		st["probe_waits"] = 1
		if waitHook(p.cfg) == WaitHookBTF {
			st["probe_waits"] = 2
		}
	}
	if c, err := p.Counts(); err == nil {
		st["probe_events"] = int64(c.Produced)
		st["probe_lost_events"] = int64(c.LostEvents)
		st["probe_lost_connections"] = int64(c.LostConns)
		if p.u != nil {
			st["probe_uprobe_events"] = int64(c.UprobeEvents)
		}
	}
	if p.bad > 0 {
		st["probe_bad_records"] = int64(p.bad)
	}
	if err := p.cost.statsErr; err != nil {
		var errno syscall.Errno
		if errors.As(err, &errno) {
			st["probe_stats_errno"] = int64(errno)
		} else {
			st["probe_stats_errno"] = -1
		}
		p.evidenceStats(st, nil)
		return st
	}
	var total, runs, misses uint64
	progStats := p.progStats()
	p.evidenceStats(st, progStats)
	for name, s := range progStats {
		c := p.cost.calib[name]
		ns, n := uint64(s.Runtime-c.Runtime), s.RunCount-c.RunCount
		short := name[len(ProgramPrefix):]
		st["probe_"+short+"_runs"] = int64(n)
		st["probe_"+short+"_ns"] = int64(ns)
		total += ns
		runs += n
		misses += s.RecursionMisses
	}
	if misses > 0 {
		st["probe_recursion_misses"] = int64(misses)
	}
	st["probe_runs"] = int64(runs)
	st["probe_run_ns"] = int64(total)
	// Every figure below is net of the statistics' own clock reads (nop ns a run).
	nop := p.cost.nopNs
	st["probe_stats_ns_per_run"] = int64(nop + 0.5)
	if p.cost.sockOtherNs > 0 {
		st["probe_other_ns_per_call"] = int64(max(0, p.cost.sockOtherNs-nop) + 0.5)
	}
	if p.cost.switchOtherNs > 0 {
		st["probe_other_ns_per_switch"] = int64(max(0, p.cost.switchOtherNs-nop) + 0.5)
	}
	w := p.cost.inWindows
	st["probe_stats_events"] = int64(w.Produced)
	if w.Produced > 0 {
		// Each timed run has taken its own clock reads out (bpf/record.bpf.c: timing).
		st["probe_ns_per_event"] = int64(float64(w.TargetNs)/float64(w.Produced) + 0.5)
	}
	return st
}
