package lab

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// runDelays reads, for each thread of this process, the time it spent runnable waiting for a
// CPU (the second field of /proc/self/task/TID/schedstat: from being woken or preempted to
// running, a halted CPU's wake-up included), ns by thread id. ok is false where the kernel does
// not say (no /proc, or a kernel without schedstat).
func runDelays() (ns map[string]int64, ok bool) {
	paths, err := filepath.Glob("/proc/self/task/*/schedstat")
	if err != nil || len(paths) == 0 {
		return nil, false
	}
	ns = make(map[string]int64, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // a thread that exited meanwhile
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || v < 0 {
			continue
		}
		ns[filepath.Base(filepath.Dir(p))] = v
	}
	return ns, len(ns) > 0
}

// runDelaySince sums the run delay the threads alive now have had since before (a thread new
// since then counts whole; one that exited meanwhile is not counted), ns.
func runDelaySince(before map[string]int64) (int64, bool) {
	after, ok := runDelays()
	if !ok {
		return 0, false
	}
	var sum int64
	for tid, v := range after {
		if d := v - before[tid]; d > 0 {
			sum += d
		}
	}
	return sum, true
}
