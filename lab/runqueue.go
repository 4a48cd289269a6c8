package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/perflab/perflab/reports"
)

// RunQueue is the time the threads of a point's two sides spent runnable waiting for a CPU
// (schedstat's run delay: from being woken or preempted to running, a halted CPU's wake-up
// included), per round trip, over the point's load window, and how much of the mean RTT's rise
// since the series' first point it accounts for.
type RunQueue struct {
	// ClientUSPerRT is the run delay of every thread of perflab's process, which runs the
	// clients; ServerUSPerRT that of the server's process's threads, when the server runs in a
	// process of its own (Separate); USPerRT their sum. All per round trip over the window, µs.
	ClientUSPerRT float64 `json:"client_us_per_rt"`
	ServerUSPerRT float64 `json:"server_us_per_rt"`
	USPerRT       float64 `json:"us_per_rt"`
	// ClientSwitchInsPerRT and ServerSwitchInsPerRT are how many times a thread of each side was
	// put on a CPU per round trip (schedstat's third field: after a wake-up or a preemption):
	// the waits the figures above sum. A round trip needs about one per side when both block;
	// the rest are threads woken to look for work, the runtime's own, or preemptions.
	ClientSwitchInsPerRT float64 `json:"client_switch_ins_per_rt"`
	ServerSwitchInsPerRT float64 `json:"server_switch_ins_per_rt"`
	// ClientUSPerSwitchIn and ServerUSPerSwitchIn are each side's mean wait per switch-in, µs:
	// the run-queue and wake-up delay of one wake-up or preemption, as runqlat's mean.
	ClientUSPerSwitchIn float64 `json:"client_us_per_switch_in"`
	ServerUSPerSwitchIn float64 `json:"server_us_per_switch_in"`
	// Separate is true when the server ran in a process of its own; false, the clients' and the
	// server's goroutines shared perflab's threads and ClientUSPerRT holds both sides.
	Separate bool `json:"separate"`
	// WindowS is the time the figures cover, s: from the first kernel reading after every client
	// finished its warm-up to the last one before the first client stopped measuring.
	// LoadWindow is false when no two readings fell in that window and the figures cover the
	// whole point, warm-up included (then per round trip of the whole point).
	WindowS    float64 `json:"window_s"`
	LoadWindow bool    `json:"load_window"`
	// Rise compares the point with the series' first (nil at that one).
	Rise *RunQueueRise `json:"rise,omitempty"`
	// Warning says why the figures of this point cannot be stood behind ("" when they can).
	Warning string `json:"warning,omitempty"`
	// Evidence is each round trip's own wake-up and run-queue delay from the kernel's
	// scheduler evidence (Config.Evidence), where it was recorded.
	Evidence *RunQueueEvidence `json:"evidence,omitempty"`
}

// RunQueueRise is how much of the mean RTT's rise from the series' first point to this one the
// run queue per round trip accounts for: of RTTRiseUS, RunQueueRiseUS (Share of it).
type RunQueueRise struct {
	FromClients    int     `json:"from_clients"`
	RTTRiseUS      float64 `json:"rtt_rise_us"`
	RunQueueRiseUS float64 `json:"runqueue_rise_us"`
	// Share is RunQueueRiseUS over RTTRiseUS (0 when the RTT did not rise); outside 0..1 the
	// point has a warning.
	Share float64 `json:"share"`
	// Of says whose delay RunQueueRiseUS is, in the kernel evidence's rise
	// (RunQueueEvidence.Rise): "clients and server", or "clients" where the server's side is
	// not known at both points ("" in schedstat's).
	Of string `json:"of,omitempty"`
}

// minRTTRise is the smallest rise of the mean RTT, µs, whose share the sweep reports without a
// warning: below it a rise is within a point's run-to-run noise on loopback.
const minRTTRise = 2.0

// rqSample is the kernel's schedstat times of both sides' threads at one instant.
type rqSample struct {
	at             time.Time
	client, server map[string]threadSched
	ok             bool
}

// threadSched is one thread's /proc/PID/task/TID/schedstat: time on a CPU, time runnable
// waiting for one (ns), and how many times it was put on a CPU (after a wake-up or a
// preemption).
type threadSched struct {
	onCPU, runDelay, switchIns int64
}

// readThreads reads the schedstat of every thread of process pid, by thread id; ok is false
// where the kernel does not say.
func readThreads(pid int) (map[string]threadSched, bool) {
	paths, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil {
		return nil, false
	}
	out := make(map[string]threadSched, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // a thread that exited meanwhile
		}
		var t threadSched
		if n, err := fmt.Sscan(string(b), &t.onCPU, &t.runDelay, &t.switchIns); n < 3 || err != nil || t.onCPU < 0 || t.runDelay < 0 || t.switchIns < 0 {
			continue
		}
		out[filepath.Base(filepath.Dir(p))] = t
	}
	return out, len(out) > 0
}

