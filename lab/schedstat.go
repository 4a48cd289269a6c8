package lab

import "os"

// runDelays reads the kernel's schedstat times of every thread of this process (processTimes):
// its second field, the time a thread spent runnable waiting for a CPU (from being woken or
// preempted to running, a halted CPU's wake-up included), is the figure runDelaySince sums. ok
// is false where the kernel does not say (no /proc, or a kernel without schedstat).
func runDelays() (map[string]cpuTimes, bool) {
	return processTimes([]uint32{uint32(os.Getpid())})
}

// runDelaySince sums the run delay the threads alive now have had since before (a thread new
// since then counts whole; one that exited meanwhile is not counted), ns.
func runDelaySince(before map[string]cpuTimes) (int64, bool) {
	after, ok := runDelays()
	if !ok {
		return 0, false
	}
	return timesSince(before, after).runDelay, true
}
