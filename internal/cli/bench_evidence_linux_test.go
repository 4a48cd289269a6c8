//go:build linux

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perflab/perflab/lab"
)

// TestBenchEvidence runs a small sweep with the built command, recording each socket point's
// clients and server with the eBPF scheduler evidence, and checks each round trip's own wake-up
// and run-queue delay: every round trip the server served is in the trace, each side's delay
// per round trip is within the RTT, the server's side is paired for every request, and every
// share of the RTT's rise is within 0..100% or warned. shm, whose round trips move no data
// through sockets, has none. It asserts counts and relations, never times.
func TestBenchEvidence(t *testing.T) {
	requireEBPF(t)
	dir := t.TempDir()
	out, res := benchSweep(t, dir, "tcp,unix,shm", "1,2")
	if res.EvidenceNote != "" {
		t.Fatalf("evidence note with eBPF usable: %s", res.EvidenceNote)
	}
	if len(res.Points) != 6 {
		t.Fatalf("%d points, want 6", len(res.Points))
	}
	warned := func(p *lab.Point) bool {
		for _, w := range res.Warnings {
			if strings.HasPrefix(w, p.Label()+": kernel evidence: ") {
				return true
			}
		}
		return false
	}
	for i := range res.Points {
		p := &res.Points[i]
		var ev *lab.RunQueueEvidence
		if p.RunQueue != nil {
			ev = p.RunQueue.Evidence
		}
		if p.Transport == "shm" {
			if ev != nil {
				t.Errorf("%s: kernel evidence for shm, whose round trips move no data through sockets", p.Label())
			}
			continue
		}
		if ev == nil {
			t.Fatalf("%s: no kernel evidence", p.Label())
		}
		if _, err := os.Stat(filepath.Join(dir, strings.NewReplacer("/", "-").Replace(p.Label())+".evidence.plt")); err != nil {
			t.Errorf("%s: the evidence trace was not kept with -o: %v", p.Label(), err)
		}
		// The server served every round trip of the point, warm-up included; the trace must
		// have paired each one, and the server's side each request.
		if ev.ServerRequests <= 0 || int64(ev.RoundTrips) != ev.ServerRequests {
			t.Errorf("%s: %d round trips traced, the server served %d", p.Label(), ev.RoundTrips, ev.ServerRequests)
		}
		if int64(ev.ServerRoundTrips) != ev.ServerRequests || int64(ev.ClientRoundTrips) != ev.ServerRequests {
			t.Errorf("%s: paired %d requests with the server's reads and %d replies with the clients', of %d", p.Label(),
				ev.ServerRoundTrips, ev.ClientRoundTrips, ev.ServerRequests)
		}
		if ev.LostEvents != 0 && !warned(p) {
			t.Errorf("%s: %d events lost and no warning", p.Label(), ev.LostEvents)
		}
		if ev.RTTUS <= 0 || ev.ClientUSPerRT < 0 || ev.ServerUSPerRT < 0 {
			t.Errorf("%s: RTT %v µs, clients %v, server %v µs per round trip", p.Label(), ev.RTTUS, ev.ClientUSPerRT, ev.ServerUSPerRT)
		}
		// Each delay lies inside its round trip: per round trip, within the RTT, and the two
		// sides' delays of one round trip do not overlap (the request's from its arrival to the
		// server's read, the reply's from its arrival to the client's read), so their sum is
		// within it too.
		if ev.ClientUSPerRT > ev.RTTUS || ev.ServerUSPerRT > ev.RTTUS || ev.USPerRT > ev.RTTUS+0.01 {
			t.Errorf("%s: delays clients %v + server %v = %v µs per round trip over the RTT %v µs", p.Label(), ev.ClientUSPerRT, ev.ServerUSPerRT, ev.USPerRT, ev.RTTUS)
		}
		if d := ev.USPerRT - ev.ClientUSPerRT - ev.ServerUSPerRT; d > 0.002 || d < -0.002 {
			t.Errorf("%s: us_per_rt %v is not clients %v + server %v", p.Label(), ev.USPerRT, ev.ClientUSPerRT, ev.ServerUSPerRT)
		}
		if ev.ClientWakeupUSPerRT+ev.ClientRunQueueUSPerRT-ev.ClientUSPerRT > 0.002 || ev.NoWakeup > ev.RoundTrips {
			t.Errorf("%s: clients' wake-up %v + run queue %v µs is not %v, or %d of %d without a wake-up", p.Label(),
				ev.ClientWakeupUSPerRT, ev.ClientRunQueueUSPerRT, ev.ClientUSPerRT, ev.NoWakeup, ev.RoundTrips)
		}
		if p.Clients == 1 {
			if ev.Rise != nil {
				t.Errorf("%s: a rise at the series' first point", p.Label())
			}
			continue
		}
		r := ev.Rise
		if r == nil {
			t.Fatalf("%s: no rise from the first point", p.Label())
		}
		if r.Of != "clients and server" {
			t.Errorf("%s: the rise is the %s', want both sides'", p.Label(), r.Of)
		}
		if (r.RTTRiseUS < 2 || r.Share < 0 || r.Share > 1) && !warned(p) {
			t.Errorf("%s: RTT rise %v µs, share %v, and no warning", p.Label(), r.RTTRiseUS, r.Share)
		}
		if r.RTTRiseUS >= 2 && !strings.Contains(string(out), "of the traced RTT rise from 1 to 2 clients") {
			t.Errorf("%s: the table's line on the traced RTT rise does not match the rise of %v µs:\n%s", p.Label(), r.RTTRiseUS, out)
		}
	}
	if !strings.Contains(string(out), "kernel evidence (eBPF") {
		t.Errorf("the table has no kernel evidence line:\n%s", out)
	}
	if !strings.Contains(string(out), "eBPF wake-up µs/RT") || !strings.Contains(string(out), "eBPF of RTT rise") {
		t.Errorf("the scaling table has no kernel evidence columns:\n%s", out)
	}
}
