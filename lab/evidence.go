package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/reports"
)

// EvidenceRecorder records the kernel's evidence of a point: the socket messages of processes and
// when each of their threads was made runnable and when it ran (what `perflab record
// --evidence sched` captures), into a trace file. perflab's CLI gives one built on the eBPF
// probes; lab cannot load them itself.
type EvidenceRecorder interface {
	// Record starts recording processes pids into a new trace at path. stop ends the
	// recording, closes the trace and returns how many events the kernel side lost.
	Record(ctx context.Context, path string, pids []int) (stop func() (lost uint64, err error), err error)
}

// RunQueueEvidence is the wake-up and run-queue delay of each round trip of a point, from the
// kernel's evidence (Config.Evidence): for every reply a client received over a socket, the
// time its thread sat runnable after the reply had arrived, before it ran (evidence.CauseWakeup
// and evidence.CauseRunQueue of `perflab analyze`), over the whole point, warm-up included.
type RunQueueEvidence struct {
	// RoundTrips counts the round trips the trace paired (a request and its reply);
	// ServerRequests is how many requests the batch loop served during the point (0 with the
	// conn loop): the two are equal when the trace missed none.
	RoundTrips     uint64 `json:"round_trips"`
	ServerRequests int64  `json:"server_requests,omitempty"`
	// RTTUS is the traced round trips' mean RTT, from the request's first system call to the
	// end of the reply's last, µs.
	RTTUS float64 `json:"rtt_us"`
	// ClientWakeupUSPerRT is the clients' time runnable on a CPU that was idle (the CPU waking
	// up), ClientRunQueueUSPerRT behind other threads on a busy CPU, per round trip;
	// ClientUSPerRT is their sum. Where ClientRoundTrips is set (depth 1, the server in a
	// process of its own, each reply paired with the client's read of it), they are the time
	// the client thread that read each reply sat runnable from the reply's arrival to the end
	// of that read; else they are `perflab analyze`'s attribution: the receiving thread's
	// runnable time after its request was sent, which counts a Go thread's waits while it ran
	// other goroutines too.
	ClientRoundTrips      uint64  `json:"client_round_trips,omitempty"`
	ClientWakeupUSPerRT   float64 `json:"client_wakeup_us_per_rt"`
	ClientRunQueueUSPerRT float64 `json:"client_runqueue_us_per_rt"`
	ClientUSPerRT         float64 `json:"client_us_per_rt"`
	// ServerUSPerRT is the server's side, per round trip: the time the server thread that read
	// each request sat runnable between the request's arrival (the start of the client's send)
	// and the end of that read, over ServerRoundTrips requests (depth 1 with the server in a
	// process of its own; each server connection paired with the client connection whose
	// calls interleave with its own). USPerRT is ClientUSPerRT plus ServerUSPerRT, when the
	// server's side is known.
	ServerUSPerRT    float64 `json:"server_us_per_rt,omitempty"`
	ServerRoundTrips uint64  `json:"server_round_trips,omitempty"`
	USPerRT          float64 `json:"us_per_rt"`
	// NoWakeup counts the round trips whose client thread was never runnable-and-waiting
	// inside them (the reply was there when it looked, or it spun).
	NoWakeup uint64 `json:"no_wakeup"`
	// LostEvents is how many events the kernel side could not hand over (ring buffer full).
	LostEvents uint64 `json:"lost_events"`
	// Rise is the traced RTT's rise from the series' first point and the share the clients'
	// delay per round trip accounts for (nil at the first point).
	Rise *RunQueueRise `json:"rise,omitempty"`
	// Warning says why these figures cannot be stood behind ("" when they can).
	Warning string `json:"warning,omitempty"`
}

// evidenceRecording is one point's recording in progress.
type evidenceRecording struct {
	path      string
	serverPid int
	keep      bool // the trace stays (Config.Dir)
	stop      func() (uint64, error)
}

// startEvidence starts recording point p's processes (perflab's, whose goroutines are the
// clients, and the server's when it runs apart) with cfg.Evidence; nil when there is nothing to
// record: no recorder, or shm, whose round trips move no data through sockets.
func startEvidence(ctx context.Context, cfg *Config, p *Point, serverPid int) (*evidenceRecording, error) {
	if cfg.Evidence == nil || p.Transport == "shm" {
		return nil, nil
	}
	r := &evidenceRecording{}
	name := strings.NewReplacer("/", "-", "+", "-").Replace(p.Label()) + ".evidence.plt"
	if cfg.Dir != "" {
		r.path, r.keep = filepath.Join(cfg.Dir, name), true
	} else {
		f, err := os.CreateTemp("", "perflab-bench-*-"+name)
		if err != nil {
			return nil, fmt.Errorf("make evidence trace: %w", err)
		}
		r.path = f.Name()
		f.Close()
	}
	pids := []int{os.Getpid()}
	if serverPid > 0 {
		pids = append(pids, serverPid)
	}
	stop, err := cfg.Evidence.Record(ctx, r.path, pids)
	if err != nil {
		if !r.keep {
			os.Remove(r.path)
		}
		return nil, fmt.Errorf("record evidence: %w", err)
	}
	r.stop, r.serverPid = stop, serverPid
	return r, nil
}

