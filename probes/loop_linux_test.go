//go:build linux && amd64

package probes

import (
	"os/exec"
	"sort"
	"syscall"
	"testing"
	"unsafe"

	"github.com/perflab/perflab/trace"
)

// waitRounds is how many times the waits helper makes each wait call.
const waitRounds = 50

// helperWaits makes waitRounds calls of each wait system call on a pipe that has a byte to
// read, so that each call returns at once with one ready descriptor, and waitRounds
// io_uring_enter calls on a descriptor that is not a ring (EOPNOTSUPP). It counts the calls by op.
func helperWaits(c *helperCounts) error {
	var p [2]int
	if err := syscall.Pipe(p[:]); err != nil {
		return err
	}
	if _, err := syscall.Write(p[1], []byte{1}); err != nil {
		return err
	}
	ep, err := syscall.EpollCreate1(0)
	if err != nil {
		return err
	}
	if err := syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, p[0], &syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(p[0])}); err != nil {
		return err
	}
	var evs [4]syscall.EpollEvent
	type pollfd struct {
		fd            int32
		events, revts int16
	}
	pfd := pollfd{fd: int32(p[0]), events: 1} // POLLIN
	var ts syscall.Timespec
	tv := syscall.Timeval{}
	call := func(op string, nr uintptr, args ...uintptr) error {
		var a [6]uintptr
		copy(a[:], args)
		r, _, e := syscall.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
		if op == "io_uring_enter" {
			if e == 0 {
				return syscall.EINVAL // a pipe is not a ring
			}
		} else if e != 0 || r != 1 {
			return syscall.Errno(e)
		}
		c.Ops[op]++
		return nil
	}
	for i := 0; i < waitRounds; i++ {
		var set [16]uint64 // fd_set
		set[p[0]/64] |= 1 << (uint(p[0]) % 64)
		set2 := set
		for _, w := range []struct {
			op   string
			nr   uintptr
			args []uintptr
		}{
			{"epoll_wait", syscall.SYS_EPOLL_WAIT, []uintptr{uintptr(ep), uintptr(unsafe.Pointer(&evs[0])), 4, 0}},
			{"epoll_pwait", syscall.SYS_EPOLL_PWAIT, []uintptr{uintptr(ep), uintptr(unsafe.Pointer(&evs[0])), 4, 0, 0, 8}},
			{"epoll_pwait2", 441, []uintptr{uintptr(ep), uintptr(unsafe.Pointer(&evs[0])), 4, uintptr(unsafe.Pointer(&ts)), 0, 8}},
			{"poll", syscall.SYS_POLL, []uintptr{uintptr(unsafe.Pointer(&pfd)), 1, 0}},
			{"ppoll", syscall.SYS_PPOLL, []uintptr{uintptr(unsafe.Pointer(&pfd)), 1, uintptr(unsafe.Pointer(&ts)), 0, 8}},
			{"select", syscall.SYS_SELECT, []uintptr{uintptr(p[0] + 1), uintptr(unsafe.Pointer(&set[0])), 0, 0, uintptr(unsafe.Pointer(&tv))}},
			{"pselect6", syscall.SYS_PSELECT6, []uintptr{uintptr(p[0] + 1), uintptr(unsafe.Pointer(&set2[0])), 0, 0, uintptr(unsafe.Pointer(&ts)), 0}},
			{"io_uring_enter", 426, []uintptr{uintptr(p[1]), 0, 0, 0, 0, 0}},
		} {
			if err := call(w.op, w.nr, w.args...); err != nil {
				return err
			}
		}
	}
	return nil
}

// TestWaitsExact records every wait call of the helper through each hook: each call once,
// with its result, and nothing lost. The Go runtime of the helper makes epoll_pwait calls of
// its own, so for epoll_pwait only the calls with one ready descriptor are counted at least.
func TestWaitsExact(t *testing.T) {
	for _, hook := range []string{WaitHookTracepoint, WaitHookBTF} {
		t.Run(hook, func(t *testing.T) {
			p := requireProbes(t, Config{PayloadBytes: 0, Waits: true, WaitHook: hook})
			rec, c := recordHelper(t, p, "waits", "")
			got := map[string]int{}
			for _, e := range rec.events {
				if !e.Op.IsWait() {
					continue
				}
				if int(e.PID) != c.PID || e.Conn != 0 || e.Dir != trace.DirNone || e.Dur < 0 {
					t.Fatalf("wait event %+v: want pid %d, no connection, no direction", e, c.PID)
				}
				switch {
				case e.Op == trace.OpIoUringEnter && e.Errno != 0:
					got[e.Op.String()]++
				case e.Errno == 0 && e.Bytes == 1:
					got[e.Op.String()]++
				}
			}
			for _, op := range waitCalls {
				want := c.Ops[op]
				if want != waitRounds {
					t.Fatalf("helper made %d %s calls, want %d", want, op, waitRounds)
				}
				if got[op] != want && !(op == "epoll_pwait" && got[op] >= want) {
					t.Errorf("%s: recorded %d calls with the helper's result, it made %d", op, got[op], want)
				}
			}
			if rec.lost != 0 {
				t.Errorf("lost %d events", rec.lost)
			}
			n, err := p.Counts()
			if err != nil {
				t.Fatal(err)
			}
			if n.Produced != uint64(len(rec.events))+n.LostEvents {
				t.Errorf("produced %d, recorded %d + lost %d", n.Produced, len(rec.events), n.LostEvents)
			}
		})
	}
}

// BenchmarkLoopNeighbours measures what the loop probe costs processes that are not recorded,
// as BenchmarkHookChoice does for empty programs: dd if=/dev/zero of=/dev/null bs=1
// count=1000000 (two million read/write system calls, no wait call), alternating runs with
// the socket probe alone and with the socket and loop probes (9 rounds, medians of dd's CPU
// time with over without), for each way the loop probe attaches.
//
// Run it with: go test -run '^$' -bench LoopNeighbours -benchtime 1x ./probes
func BenchmarkLoopNeighbours(b *testing.B) {
	if err := CheckPrivileges(); err != nil {
		b.Skip(err)
	}
	dd := func() float64 {
		cmd := exec.Command("dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=1000000")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("dd: %v: %s", err, out)
		}
		return (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	}
	const rounds = 9
	for _, hook := range []string{WaitHookTracepoint, WaitHookBTF} {
		b.Run(hook, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				var ratios, added []float64
				for r := 0; r < rounds; r++ {
					p, err := Open(Config{PayloadBytes: -1})
					if err != nil {
						b.Skip(err)
					}
					c0 := dd()
					p.Close()
					p, err = Open(Config{PayloadBytes: -1, Waits: true, WaitHook: hook})
					if err != nil {
						b.Fatal(err)
					}
					c1 := dd()
					p.Close()
					ratios = append(ratios, c1/c0)
					added = append(added, (c1-c0)/2e6*1e9)
				}
				sort.Float64s(ratios)
				sort.Float64s(added)
				b.ReportMetric(ratios[rounds/2], "dd_cpu_ratio")
				b.ReportMetric(added[rounds/2], "added_ns/syscall")
			}
		})
	}
}
