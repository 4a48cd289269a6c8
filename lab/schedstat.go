package lab

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// runDelayNs sums, over the threads of this process, the time they spent runnable waiting for a
// CPU (the second field of /proc/self/task/*/schedstat: from being woken or preempted to
// running, a halted CPU's wake-up included), ns. ok is false where the kernel does not say
// (no /proc, or a kernel without schedstat).
func runDelayNs() (ns int64, ok bool) {
	dirs, err := filepath.Glob("/proc/self/task/*/schedstat")
	if err != nil || len(dirs) == 0 {
		return 0, false
	}
	for _, p := range dirs {
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
		ns += v
		ok = true
	}
	return ns, ok
}
