package venusd

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sort"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/perflab/perflab/venusd/wire"
)

// The benchmarks print the figures as ratios measured in one process, variants
// interleaved (A B A B ...), medians over rounds. Run them with
//
//	go test ./venusd -run XXX -bench . -benchtime 1x
//
// They assert nothing: timing on a shared machine is noise-prone, and the pass/fail figures are
// read by a person (docs/venusd.md has the numbers measured on the project's VM).

const benchRounds = 5

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

type rttStats struct{ min, p50, mean float64 }

func statsOf(us []float64) rttStats {
	s := append([]float64(nil), us...)
	sort.Float64s(s)
	sum := 0.0
	for _, v := range s {
		sum += v
	}
	return rttStats{min: s[0], p50: s[len(s)/2], mean: sum / float64(len(s))}
}

// bareTCPPingPong measures n round trips of reqBytes/replyBytes messages over a plain Go TCP
// connection to the peer's echo server: the floor venusd's TCP path is compared with.
func bareTCPPingPong(tb testing.TB, addr string, n, reqBytes, replyBytes int) rttStats {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte{byte(reqBytes), byte(replyBytes)}); err != nil {
		tb.Fatal(err)
	}
	req, rep := make([]byte, reqBytes), make([]byte, replyBytes)
	us := make([]float64, 0, n)
	for i := 0; i < n+100; i++ {
		t0 := time.Now()
		if _, err := c.Write(req); err != nil {
			tb.Fatal(err)
		}
		if _, err := io.ReadFull(c, rep); err != nil {
			tb.Fatal(err)
		}
		if i >= 100 {
			us = append(us, float64(time.Since(t0))/1e3)
		}
	}
	return statsOf(us)
}

// bareSpinPingPong measures round trips between two goroutines spinning on shared words: the
// physical floor of any shared-memory transport on this machine.
func bareSpinPingPong(n int) rttStats {
	var ping, pong atomic.Uint64
	go func() {
		for i := uint64(1); i <= uint64(n+100); i++ {
			for ping.Load() != i {
			}
			pong.Store(i)
		}
	}()
	us := make([]float64, 0, n)
	for i := uint64(1); i <= uint64(n+100); i++ {
		t0 := time.Now()
		ping.Store(i)
		for pong.Load() != i {
		}
		if i > 100 {
			us = append(us, float64(time.Since(t0))/1e3)
		}
	}
	return statsOf(us)
}

func venusPing(tb testing.TB, addr string, n, reqBytes, replyBytes int) rttStats {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := RunWorkload(ctx, ClientConfig{Connect: addr, Workload: "ping", Getenv: noEnv,
		Ping: PingConfig{Requests: n, Warmup: 100, RequestBytes: reqBytes, ReplyBytes: replyBytes, KeepSamples: true}})
	if err != nil {
		tb.Fatal(err)
	}
	return statsOf(res.Ping.RTTsUS)
}

