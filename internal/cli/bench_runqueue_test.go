//go:build linux

package cli

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perflab/perflab/lab"
)

// TestBenchRunQueueBySide runs a small sweep with the built command (the test binary doubling as
// perflab), whose server runs in a process of its own (`perflab venus serve --stats`), and checks
// that every point splits its run queue between the clients' process and the server's over the
// load window, that the sums and rises are consistent, that every figure it cannot stand behind
// is warned, and that the table says how much of the RTT's rise the run queue accounts for. It
// asserts counts and relations, never times.
func TestBenchRunQueueBySide(t *testing.T) {
	out, res := benchSweep(t, t.TempDir(), "unix,shm", "1,2,3")
	if len(res.Points) != 6 {
		t.Fatalf("%d points, want 6", len(res.Points))
	}
	warned := func(p *lab.Point, what string) bool {
		for _, w := range res.Warnings {
			if strings.HasPrefix(w, p.Label()+": run queue: ") && strings.Contains(w, what) {
				return true
			}
		}
		return false
	}
	var server float64
	first := map[string]*lab.Point{}
	for i := range res.Points {
		p := &res.Points[i]
		rq := p.RunQueue
		if rq == nil {
			t.Fatalf("%s: no run queue figures (schedstat is on this kernel)", p.Label())
		}
		if !rq.Separate {
			t.Errorf("%s: the server did not run in a process of its own", p.Label())
		}
		if rq.ClientUSPerRT < 0 || rq.ServerUSPerRT < 0 || math.Abs(rq.USPerRT-rq.ClientUSPerRT-rq.ServerUSPerRT) > 0.002 || p.RunQueueUS != rq.USPerRT {
			t.Errorf("%s: parts %+v do not add up to runqueue_us_per_rt %v", p.Label(), *rq, p.RunQueueUS)
		}
		if rq.WindowS <= 0 || rq.WindowS > 10 {
			t.Errorf("%s: window %v s", p.Label(), rq.WindowS)
		}
		if !rq.LoadWindow && !warned(p, "whole point") {
			t.Errorf("%s: figures over the whole point without a warning", p.Label())
		}
		if rq.USPerRT > p.RTTUS.Mean && !warned(p, "exceed the mean RTT") {
			t.Errorf("%s: run queue %v µs above the mean RTT %v µs without a warning", p.Label(), rq.USPerRT, p.RTTUS.Mean)
		}
		if (rq.Warning != "") != warned(p, "") {
			t.Errorf("%s: point warning %q and sweep warnings %q disagree", p.Label(), rq.Warning, res.Warnings)
		}
		server += rq.ServerUSPerRT
		// Every round trip wakes or preempts some thread of the clients' side and of the
		// server's: both processes' threads were put on a CPU during the window.
		if rq.ClientSwitchInsPerRT <= 0 || rq.ServerSwitchInsPerRT <= 0 {
			t.Errorf("%s: switch-ins per round trip %v (clients), %v (server), want both above 0", p.Label(), rq.ClientSwitchInsPerRT, rq.ServerSwitchInsPerRT)
		}
		// Each side's wait per round trip is its switch-ins per round trip times its wait per
		// switch-in, up to the rounding of each to 0.001: a rounded switch-in count is off by at
		// most 0.0005, which a long wait per switch-in multiplies (0.02 switch-ins × 219 µs can
		// differ from the unrounded product by 0.11 µs).
		for _, side := range []struct{ perRT, switchIns, perSwitchIn float64 }{
			{rq.ClientUSPerRT, rq.ClientSwitchInsPerRT, rq.ClientUSPerSwitchIn}, {rq.ServerUSPerRT, rq.ServerSwitchInsPerRT, rq.ServerUSPerSwitchIn}} {
			bound := 0.0005*side.perSwitchIn + 0.0005*side.switchIns + 0.0005 + 1e-9
			if got := side.switchIns * side.perSwitchIn; math.Abs(got-side.perRT) > bound {
				t.Errorf("%s: %v switch-ins × %v µs = %v µs per round trip, want %v", p.Label(), side.switchIns, side.perSwitchIn, got, side.perRT)
			}
		}
		f, ok := first[p.Transport]
		if !ok {
			first[p.Transport] = p
			if rq.Rise != nil {
				t.Errorf("%s: the series' first point has a rise", p.Label())
			}
			continue
		}
		r := rq.Rise
		if r == nil || r.FromClients != 1 {
			t.Fatalf("%s: rise %+v, want one from 1 client", p.Label(), r)
		}
		if math.Abs(r.RTTRiseUS-(p.RTTUS.Mean-f.RTTUS.Mean)) > 0.002 || math.Abs(r.RunQueueRiseUS-(rq.USPerRT-f.RunQueue.USPerRT)) > 0.002 {
			t.Errorf("%s: rise %+v against the first point's RTT %v and run queue %v", p.Label(), *r, f.RTTUS.Mean, f.RunQueue.USPerRT)
		}
		if (r.Share < 0 || r.Share > 1 || r.RTTRiseUS < 2) && rq.Warning == "" {
			t.Errorf("%s: share %v of a rise of %v µs without a warning", p.Label(), r.Share, r.RTTRiseUS)
		}
		if r.RTTRiseUS >= 2 && !strings.Contains(string(out), fmt.Sprintf("of the RTT rise from 1 to %d clients (", p.Clients)) {
			t.Errorf("%s: the table lacks the sentence of the RTT rise:\n%s", p.Label(), out)
		}
	}
	if server <= 0 {
		t.Errorf("the server's threads never waited for a CPU at any point: its process was not read")
	}
	for _, want := range []string{"clients µs/RT", "server µs/RT", "of RTT rise", "a process of its own"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// The HTML page carries the same tables: the run queue by side, its share of the RTT's
	// rise, and the transports side by side with the verdict on shm.
	page, err := perflab(t, "", "bench", "--transports", "unix,shm", "--clients", "1,2", "--duration", "100ms", "--format", "html").Output()
	if err != nil {
		t.Fatalf("perflab bench --format html: %v", err)
	}
	for _, want := range []string{"<!DOCTYPE html>", "<th class=\"r\">server µs/RT</th>", "of RTT rise", "Transports at each client count", "shm was the fastest transport at "} {
		if !strings.Contains(string(page), want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
	// No server process outlives the sweep.
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, c := range procs {
		b, err := os.ReadFile(c)
		if err == nil && strings.HasPrefix(string(b), os.Args[0]+"\x00venus\x00serve\x00") && strings.Contains(string(b), "--stats") {
			t.Errorf("a server process is left: %s %q", c, b)
		}
	}
}

// benchSweep runs `perflab bench -o dir` (the test binary doubling as perflab) over the
// transports and client counts for 200 ms a point, and returns its table and its bench.json.
func benchSweep(t *testing.T, dir, transports, clients string) ([]byte, lab.Result) {
	t.Helper()
	cmd := perflab(t, "", "bench", "--transports", transports, "--clients", clients, "--duration", "200ms", "-o", dir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("perflab bench: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "bench.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res lab.Result
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	return out, res
}
