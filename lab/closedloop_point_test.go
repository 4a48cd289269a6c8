package lab

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/perflab/perflab/loops"
)

// recordedSweep is a real external sweep's JSON, kept in testdata/sweeps with the part of each
// point that the closed-loop model reads: redis-server with redis-benchmark and memcached with
// the e2e test's threaded client at 1-16 clients, recorded on a 2-vCPU VM.
type recordedSweep struct {
	Note   string          `json:"note"`
	Points []ExternalPoint `json:"points"`
}

// readSweep reads a recorded sweep into the closed-loop model's inputs.
func readSweep(t *testing.T, path string) []closedLoopInput {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s recordedSweep
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return closedLoopInputs(s.Points)
}

// TestClosedLoopRecordedSweeps runs the closed-loop model over real sweeps. On the ones taken
// with the VM to itself (quiet-*), where the lines through the points missed by up to 53%
// (memcached at 2 clients: the one-client point's wake-ups of halted processors, put into a
// constant delay) and 42% (redis from 8 clients: its fitted loop time per request went to 0
// or below), each point's own demands and the wake-up cost calibrated at one client predict every
// point within 20% in at least 85% of the sweeps (the misses, by 22-23%, are memcached at 2
// clients in two sweeps, one whose processors halted between requests and one whose own
// threads queued for the processors, and redis at 16 clients in a sweep recorded before
// replies_at_cycle_end), and every point within 25%. The sweeps recorded
// with each loop's replies_at_cycle_end (*-hold*, *-lock*) hold redis's replies to its cycles'
// end and not memcached's, and on the quiet ones redis, where redis and redis-benchmark move
// a tenth to a half or more of the requests in lock-step from 8 clients, is within 15% at
// every point. On every sweep: the model is built of the points' demands, each point says what
// binds it and why, and each miss is warned.
func TestClosedLoopRecordedSweeps(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "sweeps", "*.json"))
	if err != nil || len(paths) < 6 {
		t.Fatalf("%d recorded sweeps (%v), want at least 6", len(paths), err)
	}
	quiet, within := 0, 0
	defer func() {
		if quiet < 26 || 20*within < 17*quiet {
			t.Errorf("%d of %d quiet sweeps predicted within %.0f%% at every point, want at least 85%% of 26 or more", within, quiet, 100*ExternalPredictionTolerance)
		}
	}()
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		t.Run(name, func(t *testing.T) {
			in := readSweep(t, path)
			cl, warns, err := fitClosedLoop(in, 2, loops.DefaultConfidence)
			if err != nil {
				t.Fatal(err)
			}
			if cl.LoopDemands != "point" || len(cl.Points) != len(in) {
				t.Fatalf("loops' network of %q with %d of %d points", cl.LoopDemands, len(cl.Points), len(in))
			}
			warned := strings.Join(warns, "\n")
			isQuiet, good := strings.HasPrefix(name, "quiet-"), true
			if isQuiet {
				quiet++
				defer func() {
					if good {
						within++
					}
				}()
			}
			for _, p := range cl.Points {
				t.Logf("c%-2d predicted %6.0f/s measured %6.0f/s %+6.1f%%  %s: %s", p.Clients, p.ThroughputPredictedPerS, p.ThroughputMeasuredPerS, 100*p.Error, p.Binds, p.Why)
				if p.Binds == "" || p.Why == "" {
					t.Errorf("c%d: no station named as binding", p.Clients)
				}
				if math.Abs(p.Error) > ExternalPredictionTolerance {
					good = false
					if isQuiet && math.Abs(p.Error) > 0.25 {
						t.Errorf("c%d: predicted %.0f/s, measured %.0f/s (%+.1f%%)", p.Clients, p.ThroughputPredictedPerS, p.ThroughputMeasuredPerS, 100*p.Error)
					}
					if !strings.Contains(warned, "c"+strconv.Itoa(p.Clients)+": the closed-loop model predicts") {
						t.Errorf("c%d: missed by %+.1f%% without a warning", p.Clients, 100*p.Error)
					}
				}
			}
			if strings.Contains(name, "-hold") || strings.Contains(name, "-lock") {
				for i, p := range cl.Points {
					redis := strings.Contains(name, "redis")
					// redis and redis-benchmark fall into lock-step; with the share that did at
					// each point, and a wake-up only for the arrivals that find a loop asleep,
					// the model holds every quiet point within 15%.
					if redis && isQuiet && (p.Clients >= 8 && p.LockstepShare <= 0 || math.Abs(p.Error) > 0.15) {
						t.Errorf("c%d: lock-step share %.2f, error %+.1f%%; want some from 8 clients, and within 15%%", p.Clients, p.LockstepShare, 100*p.Error)
					}
					// A held reply waits in the network's cycles or moves in lock-step.
					if redis && requestN(in[i].ServerByN) > 1.05 && p.ServerHoldUS <= 0 && p.LockstepShare <= 0 || !redis && (p.ServerHoldUS != 0 || p.LockstepShare != 0) {
						t.Errorf("c%d: reply hold %.1f µs, lock-step share %.2f at N_r %.2f (replies at the cycle's end in %.2f of the cycles); want one for redis only",
							p.Clients, p.ServerHoldUS, p.LockstepShare, requestN(in[i].ServerByN), in[i].RepliesAtEnd)
					}
				}
			}
			t.Logf("wake-up %.1f µs, Z %.1f µs", cl.WakeUS, cl.ZUS)
		})
	}
}

