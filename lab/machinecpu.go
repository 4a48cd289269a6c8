package lab

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/perflab/perflab/trace"
)

// cpuSampleEvery is how often a point samples the machine's processor time while it runs:
// 20 ms, two of the kernel's 10 ms accounting ticks (USER_HZ), so that the load window's ends,
// interpolated between samples, are placed to within a tick, for a few file reads per sample.
const cpuSampleEvery = 20 * time.Millisecond

// clockTick is the unit of /proc/stat and /proc/PID/stat times: USER_HZ, 100 on Linux for
// every architecture's user-space ABI.
const clockTick = 10 * time.Millisecond

// maxTicks is the most clock ticks whose time in ns an int64 holds: a count past it is not
// one the kernel wrote.
const maxTicks = math.MaxInt64 / int64(clockTick)

// cpuSample is the processor time counted up to one instant of the trace clock, ns: every
// processor's busy time (user, nice, system, irq, softirq, steal: all but idle and iowait),
// and the busy time of the point's own processes (the server's, the client's and perflab's:
// user and system time, softirq work done in their context included).
type cpuSample struct {
	at   int64 // trace clock (CLOCK_MONOTONIC), ns
	busy int64
	own  int64
	kids int64 // the part of own that is perflab's descendants': the client command's
	// kidsRunDelay is the time the threads of perflab's descendants (the client command's)
	// spent runnable waiting for a processor (schedstat's second field, summed), ns.
	kidsRunDelay int64
}

// machineSampler samples the processor time of the machine and of the point's processes (the
// server's, perflab's own and its descendants: the client it started) every cpuSampleEvery
// until stopped.
type machineSampler struct {
	server []uint32
	// last is each process's time at its last sample, ns: a process counts from 0 before it
	// started and keeps its last time after it exited, so that the sum never goes back.
	last map[uint32]int64
	kid  map[uint32]bool // the processes of last that descend from perflab
	// runDelay is each descendant's threads' run delay at its last sample, ns, kept as last is.
	runDelay map[uint32]int64
	mu       sync.Mutex
	samples  []cpuSample
	stop     context.CancelFunc
	done     chan struct{}
}

// startMachineSampler starts sampling; finish stops it and returns the samples.
func startMachineSampler(ctx context.Context, server []uint32) *machineSampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &machineSampler{server: server, last: map[uint32]int64{}, kid: map[uint32]bool{}, runDelay: map[uint32]int64{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(cpuSampleEvery)
		defer t.Stop()
		for {
			if c, ok := s.readWhole(); ok {
				s.mu.Lock()
				s.samples = append(s.samples, c)
				s.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// finish stops the sampler, takes a last sample and returns them all in time order.
func (s *machineSampler) finish() []cpuSample {
	s.stop()
	<-s.done
	// The sampling goroutine has ended: s is this goroutine's alone. The last sample must be
	// taken, whole or not: the load window ends before it.
	c, ok := s.readWhole()
	if !ok {
		c, ok = s.read()
	}
	if ok {
		s.samples = append(s.samples, c)
	}
	return s.samples
}

// sampleSpread is the longest a sample may take from its first file read to its last: a
// sampler that lost its processor in between would pair the machine's time of one instant
// with the processes' time of a later one. 2 ms is some thirty file reads on a processor of
// its own.
const sampleSpread = 2 * time.Millisecond

// readWhole takes one sample whose reads all fell within sampleSpread, trying up to 5 times;
// false when none did or /proc/stat cannot be read.
func (s *machineSampler) readWhole() (cpuSample, bool) {
	for range 5 {
		t0 := trace.Monotonic()
		c, ok := s.read()
		if !ok {
			return c, false
		}
		if c.at-t0 <= int64(sampleSpread) {
			c.at = t0 + (c.at-t0)/2
			return c, true
		}
	}
	return cpuSample{}, false
}

// read takes one sample, timed at its end: false when /proc/stat cannot be read.
func (s *machineSampler) read() (cpuSample, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuSample{}, false
	}
	busy, ok := parseStatBusy(b)
	if !ok {
		return cpuSample{}, false
	}
	c := cpuSample{busy: busy}
	pids := append([]uint32{uint32(os.Getpid())}, s.server...)
	kids := descendants(uint32(os.Getpid()))
	for _, pid := range kids {
		s.kid[pid] = true
	}
	pids = append(pids, kids...)
	for _, pid := range pids {
		if t, ok := processCPU(pid); ok && t >= s.last[pid] {
			s.last[pid] = t
		}
	}
	for _, pid := range kids {
		if threads, ok := readThreads(int(pid)); ok {
			var d int64
			for _, t := range threads {
				d += t.runDelay
			}
			s.runDelay[pid] = max(s.runDelay[pid], d)
		}
	}
	for pid, t := range s.last {
		c.own += t
		if s.kid[pid] {
			c.kids += t
		}
	}
	for _, d := range s.runDelay {
		c.kidsRunDelay += d
	}
	c.at = trace.Monotonic()
	return c, true
}

// parseStatBusy reads /proc/stat's first line (every processor together) and returns its busy
// time, ns: user, nice, system, irq, softirq and steal (guest time is inside user and nice).
func parseStatBusy(b []byte) (int64, bool) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0, false
	}
	var busy int64
	for i, v := range f[1:9] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > maxTicks {
			return 0, false
		}
		if i != 3 && i != 4 { // idle, iowait
			if busy > maxTicks-n {
				return 0, false
			}
			busy += n
		}
	}
	return busy * int64(clockTick), true
}