// BenchmarkSmallRoundTrip compares a small-command round trip over venusd's TCP, unix and shm
// transports with a bare Go TCP ping-pong of the same sizes (server in another process, as
// venusd's) and a bare spin ping-pong between two goroutines (the shared-memory floor).
//
// Socket round trips on these VMs depend on where the two processes run: a halted vCPU takes
// tens of µs to wake, so a round trip between processes on two vCPUs pays two wake-ups, and one
// between processes that share a vCPU pays none. Left to the scheduler, placement changes from
// run to run and so does every socket figure. The socket variants therefore run twice per
// round, pinned: both processes on CPU 0 ("same"), and client on CPU 1 with the server on CPU 0
// ("cross"); ratios compare variants of one placement. shm and the spin floor need a core each
// and run unpinned.
func BenchmarkSmallRoundTrip(b *testing.B) {
	const n, req, rep = 20000, 64, 64 // frame payload bytes; frames are 72 bytes on the wire
	p := startPeer(b)
	servers := map[string]string{"tcp": p.tcp, "unix": p.unix, "shm": p.shm}
	sockets := []string{"bare-tcp", "tcp", "unix"}
	placements := []struct {
		name           string
		client, server int // CPUs
	}{{"same", 0, 0}, {"cross", 1, 0}}
	pinnable := runtime.NumCPU() >= 2
	p50 := map[string][]float64{}
	mins := map[string][]float64{}
	record := func(name string, s rttStats) {
		p50[name] = append(p50[name], s.p50)
		mins[name] = append(mins[name], s.min)
	}
	run := func(name string) rttStats {
		switch name {
		case "bare-tcp":
			return bareTCPPingPong(b, p.bare, n, req+wire.HeaderSize, rep+wire.HeaderSize)
		case "bare-spin":
			return bareSpinPingPong(n)
		}
		return venusPing(b, servers[name], n, req, rep)
	}
	for i := 0; i < b.N; i++ {
		for r := 0; r < benchRounds; r++ {
			if pinnable {
				for _, pl := range placements {
					pinProcess(b, os.Getpid(), pl.client)
					pinProcess(b, p.pid, pl.server)
					for _, name := range sockets {
						record(name+"/"+pl.name, run(name))
					}
				}
				pinProcess(b, os.Getpid(), -1)
				pinProcess(b, p.pid, -1)
			} else {
				for _, name := range sockets {
					record(name+"/same", run(name))
				}
			}
			for _, name := range []string{"shm", "bare-spin"} {
				record(name, run(name))
			}
		}
	}
	m := func(name string) float64 { return median(p50[name]) }
	names := make([]string, 0, len(p50))
	for name := range p50 {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		b.ReportMetric(m(name), name+"-p50-µs")
		best := p50[name][0]
		for _, v := range p50[name] {
			best = min(best, v)
		}
		b.Logf("%-14s rtt p50 %7.2f µs  min %7.2f µs (medians of %d rounds; best round's p50 %.2f µs)", name, m(name), median(mins[name]), len(p50[name]), best)
	}
	for _, pl := range placements {
		if _, ok := p50["tcp/"+pl.name]; !ok {
			continue
		}
		tcp := m("tcp/" + pl.name)
		b.ReportMetric(tcp/m("bare-tcp/"+pl.name), "tcp/bare-tcp-"+pl.name)
		b.ReportMetric(m("unix/"+pl.name)/tcp, "unix/tcp-"+pl.name)
		b.Logf("%-5s placement: tcp/bare-tcp %.2f (want <= 1.3), unix/tcp %.2f (want <= 1)", pl.name, tcp/m("bare-tcp/"+pl.name), m("unix/"+pl.name)/tcp)
	}
	// shm against the faster TCP placement: the conservative ratio.
	tcpBest := m("tcp/same")
	if v, ok := p50["tcp/cross"]; ok && median(v) < tcpBest {
		tcpBest = median(v)
	}
	b.ReportMetric(tcpBest/m("shm"), "tcp/shm")
	b.Logf("tcp (faster placement)/shm %.1f (want >= 5), shm p50 %.2f µs (want <= 1), GOMAXPROCS %d",
		tcpBest/m("shm"), m("shm"), runtime.GOMAXPROCS(0))
}

// pinProcess sets the CPU affinity of every thread of process pid to cpu (-1: every CPU).
// Threads created later inherit their creator's affinity, so the whole process stays pinned.
func pinProcess(tb testing.TB, pid, cpu int) {
	tb.Helper()
	var mask [16]uint64 // 1024 CPUs
	if cpu < 0 {
		for c := 0; c < runtime.NumCPU() && c < 1024; c++ {
			mask[c/64] |= 1 << (c % 64)
		}
	} else {
		mask[cpu/64] |= 1 << (cpu % 64)
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		tb.Fatalf("pin process %d: %v", pid, err)
	}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		_, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, uintptr(tid), unsafe.Sizeof(mask), uintptr(unsafe.Pointer(&mask[0])))
		if errno != 0 && errno != syscall.ESRCH { // a thread may exit meanwhile
			tb.Fatalf("pin thread %d of %d to CPU %d: %v", tid, pid, cpu, errno)
		}
	}
}

// BenchmarkLLMModes runs the llm workload in every mode over TCP at a 2 ms emulated link delay
// (and at none), modes interleaved, and reports tokens/s and frames per token.
func BenchmarkLLMModes(b *testing.B) {
	s := startServer(b, ServerConfig{Listen: "tcp://127.0.0.1:0", Getenv: noEnv})
	for _, delay := range []time.Duration{2 * time.Millisecond, 0} {
		tps := map[Mode][]float64{}
		frames := map[Mode]float64{}
		for i := 0; i < b.N; i++ {
			for r := 0; r < 3; r++ {
				for _, m := range Modes {
					lc := DefaultLLMConfig()
					lc.Tokens = 8
					if delay == 0 {
						lc.Tokens = 32
					}
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					res, err := RunWorkload(ctx, ClientConfig{Connect: s.Addr(), Mode: m, Delay: delay, LLM: lc, Getenv: noEnv, NoVerify: true})
					cancel()
					if err != nil {
						b.Fatal(err)
					}
					tps[m] = append(tps[m], res.TokensPerS)
					frames[m] = res.PerToken.Frames
				}
			}
		}
		base := median(tps[ModeBaseline])
		for _, m := range Modes {
			b.Logf("delay %-4s %-18s %8.1f tokens/s (%.2f× baseline)  %5.1f frames/token (baseline/this %.2f×)",
				delay, m, median(tps[m]), median(tps[m])/base, frames[m], frames[ModeBaseline]/frames[m])
		}
		tag := fmt.Sprintf("d%s", delay)
		b.ReportMetric(median(tps[ModeCoalescePipeline])/base, "c+p/baseline-"+tag)
		b.ReportMetric(frames[ModeBaseline]/frames[ModeCoalesce], "frames-baseline/coalesce")
	}
}
