package link

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkSleepBusy measures how late SleepUntil wakes (0.5 ms sleeps, median and 99th
// percentile in µs) while as many goroutines as there are processors poll in a loop that
// yields (runtime.Gosched), as an shm ring's reader does while it waits: the runtime's poller,
// through which the timerfd is read, is then polled only by sysmon.
func BenchmarkSleepBusy(b *testing.B) {
	for _, spinners := range []int{0, runtime.GOMAXPROCS(0)} {
		b.Run(map[bool]string{true: "idle", false: "spinning"}[spinners == 0], func(b *testing.B) {
			var stop atomic.Bool
			var wg sync.WaitGroup
			for i := 0; i < spinners; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for !stop.Load() {
						runtime.Gosched()
					}
				}()
			}
			late := make([]float64, 0, b.N)
			for i := 0; i < b.N; i++ {
				at := time.Now().Add(500 * time.Microsecond)
				SleepUntil(at)
				late = append(late, float64(time.Since(at))/1e3)
			}
			stop.Store(true)
			wg.Wait()
			slices.Sort(late)
			b.ReportMetric(late[len(late)/2], "late-p50-µs")
			b.ReportMetric(late[len(late)*99/100], "late-p99-µs")
		})
	}
}
