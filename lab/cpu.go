package lab

import (
	"fmt"
	"runtime"
	"syscall"
	"time"

	"github.com/perflab/perflab/reports"
	"github.com/perflab/perflab/venusd/transport"
)

// pointWarmup is the round trips each client of a point makes before it measures.
const pointWarmup = 200

// cpuShortThreads is how many of perflab's threads may wait for a CPU on average before a shm
// point says that its pollers lacked CPUs: half a thread, well above what a machine with a CPU
// free for each poller shows (wake-ups of a few µs).
const cpuShortThreads = 0.5

// spinPaysShare is the largest share of shm ring waits that may end in a futex sleep for
// polling to count as paying: past it, most waits burn their poll and still pay the wake-up.
const spinPaysShare = 0.5

// ShmSpin is how the shm ring waits of one point went: the clients waiting for replies, the
// server's readers waiting for requests and its writers for room, all in perflab's process.
type ShmSpin struct {
	Waits int64 `json:"waits"` // a ring found empty to read or full to write
	// PolledShare is the share of waits that ended while polling the ring or yielding between
	// polls: no system call, no wake-up.
	PolledShare float64 `json:"polled_share"`
	// SleptShare is the share that ended only after a futex sleep and the peer's wake-up call.
	SleptShare float64 `json:"slept_share"`
	// LateShare is the share the poll caught only after 100 µs, longer than a wake-up takes:
	// the poller had lost its CPU (part of PolledShare).
	LateShare float64 `json:"late_share"`
	// BackedOffShare is the share that polled only briefly because polling had stopped paying
	// on that ring (eight waits in a row slept or were late).
	BackedOffShare float64 `json:"backed_off_share"`
	// CPUWaitThreads is how many of perflab's threads (and the server process's, when it runs
	// apart) were runnable but waiting for a CPU, on average over the point (their schedstat
	// run delay over its wall time): above 0.5, the pollers and the threads with work do not
	// all find a free CPU.
	CPUWaitThreads float64 `json:"cpu_wait_threads"`
	// Pollers is how many goroutines wait on a ring at once at most (each client's and each
	// server reader's), CPUs the processors Go runs them on (GOMAXPROCS).
	Pollers int `json:"pollers"`
	CPUs    int `json:"cpus"`
	// Pays is false when more than half of the waits slept anyway or were caught late: the polls
	// burnt CPU without saving the wake-up. CPUsShort is true when CPUWaitThreads is above
	// cpuShortThreads: fewer CPUs were free than the pollers and the threads with work needed
	// (other programs on the machine, or more pollers than CPUs), so a poller that lost its CPU
	// held up its round trip. Note says which, in words; either gives the point a warning.
	Pays      bool   `json:"pays"`
	CPUsShort bool   `json:"cpus_short"`
	Note      string `json:"note,omitempty"`
}

// usage is the process's CPU time and the wall clock at one instant.
type usage struct {
	cpu  time.Duration // user and system, all threads
	wall time.Time
	shm  transport.ShmWaitStats
}

func readUsage() usage {
	u := usage{wall: time.Now(), shm: transport.ShmWaits()}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		u.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return u
}

// setUsage sets p's CPU figures, and for shm its ring waits, from the usage before and after
// the point; roundTrips counts the warm-up's too, since the CPU time includes them; runDelay is
// the run delay of perflab's threads during the point, ns (-1: unknown).
func setUsage(p *Point, before, after usage, roundTrips, runDelay int64) {
	wall := after.wall.Sub(before.wall)
	cpu := after.cpu - before.cpu
	if wall <= 0 || cpu <= 0 {
		return
	}
	p.CPUCores = round3(cpu.Seconds() / wall.Seconds())
	if roundTrips > 0 {
		p.CPUUSPerRT = round3(float64(cpu) / 1e3 / float64(roundTrips))
	}
	if p.Transport != "shm" {
		return
	}
	d := after.shm.Sub(before.shm)
	s := &ShmSpin{Waits: d.Waits, Pollers: 2 * p.Clients, CPUs: runtime.GOMAXPROCS(0), Pays: true}
	if d.Waits > 0 {
		s.PolledShare = round3(float64(d.Polled+d.Yielded) / float64(d.Waits))
		s.SleptShare = round3(float64(d.Slept) / float64(d.Waits))
		s.LateShare = round3(float64(d.Late) / float64(d.Waits))
		s.BackedOffShare = round3(float64(d.BackedOff) / float64(d.Waits))
		s.Pays = float64(d.Slept+d.Late)/float64(d.Waits) <= spinPaysShare
	}
	if runDelay >= 0 {
		s.CPUWaitThreads = round3(float64(runDelay) / float64(wall))
		s.CPUsShort = s.CPUWaitThreads > cpuShortThreads
	}
	s.Note = spinNote(s)
	p.ShmSpin = s
}

// spinNote says, in words, whether polling could pay at a point and whether it did.
func spinNote(s *ShmSpin) string {
	var note string
	if s.Pollers > s.CPUs {
		note = fmt.Sprintf("%d ring pollers (a client and a server reader per connection) on %d CPUs: they take turns, yielding every 64 polls", s.Pollers, s.CPUs)
	}
	if !s.Pays {
		if note != "" {
			note += "; "
		}
		note += fmt.Sprintf("polling did not pay: %s of the ring waits slept on the futex after their poll and %s were caught only after 100 µs; the rings backed off (%s of waits polled only briefly before sleeping)",
			reports.Share(s.SleptShare), reports.Share(s.LateShare), reports.Share(s.BackedOffShare))
	}
	if s.CPUsShort {
		if note != "" {
			note += "; "
		}
		note += fmt.Sprintf("fewer CPUs were free than pollers: perflab's threads waited for a CPU, %s of them on average (other programs on the machine, or more pollers than CPUs), and a poller that loses its CPU holds up its round trip, so the figures vary from run to run and polling may lose to sockets here", reports.Num(s.CPUWaitThreads))
	}
	return note
}
