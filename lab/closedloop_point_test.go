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

// recordedSweep is the part of a real external sweep's JSON that the closed-loop model reads,
// kept in testdata/sweeps: redis-server with redis-benchmark and memcached with the e2e test's
// threaded client at 1-16 clients, recorded on a 2-vCPU VM.
type recordedSweep struct {
	Note   string `json:"note"`
	Points []struct {
		Clients     int         `json:"clients"`
		Throughput  float64     `json:"throughput_per_s"`
		LoopThreads int         `json:"loop_threads"`
		ResidenceUS float64     `json:"server_residence_us"`
		CPUUS       float64     `json:"server_cpu_us"`
		RunDelayUS  float64     `json:"server_run_delay_us"`
		N           float64     `json:"requests_per_cycle"`
		CPU         *WindowCPU  `json:"cpu"`
		Client      *ClientLoop `json:"client_loop"`
		Loops       []struct {
			ByN []loops.NCycles `json:"by_n"`
		} `json:"loops"`
	} `json:"points"`
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
	var in []closedLoopInput
	for _, p := range s.Points {
		q := closedLoopInput{Clients: p.Clients, ThroughputPerS: p.Throughput, LoopThreads: p.LoopThreads, ResidenceUS: p.ResidenceUS,
			CPUUS: p.CPUUS, RunDelayUS: p.RunDelayUS, N: p.N, Client: p.Client, CPU: p.CPU}
		for _, l := range p.Loops {
			q.ServerByN = append(q.ServerByN, l.ByN...)
		}
		in = append(in, q)
	}
	return in
}

// TestClosedLoopRecordedSweeps runs the closed-loop model over real sweeps. On the ones taken
// with the VM to itself (quiet-*), where the lines through the points missed by up to 53%
// (memcached at 2 clients: the one-client point's wake-ups of halted processors, put into a
// constant delay) and 42% (redis from 8 clients: its fitted loop time per request went to 0
// or below), each point's own demands and the wake-up cost calibrated at one client predict every
// point within 20% in at least 5 of the 6 (the sixth's one miss, by 20.2%, is a point whose
// throughput fell from that of fewer clients: something besides the clients changed there,
// which no closed-loop model foresees), and every point within 25%. On every sweep: the model
// is built of the points' demands, each point says what binds it and why, and each miss is
// warned.
func TestClosedLoopRecordedSweeps(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "sweeps", "*.json"))
	if err != nil || len(paths) < 6 {
		t.Fatalf("%d recorded sweeps (%v), want at least 6", len(paths), err)
	}
	quiet, within := 0, 0
	defer func() {
		if quiet < 6 || within < quiet-1 {
			t.Errorf("%d of %d quiet sweeps predicted within %.0f%% at every point, want all but one at most", within, quiet, 100*ExternalPredictionTolerance)
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
			t.Logf("wake-up %.1f µs, Z %.1f µs", cl.WakeUS, cl.ZUS)
		})
	}
}