// threadsSince sums what the threads alive in after did since before (a thread new since then
// counts whole; one that exited meanwhile is not counted).
func threadsSince(before, after map[string]threadSched) threadSched {
	var sum threadSched
	for tid, a := range after {
		b := before[tid]
		sum.onCPU += max(a.onCPU-b.onCPU, 0)
		sum.runDelay += max(a.runDelay-b.runDelay, 0)
		sum.switchIns += max(a.switchIns-b.switchIns, 0)
	}
	return sum
}

// rqSampler reads both sides' schedstat times every interval while a point runs, so that the
// figures can be taken over the load window alone once the clients say where it was.
type rqSampler struct {
	serverPid int // 0: the server runs in perflab's process
	every     time.Duration
	mu        sync.Mutex
	samples   []rqSample
	stop      chan struct{}
	done      chan struct{}
}

// maxRQSamples bounds the readings of one point (a long --duration samples less often).
const maxRQSamples = 64

func startRQSampler(serverPid int, duration time.Duration) *rqSampler {
	every := max(duration/32, 2*time.Millisecond)
	s := &rqSampler{serverPid: serverPid, every: every, stop: make(chan struct{}), done: make(chan struct{})}
	s.sample()
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.sample()
			}
		}
	}()
	return s
}

func (s *rqSampler) sample() {
	c, ok := readThreads(os.Getpid())
	smp := rqSample{at: time.Now(), client: c, ok: ok}
	if s.serverPid > 0 {
		sv, ok2 := readThreads(s.serverPid)
		smp.server, smp.ok = sv, ok && ok2
	}
	s.mu.Lock()
	if len(s.samples) >= maxRQSamples {
		// Keep the first and thin the rest: drop every other reading.
		kept := s.samples[:1]
		for i := 2; i < len(s.samples); i += 2 {
			kept = append(kept, s.samples[i])
		}
		s.samples = kept
	}
	s.samples = append(s.samples, smp)
	s.mu.Unlock()
}

// finish stops the sampler, takes a last reading and returns them all, oldest first.
func (s *rqSampler) finish() []rqSample {
	close(s.stop)
	<-s.done
	s.sample()
	return s.samples
}

// runQueueOver sets p.RunQueue from the readings: over the load window [from, to] when two
// readings fall in it (round trips: the point's throughput over the readings' span), else over
// the whole point (round trips: allRTs). ok is false where the kernel gave no schedstat.
func runQueueOver(p *Point, samples []rqSample, from, to time.Time, allRTs int64, separate bool) {
	var a, b *rqSample
	for i := range samples {
		sm := &samples[i]
		if !sm.ok {
			continue
		}
		if a == nil && !sm.at.Before(from) {
			a = sm
		}
		if !sm.at.After(to) {
			b = sm
		}
	}
	rq := &RunQueue{Separate: separate, LoadWindow: true}
	var rts float64
	if a != nil && b != nil && b.at.After(a.at) && p.ThroughputPerS > 0 {
		rts = p.ThroughputPerS * b.at.Sub(a.at).Seconds()
	} else {
		a, b = nil, nil
		for i := range samples {
			if samples[i].ok {
				if a == nil {
					a = &samples[i]
				}
				b = &samples[i]
			}
		}
		if a == nil || a == b || allRTs <= 0 {
			return
		}
		rq.LoadWindow = false
		rts = float64(allRTs)
	}
	if rts <= 0 {
		return
	}
	rq.WindowS = round3(b.at.Sub(a.at).Seconds())
	c := threadsSince(a.client, b.client)
	rq.ClientUSPerRT = round3(float64(c.runDelay) / 1e3 / rts)
	rq.ClientSwitchInsPerRT = round3(float64(c.switchIns) / rts)
	if c.switchIns > 0 {
		rq.ClientUSPerSwitchIn = round3(float64(c.runDelay) / 1e3 / float64(c.switchIns))
	}
	if separate {
		sv := threadsSince(a.server, b.server)
		rq.ServerUSPerRT = round3(float64(sv.runDelay) / 1e3 / rts)
		rq.ServerSwitchInsPerRT = round3(float64(sv.switchIns) / rts)
		if sv.switchIns > 0 {
			rq.ServerUSPerSwitchIn = round3(float64(sv.runDelay) / 1e3 / float64(sv.switchIns))
		}
	}
	rq.USPerRT = round3(rq.ClientUSPerRT + rq.ServerUSPerRT)
	p.RunQueue = rq
	p.RunQueueUS = rq.USPerRT
}