// finish stops the recording and analyses its trace for point p.
func (r *evidenceRecording) finish(p *Point) (*RunQueueEvidence, error) {
	lost, err := r.stop()
	if !r.keep {
		defer os.Remove(r.path)
	}
	if err != nil {
		return nil, fmt.Errorf("record evidence: %w", err)
	}
	s, err := analyzers.Analyze(protocol.Files([]string{r.path}, nil), analyzers.Options{Protocol: "venus"})
	if err != nil {
		return nil, fmt.Errorf("analyze evidence: %w", err)
	}
	ev := &RunQueueEvidence{LostEvents: lost}
	if p.loop != nil {
		ev.ServerRequests = p.loop.Requests
	}
	if s.Evidence != nil && s.Evidence.Attribution != nil && s.Evidence.Attribution.SchedKnown {
		a := s.Evidence.Attribution
		ev.RoundTrips, ev.NoWakeup = a.RoundTrips, a.NoWakeup
		var rtt float64
		for _, c := range a.Causes {
			switch c.Cause {
			case "client": // the client's own time before the request: not in the RTT
				continue
			case "wakeup":
				ev.ClientWakeupUSPerRT = round3(c.MeanUS)
			case "runqueue":
				ev.ClientRunQueueUSPerRT = round3(c.MeanUS)
			}
			rtt += c.MeanUS
		}
		ev.RTTUS = round3(rtt)
		ev.ClientUSPerRT = round3(ev.ClientWakeupUSPerRT + ev.ClientRunQueueUSPerRT)
	}
	ev.USPerRT = ev.ClientUSPerRT
	if r.serverPid > 0 && p.Depth == 1 && ev.RoundTrips > 0 {
		d, err := pointDelays(r.path, uint32(os.Getpid()), uint32(r.serverPid))
		if err != nil {
			return nil, err
		}
		if d.Requests > 0 {
			ev.ServerRoundTrips = d.Requests
			ev.ServerUSPerRT = round3(float64(d.ServerNs) / 1e3 / float64(d.Requests))
		}
		if d.Replies > 0 && float64(d.Replies) >= minTracedShare*float64(ev.RoundTrips) {
			// Each reply's own delay from its arrival, in place of analyze's attribution (the
			// receiving thread's runnable time anywhere in the round trip: a Go thread that
			// ran other goroutines while the request was at the server counts there too).
			ev.ClientRoundTrips = d.Replies
			ev.ClientWakeupUSPerRT = round3(float64(d.ClientIdleNs) / 1e3 / float64(d.Replies))
			ev.ClientRunQueueUSPerRT = round3(float64(d.ClientBusyNs) / 1e3 / float64(d.Replies))
			ev.ClientUSPerRT = round3(ev.ClientWakeupUSPerRT + ev.ClientRunQueueUSPerRT)
			ev.USPerRT = ev.ClientUSPerRT
		}
		if ev.serverKnown() {
			ev.USPerRT = round3(ev.ClientUSPerRT + ev.ServerUSPerRT)
		}
	}
	return ev, nil
}

// minTracedShare is the least share of the server's requests the trace must pair into round
// trips for its figures to stand.
const minTracedShare = 0.9

// serverKnown reports whether the server's side was paired for enough of the round trips to
// stand for them all.
func (ev *RunQueueEvidence) serverKnown() bool {
	return ev.RoundTrips > 0 && float64(ev.ServerRoundTrips) >= minTracedShare*float64(ev.RoundTrips)
}