// processCPU returns a process's user and system time (all its threads, /proc/PID/stat), ns.
func processCPU(pid uint32) (int64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	return parsePIDStat(b)
}

// parsePIDStat reads utime and stime (fields 14 and 15) of a /proc/PID/stat line, ns. The
// command name (field 2) may hold spaces and parentheses: the fields are counted after its
// last ')'.
func parsePIDStat(b []byte) (int64, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 { // state is field 3: utime and stime are f[11] and f[12]
		return 0, false
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil || u < 0 || s < 0 || u > maxTicks || s > maxTicks-u {
		return 0, false
	}
	return (u + s) * int64(clockTick), true
}

// descendants returns the processes below pid: the children of each of its threads, and theirs
// (through each child's main thread: a shell or a benchmark forks from it), at most 64.
func descendants(pid uint32) []uint32 {
	var out []uint32
	seen := map[uint32]bool{pid: true}
	paths, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	queue := readChildren(paths)
	for len(queue) > 0 && len(out) < 64 {
		c := queue[0]
		queue = queue[1:]
		if seen[c] {
			continue
		}
		seen[c] = true
		out = append(out, c)
		queue = append(queue, readChildren([]string{fmt.Sprintf("/proc/%d/task/%d/children", c, c)})...)
	}
	return out
}

func readChildren(paths []string) []uint32 {
	var out []uint32
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.ParseUint(f, 10, 32); err == nil {
				out = append(out, uint32(n))
			}
		}
	}
	return out
}