// TestClosedLoopPointCalibration checks the three ways the calibration point sets the one
// figure taken from the client: the wake-up of a halted processor where the processors were
// idle enough there, a constant delay where others kept them busy, and the client's overlap
// with the server where the demands alone are longer than the round, each of the last two
// warned; and that φ is 1 on an idle machine and 0 on a saturated one.
func TestClosedLoopPointCalibration(t *testing.T) {
	in := readSweep(t, filepath.Join("testdata", "sweeps", "quiet-redis-1.json"))
	cl, warns, err := fitClosedLoop(in, 2, loops.DefaultConfidence)
	if err != nil || cl.WakeUS <= 0 || cl.ZUS != 0 {
		t.Fatalf("idle calibration point: wake-up %.1f µs, Z %.1f µs (%v)", cl.WakeUS, cl.ZUS, err)
	}
	if p := cl.Points[0]; p.IdleShare != 1 || math.Abs(p.Error) > 1e-3 {
		t.Errorf("c1: φ %.2f, error %+.3f; want 1 and the measured throughput", p.IdleShare, p.Error)
	}
	for _, w := range warns {
		if strings.Contains(w, "cannot be told") {
			t.Errorf("idle calibration point warned: %s", w)
		}
	}
	if got := idleShare(&in[0], 1e6/in[0].CPU.OwnUS*2); got != 0 {
		t.Errorf("φ %.2f with the processors saturated, want 0", got)
	}

	// The others took 0.6 of the 2 processors at one client.
	busy := readSweep(t, filepath.Join("testdata", "sweeps", "quiet-redis-1.json"))
	c := *busy[0].CPU
	c.AvailableProcessors = 1.4
	busy[0].CPU = &c
	cl, warns, err = fitClosedLoop(busy, 2, loops.DefaultConfidence)
	if err != nil || cl.WakeUS != 0 || cl.ZUS <= 0 || !strings.Contains(strings.Join(warns, "\n"), "cannot be told there") {
		t.Errorf("busy calibration point: wake-up %.1f µs, Z %.1f µs, warnings %q (%v); want Z and a warning", cl.WakeUS, cl.ZUS, warns, err)
	}

	// The client's loop busy for longer than the whole round at one client.
	long := readSweep(t, filepath.Join("testdata", "sweeps", "quiet-redis-1.json"))
	cli := *long[0].Client
	cli.BusyPerReplyUS = 1e6 / long[0].ThroughputPerS
	long[0].Client = &cli
	cl, warns, err = fitClosedLoop(long, 2, loops.DefaultConfidence)
	if err != nil || cl.ZUS >= 0 || math.Abs(cl.Points[0].Error) > 0.01 || !strings.Contains(strings.Join(warns, "\n"), "runs beside the server's") {
		t.Errorf("demands longer than the round: Z %.1f µs, c1 error %+.3f, warnings %q (%v); want the overlap calibrated and warned", cl.ZUS, cl.Points[0].Error, warns, err)
	}
}