// runQueueRises compares each point of the series with its first: of the mean RTT's rise, how
// much the run queue per round trip accounts for; and warns (in the point and in res) where the
// figures cannot be stood behind.
func runQueueRises(res *Result, s *Series) {
	if len(s.points) == 0 {
		return
	}
	first := &res.Points[s.points[0]]
	for _, k := range s.points {
		p := &res.Points[k]
		rq := p.RunQueue
		if rq == nil {
			continue
		}
		var why []string
		if !rq.Separate {
			why = append(why, "the clients and the server shared perflab's process, so the run queue is not split by side")
		}
		if !rq.LoadWindow {
			why = append(why, "no two kernel readings fell in the load window: the figures cover the whole point, warm-up included")
		}
		if rq.USPerRT > p.RTTUS.Mean && p.RTTUS.Mean > 0 {
			why = append(why, fmt.Sprintf("the threads' waits for a CPU (%s µs per round trip) exceed the mean RTT (%s µs): many held no round trip (threads looking for work, the runtime's own), so the figure overstates the round trips' share",
				reports.Num(rq.USPerRT), reports.Num(p.RTTUS.Mean)))
		}
		if k != s.points[0] && first.RunQueue != nil {
			r := &RunQueueRise{FromClients: first.Clients, RTTRiseUS: round3(p.RTTUS.Mean - first.RTTUS.Mean),
				RunQueueRiseUS: round3(rq.USPerRT - first.RunQueue.USPerRT)}
			if r.RTTRiseUS > 0 {
				r.Share = round3(r.RunQueueRiseUS / r.RTTRiseUS)
			}
			rq.Rise = r
			switch {
			case r.RTTRiseUS < minRTTRise:
				why = append(why, fmt.Sprintf("the mean RTT changed by %s µs from %s, within the noise: no share of it is given", reports.Num(r.RTTRiseUS), plural(first.Clients, "client")))
			case r.Share < 0:
				why = append(why, fmt.Sprintf("the run queue per round trip fell (%s µs) while the RTT rose: it explains none of the rise", reports.Num(r.RunQueueRiseUS)))
			case r.Share > 1:
				why = append(why, fmt.Sprintf("the run queue's rise (%s µs) exceeds the RTT's (%s µs): waits that held no round trip are in it", reports.Num(r.RunQueueRiseUS), reports.Num(r.RTTRiseUS)))
			}
		}
		if p.RequestsPerCycle >= 2 && rq.Separate {
			why = append(why, fmt.Sprintf("the batch loop ran %s requests per cycle: one wait of its thread held all of them but counts once, so the server's figure understates it", reports.Num(p.RequestsPerCycle)))
		}
		if len(why) > 0 {
			rq.Warning = "run queue: " + strings.Join(why, "; ")
			res.Warnings = append(res.Warnings, p.Label()+": "+rq.Warning)
		}
	}
}

// runQueueRiseLine is the sentence "of the RTT rise from 1 to N clients (X µs), run-queue delay
// accounts for Y µs (Z%)" for point p against the series' first point, first.
func runQueueRiseLine(first, p *Point) string {
	rq := p.RunQueue
	if rq == nil || rq.Rise == nil || first.RunQueue == nil {
		return ""
	}
	r := rq.Rise
	var s string
	if r.RTTRiseUS >= minRTTRise {
		s = fmt.Sprintf("of the RTT rise from %d to %s (%s µs), run-queue delay accounts for %s µs (%s)",
			r.FromClients, plural(p.Clients, "client"), reports.Num(r.RTTRiseUS), reports.Num(r.RunQueueRiseUS), reports.Share(r.Share))
	} else {
		s = fmt.Sprintf("from %d to %s the mean RTT changed by %s µs and the run-queue delay per round trip by %s µs",
			r.FromClients, plural(p.Clients, "client"), reports.Num(r.RTTRiseUS), reports.Num(r.RunQueueRiseUS))
	}
	if rq.Separate {
		s += fmt.Sprintf(" (per round trip, clients' process %s → %s µs in %s → %s switch-ins, server's %s → %s µs in %s → %s)",
			reports.Num(first.RunQueue.ClientUSPerRT), reports.Num(rq.ClientUSPerRT), reports.Num(first.RunQueue.ClientSwitchInsPerRT), reports.Num(rq.ClientSwitchInsPerRT),
			reports.Num(first.RunQueue.ServerUSPerRT), reports.Num(rq.ServerUSPerRT), reports.Num(first.RunQueue.ServerSwitchInsPerRT), reports.Num(rq.ServerSwitchInsPerRT))
	}
	if rq.Warning != "" {
		s += " [warning: see below]"
	}
	return s
}