// WindowCPU is the processor time spent over a point's load window (the samples interpolated
// at its ends): by every processor of the machine, and by the point's own processes (the
// server, the client and perflab recording them).
type WindowCPU struct {
	// Processors is the machine's (runtime.NumCPU); AvailableProcessors what the point's
	// processes had of them: Processors less the others' busy time (other programs, kernel
	// threads, the hypervisor's steal) over the window.
	Processors          int     `json:"processors"`
	AvailableProcessors float64 `json:"available_processors"`
	// MachineUS is every processor's busy time per round trip of the load, µs; OwnUS the point's
	// own processes' (D_cpu, the processor station's demand); BusyShare the machine's busy time
	// over its capacity (processors × window).
	MachineUS float64 `json:"machine_us_per_req"`
	OwnUS     float64 `json:"own_us_per_req"`
	// ClientUS is the part of OwnUS that is the client's: the processes perflab started for
	// the point (the client command and its children), µs per round trip.
	ClientUS float64 `json:"client_us_per_req"`
	// ClientRunDelayUS is the time the client's threads spent runnable waiting for a
	// processor (their schedstat), µs per round trip: after a wake-up, or preempted.
	ClientRunDelayUS float64 `json:"client_run_delay_us_per_req"`
	BusyShare        float64 `json:"busy_share"`
	// BoundPerS is the processors' throughput bound over the window: AvailableProcessors / OwnUS.
	BoundPerS float64 `json:"bound_per_s"`
	// Samples is how many samples fell inside the window.
	Samples int `json:"samples"`
}

// windowCPU interpolates samples at the window [from, to] (trace clock, ns) and returns the
// processor time over it for requests round trips; ok is false when the samples do not cover
// the window or hold no time of the point's processes.
func windowCPU(samples []cpuSample, from, to int64, requests int64, processors int) (WindowCPU, bool) {
	if to <= from || requests <= 0 || processors <= 0 {
		return WindowCPU{}, false
	}
	own := append([]cpuSample(nil), samples...)
	sort.Slice(own, func(i, j int) bool { return own[i].at < own[j].at })
	b0, ok0 := interpolate(own, from)
	b1, ok1 := interpolate(own, to)
	if !ok0 || !ok1 {
		return WindowCPU{}, false
	}
	span := float64(to - from)
	busy, mine := b1.busy-b0.busy, b1.own-b0.own
	if mine <= 0 || busy <= 0 {
		return WindowCPU{}, false
	}
	w := WindowCPU{Processors: processors}
	for _, s := range own {
		if s.at >= from && s.at <= to {
			w.Samples++
		}
	}
	others := max(busy-mine, 0)
	w.AvailableProcessors = round3(max(float64(processors)-others/span, 0.01))
	w.MachineUS = round3(busy / float64(requests) / 1e3)
	w.OwnUS = round3(mine / float64(requests) / 1e3)
	w.ClientUS = round3(max(b1.kids-b0.kids, 0) / float64(requests) / 1e3)
	w.ClientRunDelayUS = round3(max(b1.kidsRunDelay-b0.kidsRunDelay, 0) / float64(requests) / 1e3)
	w.BusyShare = round3(min(busy/(span*float64(processors)), 1))
	w.BoundPerS = float64(int64(w.AvailableProcessors / w.OwnUS * 1e6))
	return w, true
}

// cpuAt is the busy times of a cpuSample, interpolated, ns.
type cpuAt struct{ busy, own, kids, kidsRunDelay float64 }

// interpolate returns the sample values at t, linear between the samples around it.
func interpolate(s []cpuSample, t int64) (cpuAt, bool) {
	var v cpuAt
	i := sort.Search(len(s), func(i int) bool { return s[i].at >= t })
	if i == len(s) {
		return v, false
	}
	if s[i].at == t {
		return cpuAt{float64(s[i].busy), float64(s[i].own), float64(s[i].kids), float64(s[i].kidsRunDelay)}, true
	}
	if i == 0 {
		return v, false
	}
	a, b := s[i-1], s[i]
	f := float64(t-a.at) / float64(b.at-a.at)
	v.busy = float64(a.busy) + f*float64(b.busy-a.busy)
	v.own = float64(a.own) + f*float64(b.own-a.own)
	v.kids = float64(a.kids) + f*float64(b.kids-a.kids)
	v.kidsRunDelay = float64(a.kidsRunDelay) + f*float64(b.kidsRunDelay-a.kidsRunDelay)
	return v, true
}

// numCPU is the machine's processor count, for the processor station.
func numCPU() int { return runtime.NumCPU() }