// TestServerHold checks the wait of a reply held to its cycle's end: (N_r − 1)/2 of the
// server's demand per station, N_r = Σ N²/Σ N over the cycles, times the share of cycles that
// held their replies; none for a server that answers each request as it reads it. With one
// client the closed network's round is the sum of its demands and delays, so the hold adds to
// it exactly.
func TestServerHold(t *testing.T) {
	byN := []loops.NCycles{{N: 1, Cycles: 30}, {N: 3, Cycles: 10}} // Σ N² = 120, Σ N = 60: N_r 2
	for _, tc := range []struct {
		name   string
		atEnd  float64
		side   int
		holdUS float64
	}{
		{"held to the end", 1, 1, 10}, // (2-1)/2 · 20 µs
		{"held in half the cycles", 0.5, 1, 5},
		{"answered as read", 0, 1, 0},
		{"two stations", 1, 2, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := closedLoopInput{Clients: 1, ThroughputPerS: 1e4, CPUUS: 20, N: 1.5,
				Client: &ClientLoop{BusyPerReplyUS: 30, RepliesPerCycle: 1}, CPU: &WindowCPU{Processors: 2, AvailableProcessors: 2, OwnUS: 50}}
			p.setServerLoops([]loops.Thread{{ByN: byN, MultiRequestCycles: 10, RepliesAtCycleEnd: tc.atEnd}})
			if got := hold(&p, 20, tc.side); math.Abs(got-tc.holdUS) > 1e-9 {
				t.Fatalf("hold %.3f µs, want %.3f", got, tc.holdUS)
			}
			s, err := pointModel{side: 1}.at(&p, 0, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if want := 1e6 / (20 + 30 + hold(&p, 20, 1)); math.Abs(s.throughput/want-1) > 1e-9 || s.hold != hold(&p, 20, 1) {
				t.Errorf("throughput %.1f/s with hold %.3f µs, want %.1f/s", s.throughput, s.hold, want)
			}
		})
	}
}