// evidenceRises compares each point's kernel evidence with the series' first point's: of the
// traced RTT's rise, how much the clients' wake-up and run-queue delay accounts for; and warns
// where the figures cannot be stood behind.
func evidenceRises(res *Result, s *Series) {
	if len(s.points) == 0 {
		return
	}
	first := res.Points[s.points[0]].RunQueue
	for _, k := range s.points {
		p := &res.Points[k]
		if p.RunQueue == nil || p.RunQueue.Evidence == nil {
			continue
		}
		ev := p.RunQueue.Evidence
		var why []string
		switch {
		case ev.RoundTrips == 0:
			why = append(why, "the trace paired no round trip")
		case ev.ServerRequests > 0 && float64(ev.RoundTrips) < minTracedShare*float64(ev.ServerRequests):
			why = append(why, fmt.Sprintf("the trace paired %d round trips of the %d requests the server served", ev.RoundTrips, ev.ServerRequests))
		}
		if ev.RoundTrips > 0 && p.separate && p.Depth == 1 && !ev.serverKnown() {
			why = append(why, fmt.Sprintf("the server's side is left out of us_per_rt and the rise: only %d of %d requests could be paired with the client connection that sent them", ev.ServerRoundTrips, ev.RoundTrips))
		}
		if ev.LostEvents > 0 {
			why = append(why, fmt.Sprintf("the kernel side lost %d events", ev.LostEvents))
		}
		if k != s.points[0] && first != nil && first.Evidence != nil && first.Evidence.RoundTrips > 0 && ev.RoundTrips > 0 {
			f := first.Evidence
			r := &RunQueueRise{FromClients: res.Points[s.points[0]].Clients, RTTRiseUS: round3(ev.RTTUS - f.RTTUS),
				RunQueueRiseUS: round3(ev.ClientUSPerRT - f.ClientUSPerRT), Of: "clients"}
			if ev.serverKnown() && f.serverKnown() {
				r.RunQueueRiseUS, r.Of = round3(ev.USPerRT-f.USPerRT), "clients and server"
			}
			if r.RTTRiseUS > 0 {
				r.Share = round3(r.RunQueueRiseUS / r.RTTRiseUS)
			}
			ev.Rise = r
			switch {
			case r.RTTRiseUS < 0:
				why = append(why, fmt.Sprintf("the traced mean RTT fell by %s µs from %s: there is no rise to share", reports.Num(-r.RTTRiseUS), plural(r.FromClients, "client")))
			case r.RTTRiseUS < minRTTRise:
				why = append(why, fmt.Sprintf("the traced mean RTT changed by %s µs, within the noise: no share of it is given", reports.Num(r.RTTRiseUS)))
			case r.Share < 0:
				why = append(why, fmt.Sprintf("%s wake-up and run-queue delay per round trip fell (%s µs) while the RTT rose", whose(r.Of), reports.Num(r.RunQueueRiseUS)))
			case r.Share > 1:
				why = append(why, fmt.Sprintf("%s wake-up and run-queue delay rose by more (%s µs) than the RTT (%s µs): the two points ran under different loads", whose(r.Of), reports.Num(r.RunQueueRiseUS), reports.Num(r.RTTRiseUS)))
			}
		}
		if len(why) > 0 {
			ev.Warning = "kernel evidence: " + strings.Join(why, "; ")
			res.Warnings = append(res.Warnings, p.Label()+": "+ev.Warning)
		}
	}
}

// whose names the sides of a rise's Of as a possessive: "the clients'", "the clients' and the
// server's".
func whose(of string) string {
	if of == "clients and server" {
		return "the clients' and the server's"
	}
	return "the clients'"
}

// evidenceCells are point p's kernel-evidence columns: each round trip's own wake-up and
// run-queue delay (both sides where the server's is known), and the share of the traced RTT's
// rise since the series' first point it accounts for (marked "!" when warned).
func evidenceCells(p *Point) []string {
	if p.RunQueue == nil || p.RunQueue.Evidence == nil {
		return []string{"-", "-"}
	}
	ev := p.RunQueue.Evidence
	share := "-"
	if r := ev.Rise; r != nil && r.RTTRiseUS >= minRTTRise {
		share = reports.Share(r.Share)
	}
	if ev.Warning != "" {
		share += " !"
	}
	return []string{reports.Num(ev.USPerRT), share}
}

// evidenceLines are the series' note lines from the kernel evidence: each point's clients'
// delay per round trip, and for each point after the first the share of the traced RTT's rise.
func evidenceLines(res *Result, points []int) []string {
	var out, per []string
	var first *RunQueueEvidence
	if len(points) > 0 && res.Points[points[0]].RunQueue != nil {
		first = res.Points[points[0]].RunQueue.Evidence
	}
	for _, k := range points {
		p := &res.Points[k]
		if p.RunQueue == nil || p.RunQueue.Evidence == nil {
			continue
		}
		ev := p.RunQueue.Evidence
		line := fmt.Sprintf("%s: clients %s µs (wake-up of an idle CPU %s, run queue %s)", plural(p.Clients, "client"),
			reports.Num(ev.ClientUSPerRT), reports.Num(ev.ClientWakeupUSPerRT), reports.Num(ev.ClientRunQueueUSPerRT))
		if ev.ServerRoundTrips > 0 {
			line += fmt.Sprintf(", server %s µs", reports.Num(ev.ServerUSPerRT))
		}
		per = append(per, line+fmt.Sprintf(" of a %s µs RTT, %d round trips", reports.Num(ev.RTTUS), ev.RoundTrips))
		if r := ev.Rise; r != nil && first != nil && r.RTTRiseUS >= minRTTRise {
			line := fmt.Sprintf("of the traced RTT rise from %d to %s (%s µs), %s wake-up and run-queue delay accounts for %s µs (%s)",
				r.FromClients, plural(p.Clients, "client"), reports.Num(r.RTTRiseUS), whose(r.Of), reports.Num(r.RunQueueRiseUS), reports.Share(r.Share))
			if ev.Warning != "" {
				line += " [warning: see below]"
			}
			out = append(out, line)
		}
	}
	if len(per) == 0 {
		return nil
	}
	head := "kernel evidence (eBPF, sched_wakeup and sched_switch of both processes' threads, as perflab record --evidence sched), each round trip's own delay, per round trip: the client thread's from the reply's arrival to running, the server's reading thread's from the request's arrival to its read: " + strings.Join(per, "; ")
	return append([]string{head}, out...)
}
