package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cpuTimes is what the kernel counts of a set of threads (schedstat): the time they ran on a
// processor and the time they waited runnable for one (woken or preempted, until they ran), ns.
type cpuTimes struct {
	onCPU, runDelay int64
}

// processTimes reads /proc/PID/task/TID/schedstat of every thread of the processes, by thread
// id. ok is false where the kernel does not say (no /proc, no schedstat, the process gone).
func processTimes(pids []uint32) (map[string]cpuTimes, bool) {
	out := map[string]cpuTimes{}
	for _, pid := range pids {
		paths, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
		if err != nil {
			return nil, false
		}
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				continue // a thread that exited meanwhile
			}
			f := strings.Fields(string(b))
			if len(f) < 2 {
				continue
			}
			on, err1 := strconv.ParseInt(f[0], 10, 64)
			wait, err2 := strconv.ParseInt(f[1], 10, 64)
			if err1 != nil || err2 != nil || on < 0 || wait < 0 {
				continue
			}
			out[fmt.Sprintf("%d/%s", pid, filepath.Base(filepath.Dir(p)))] = cpuTimes{on, wait}
		}
	}
	return out, len(out) > 0
}

// timesSince sums how much the threads alive in after ran and waited since before (a thread
// new since then counts whole; one that exited meanwhile is not counted), ns.
func timesSince(before, after map[string]cpuTimes) cpuTimes {
	var sum cpuTimes
	for tid, a := range after {
		b := before[tid]
		sum.onCPU += max(a.onCPU-b.onCPU, 0)
		sum.runDelay += max(a.runDelay-b.runDelay, 0)
	}
	return sum
}
