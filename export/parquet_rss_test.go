package export

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/perflab/perflab/fixtures"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// The export's memory is measured in a child process (this test binary run again), whose peak
// RSS the kernel reports when it exits: the parent's own heap, and the trace generator's, stay
// out of the figure.
const rssChildEnv = "PERFLAB_PARQUET_RSS_CHILD" // "TRACE DIR": export TRACE to DIR and exit

func TestMain(m *testing.M) {
	if v := os.Getenv(rssChildEnv); v != "" {
		tr, dir, _ := strings.Cut(v, " ")
		if _, err := Parquet(dir, protocol.Files([]string{tr}, nil), ParquetOptions{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// pingPongFile writes a ping-pong trace of n round trips (2n events, 16-byte payload heads) to
// path, streaming.
func pingPongFile(tb testing.TB, path string, n int) {
	tb.Helper()
	w, err := trace.Create(path, fixtures.Meta("ebpf", "venus"), fixtures.Options())
	if err != nil {
		tb.Fatal(err)
	}
	if err := fixtures.PingPong(w, n, 1); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
}

// exportRSS exports the trace at path in a child process and returns its peak RSS in bytes.
func exportRSS(tb testing.TB, path, dir string) int64 {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), rssChildEnv+"="+path+" "+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("export child: %v: %s", err, out)
	}
	return cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss * 1024
}

// BenchmarkParquetRSS exports ping-pong traces of growing size and reports the export's peak
// RSS (rss-MB) and its speed: the RSS must stay flat, well under 100 MB, as the trace grows.
// PERFLAB_PARQUET_EVENTS=N1,N2,... sets the sizes in events (default 200000,2000000); each
// trace is written to the test's temporary directory first (about 7 bytes an event).
func BenchmarkParquetRSS(b *testing.B) {
	sizes := []int{200_000, 2_000_000}
	if v := os.Getenv("PERFLAB_PARQUET_EVENTS"); v != "" {
		sizes = sizes[:0]
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n < 2 {
				b.Fatalf("PERFLAB_PARQUET_EVENTS: %q", f)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			path := filepath.Join(dir, "pingpong.plt")
			pingPongFile(b, path, n/2)
			var rss int64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				rss = max(rss, exportRSS(b, path, filepath.Join(dir, "out")))
			}
			b.ReportMetric(float64(rss)/(1<<20), "rss-MB")
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// TestParquetRSSBounded exports a trace of 200k events in a child process and checks its peak
// RSS against the 100 MB bound (memory, not time: it does not depend on the machine's load).
func TestParquetRSSBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and exports a 200k-event trace")
	}
	if raceEnabled {
		t.Skip("the race detector multiplies memory; the bound is for the export as built")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "pingpong.plt")
	pingPongFile(t, path, 100_000)
	rss := exportRSS(t, path, filepath.Join(dir, "out"))
	t.Logf("peak RSS %.1f MB exporting 200000 events", float64(rss)/(1<<20))
	if rss > 100<<20 {
		t.Errorf("peak RSS %d MB, want at most 100", rss>>20)
	}
}
