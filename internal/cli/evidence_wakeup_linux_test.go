//go:build linux

package cli

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/perflab/perflab/internal/ggmlpeer"
)

// The "wakeup" evidence target: a ggml-rpc client whose thread shares its CPU with a spinner
// that has priority over it, so that each reply that arrives while the spinner runs wakes the
// client onto a run queue, where it sits until the spinner sleeps.
const (
	wakeupCalls = 300                    // round trips the client makes
	wakeupSpin  = 200 * time.Microsecond // the spinner's busy stretch, then
	wakeupNap   = 100 * time.Microsecond // its sleep, in which the client gets the CPU
	wakeupCPU   = 1                      // the CPU of the client and the spinner; the rest runs on CPU 0
)

// wakeupTarget runs a ggml-rpc server (internal/ggmlpeer) on loopback TCP, its threads on CPU 0,
// and a client on CPU wakeupCPU that reads its replies with blocking system calls on a thread of
// its own, next to a SCHED_FIFO spinner (nice -20 where real-time priority is refused) on the same
// CPU: a woken client never preempts it, so its wake-ups wait for the spinner's sleep.
func wakeupTarget() error {
	if !wakeupCPUsAllowed() {
		return fmt.Errorf("wakeup target: needs CPUs 0 and %d", wakeupCPU)
	}
	if err := pinAll(0); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	srv := &ggmlpeer.Server{Version: ggmlpeer.Version{Major: 3}}
	go srv.Serve(ln)

	stop := make(chan struct{})
	spinning := make(chan error, 1)
	go spinner(stop, spinning)
	if err := <-spinning; err != nil {
		return err
	}
	defer close(stop)

	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // the thread ends with the goroutine: it is pinned for good
		done <- wakeupClient(ln.Addr().String())
	}()
	return <-done
}

// wakeupCPUsAllowed reports whether this process may run on CPU 0 and on wakeupCPU.
func wakeupCPUsAllowed() bool {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return false
	}
	return set.IsSet(0) && set.IsSet(wakeupCPU)
}

// pinAll pins every thread of this process to cpu; threads made later inherit it.
func pinAll(cpu int) error {
	tasks, err := filepath.Glob("/proc/self/task/*")
	if err != nil {
		return err
	}
	var set unix.CPUSet
	set.Set(cpu)
	for _, t := range tasks {
		tid, err := strconv.Atoi(filepath.Base(t))
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("pin thread %d to CPU %d: %w", tid, cpu, err)
		}
	}
	return nil
}

// pinSelf pins the calling thread to cpu.
func pinSelf(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pin to CPU %d: %w", cpu, err)
	}
	return nil
}

// spinner busies CPU wakeupCPU for wakeupSpin, sleeps wakeupNap, and so on until stop closes,
// on a thread of its own with priority over the client's. It says on ready when it runs.
func spinner(stop <-chan struct{}, ready chan<- error) {
	runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
	if err := pinSelf(wakeupCPU); err != nil {
		ready <- err
		return
	}
	if err := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 1}, 0); err != nil {
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, 0, -20); err != nil {
			ready <- fmt.Errorf("spinner priority: %w", err)
			return
		}
	}
	ready <- nil
	nap := syscall.NsecToTimespec(int64(wakeupNap))
	for {
		select {
		case <-stop:
			return
		default:
		}
		for t0 := time.Now(); time.Since(t0) < wakeupSpin; {
		}
		syscall.Nanosleep(&nap, nil)
	}
}

// wakeupClient makes wakeupCalls round trips to addr from the calling thread, pinned to
// wakeupCPU, reading with blocking system calls so that each reply wakes this very thread.
func wakeupClient(addr string) error {
	if err := pinSelf(wakeupCPU); err != nil {
		return err
	}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetNoDelay(true)
	f, err := conn.(*net.TCPConn).File() // a blocking descriptor: read(2) sleeps in the kernel
	if err != nil {
		return err
	}
	defer f.Close()
	c, err := ggmlpeer.Dial(blockingFD(f.Fd()))
	if err != nil {
		return err
	}
	for i := 0; i < wakeupCalls; i++ {
		if _, err := c.Call(ggmlpeer.CmdDeviceCount, nil); err != nil {
			return err
		}
	}
	return nil
}

// blockingFD reads and writes a blocking descriptor with plain system calls on the calling
// thread.
type blockingFD uintptr

func (fd blockingFD) Read(p []byte) (int, error) {
	for {
		n, err := syscall.Read(int(fd), p)
		if err == syscall.EINTR {
			continue
		}
		if n == 0 && err == nil && len(p) > 0 {
			return 0, errors.New("connection closed")
		}
		return max(n, 0), err
	}
}

func (fd blockingFD) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		n, err := syscall.Write(int(fd), p[done:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return done, err
		}
		done += n
	}
	return done, nil
}