// TestWakeShares checks that a loop pays a wake-up only for the arrivals that find it asleep:
// every one with one client; with more, 1 − U(c − 1) of its station, U with one client fewer,
// solved together with the demands the wake-ups add.
func TestWakeShares(t *testing.T) {
	for _, clients := range []int{1, 2, 4, 16} {
		p := closedLoopInput{Clients: clients, ThroughputPerS: 1e4, CPUUS: 20, N: 1.5,
			Client: &ClientLoop{BusyPerReplyUS: 30, RepliesPerCycle: 1}, CPU: &WindowCPU{Processors: 2, AvailableProcessors: 2, OwnUS: 50}}
		m := pointModel{side: 1}
		s, err := m.at(&p, 10, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		want := wakeShares{1, 1}
		if clients > 1 {
			fewer := p
			fewer.Clients--
			f, err := m.stations(&fewer, 10, 0, 1, s.wake)
			if err != nil {
				t.Fatal(err)
			}
			want = wakeShares{1 - f.serverU, 1 - f.clientU}
		}
		if math.Abs(s.wake.server-want.server) > 1e-4 || math.Abs(s.wake.client-want.client) > 1e-4 ||
			math.Abs(s.serverD-(20+10*s.wake.server)) > 1e-9 || math.Abs(s.clientD-(30+10*s.wake.client)) > 1e-9 {
			t.Errorf("c%d: wakes server %.4f client %.4f (demands %.2f, %.2f µs); want %.4f, %.4f", clients, s.wake.server, s.wake.client, s.serverD, s.clientD, want.server, want.client)
		}
		// With 16 clients the client's loop, the slower, is kept busy and almost never woken;
		// the server's sleeps for the share of the time it is not needed, 1 − D_s/D_c.
		if clients == 16 && (s.wake.client > 0.02 || math.Abs(s.wake.server-(1-s.serverD/s.clientD)) > 0.02) {
			t.Errorf("c16: wakes server %.3f client %.3f; want %.3f and almost none", s.wake.server, s.wake.client, 1-s.serverD/s.clientD)
		}
	}
}

// TestLockStep checks the share of requests that moved in lock-step (read in a cycle that took
// every client's request, of a server that held its replies, with a client loop of its own) and
// its time: the server's busy time per such cycle over the clients, the client's processor
// time and two wake-ups over the clients, mixed in time with the network of the other cycles.
func TestLockStep(t *testing.T) {
	byN := []loops.NCycles{{N: 1, Cycles: 40, BusyUS: 10}, {N: 2, Cycles: 10, BusyUS: 18}, {N: 4, Cycles: 10, BusyUS: 36}} // 100 requests, 40 in lock-step
	for _, tc := range []struct {
		name    string
		clients int
		atEnd   float64
		client  bool
		share   float64
		hold    float64 // the hold's share of the server's demand, of the cycles outside lock-step
	}{
		{"held, client loop", 4, 1, true, 0.4, (80.0/60 - 1) / 2},
		{"more clients than any cycle took", 8, 1, true, 0, (240.0/100 - 1) / 2},
		{"answered as read", 4, 0, true, 0, 0},
		{"threaded client", 4, 1, false, 0, (240.0/100 - 1) / 2},
		{"one client", 1, 1, true, 0, (240.0/100 - 1) / 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := closedLoopInput{Clients: tc.clients, ThroughputPerS: 1e4, CPUUS: 10, N: 100.0 / 60,
				CPU: &WindowCPU{Processors: 2, AvailableProcessors: 2, OwnUS: 30, ClientUS: 15}}
			if tc.client {
				p.Client = &ClientLoop{BusyPerReplyUS: 20, RepliesPerCycle: 2}
			}
			p.setServerLoops([]loops.Thread{{ByN: byN, MultiRequestCycles: 20, RepliesAtCycleEnd: tc.atEnd}})
			if math.Abs(p.lockShare-tc.share) > 1e-9 || math.Abs(p.holdShare-tc.hold) > 1e-9 {
				t.Fatalf("lock-step share %.3f, hold share %.3f; want %.3f, %.3f", p.lockShare, p.holdShare, tc.share, tc.hold)
			}
			spread := p // the network of the other cycles alone
			spread.lockShare = 0
			net, err := pointModel{side: 1}.at(&spread, 4, 0, 0.5)
			if err != nil {
				t.Fatal(err)
			}
			s, err := pointModel{side: 1}.at(&p, 4, 0, 0.5)
			if err != nil {
				t.Fatal(err)
			}
			if tc.share == 0 {
				if s.lockUS != 0 || s.throughput != net.throughput {
					t.Errorf("lock-step %.1f µs, throughput %.1f/s; want none and the network's %.1f/s", s.lockUS, s.throughput, net.throughput)
				}
				return
			}
			lock := 36.0/4 + 15 + 2*4.0/4 // 26 µs a request
			want := 1 / (0.4*lock*1e-6 + 0.6/net.throughput)
			if math.Abs(s.lockUS-lock) > 1e-9 || math.Abs(s.throughput/want-1) > 1e-9 {
				t.Errorf("lock-step %.3f µs, throughput %.1f/s; want %.3f µs, %.1f/s", s.lockUS, s.throughput, lock, want)
			}
		})
	}
}

// TestClosedLoopTwoSteadyStates checks a memcached sweep whose wake-up cost, calibrated at one
// client, was large (15 µs): at two clients the loops have a steady state with the processors
// busy (no wake-up finds one halted) and one with them halting between requests. The model
// predicts the busy one, which the machine was in (74,516/s measured, the processors busy 99%
// of the window), and warns of the other.
func TestClosedLoopTwoSteadyStates(t *testing.T) {
	in := readSweep(t, filepath.Join("testdata", "sweeps", "quiet-hold2-memcached-6.json"))
	cl, warns, err := fitClosedLoop(in, 2, loops.DefaultConfidence)
	if err != nil {
		t.Fatal(err)
	}
	p := cl.Points[1]
	if p.Clients != 2 || math.Abs(p.Error) > ExternalPredictionTolerance || p.IdleShare > 0.05 {
		t.Errorf("c%d: predicted %.0f/s (φ %.2f), measured %.0f/s; want the busy state within 20%%", p.Clients, p.ThroughputPredictedPerS, p.IdleShare, p.ThroughputMeasuredPerS)
	}
	if w := strings.Join(warns, "\n"); !strings.Contains(w, "c2: the loops have two steady states") || strings.Count(w, "two steady states") != 1 {
		t.Errorf("warnings %q: want the two steady states at c2 only", warns)
	}
}
