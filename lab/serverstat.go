package lab

import "fmt"

// processTimes reads /proc/PID/task/TID/schedstat of every thread of the processes, keyed
// "PID/TID" (readThreads). ok is false where the kernel does not say (no /proc, no schedstat,
// the processes gone).
func processTimes(pids []uint32) (map[string]threadSched, bool) {
	out := map[string]threadSched{}
	for _, pid := range pids {
		threads, _ := readThreads(int(pid))
		for tid, t := range threads {
			out[fmt.Sprintf("%d/%s", pid, tid)] = t
		}
	}
	return out, len(out) > 0
}
