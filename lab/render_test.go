package lab

import (
	"bytes"
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/testutil"
)

// synthetic returns a sweep shaped like seed 003: RTT = 1 µs + 1 µs·N, lognormal RTTs with a
// second, fast population of 20% at the largest N, and the clients' in-flight L = λ·W exactly.
func synthetic() *Result {
	res := &Result{Schema: Schema, Loop: "batch", DurationS: 1}
	s := Series{Transport: "shm", Mode: "baseline", Depth: 1}
	for i, n := range []int{1, 2, 4, 8, 16} {
		w := 1 + float64(n)
		p := Point{Transport: "shm", Mode: "baseline", Clients: n, Depth: 1, ThroughputPerS: math.Round(float64(n) / w * 1e6),
			RTTUS: RTT{P50: w, Mean: w, P99: 2 * w}, InflightMean: float64(n), RequestsPerCycle: float64(n) * 0.9}
		for k := 0; k < 1000; k++ {
			z := math.Sqrt2 * math.Erfinv(2*(float64(k)+0.5)/1000-1) // normal quantiles
			v := w * math.Exp(0.05*z)
			if n == 16 && k < 200 {
				z = math.Sqrt2 * math.Erfinv(2*(float64(k)+0.5)/200-1)
				v = 4 * math.Exp(0.05*z) // the fast population: small batches
			}
			p.samples = append(p.samples, v)
		}
		sort.Float64s(p.samples)
		p.Requests = int64(len(p.samples))
		p.CPUCores, p.CPUUSPerRT = 2, 2*w/float64(n)
		p.RunQueue = &RunQueue{ClientUSPerRT: 0.2 * float64(n), ServerUSPerRT: 0.1 * float64(n), USPerRT: round3(0.3 * float64(n)), Separate: true, WindowS: 0.9, LoadWindow: true,
			ClientSwitchInsPerRT: 2, ServerSwitchInsPerRT: 3, ClientUSPerSwitchIn: 0.1 * w, ServerUSPerSwitchIn: 0.05 * w}
		p.RunQueueUS = p.RunQueue.USPerRT
		p.ShmSpin = &ShmSpin{Waits: 2000, PolledShare: 0.9, SleptShare: 0.1, Pollers: 2 * n, CPUs: 2, Pays: true}
		if n == 16 {
			p.ShmSpin = &ShmSpin{Waits: 2000, PolledShare: 0.4, LateShare: 0.3, SleptShare: 0.6, BackedOffShare: 0.5, CPUWaitThreads: 3.5, CPUsShort: true, Pollers: 32, CPUs: 2}
		}
		p.ShmSpin.Note = spinNote(p.ShmSpin)
		res.Points = append(res.Points, p)
		s.points = append(s.points, i)
	}
	res.Series = []Series{s}
	analyze(res, &Config{})
	return res
}

func TestRenderGolden(t *testing.T) {
	res := synthetic()
	if f := res.BatchFit; f == nil || math.Abs(f.TFixedUS-1) > 1e-6 || math.Abs(f.TPerReqUS-1) > 1e-6 || f.R2 < 0.9999 {
		t.Errorf("fit %+v, want T_fixed 1, T_per_req 1, R² 1", f)
	}
	if got := res.Series[0].Saturation; got != 8 {
		t.Errorf("saturation at %d clients, want 8", got)
	}
	if m := res.Series[0].Modes; len(m) != 2 || math.Abs(m[0].Share-0.2) > 0.03 {
		t.Errorf("populations %+v, want a 20%% fast one and a slow one", m)
	}
	for _, f := range []string{"table", "markdown"} {
		var b bytes.Buffer
		if err := Render(&b, res, f); err != nil {
			t.Fatal(err)
		}
		testutil.Golden(t, "render."+f+".txt", b.Bytes())
	}
}

func TestSpinNote(t *testing.T) {
	cases := []struct {
		name string
		s    ShmSpin
		want []string // substrings, in order
		not  string
	}{
		{"pays, fits the CPUs", ShmSpin{Waits: 100, PolledShare: 0.99, SleptShare: 0.01, Pollers: 2, CPUs: 2, Pays: true}, nil, "pay"},
		{"pays, takes turns", ShmSpin{Waits: 100, PolledShare: 0.9, SleptShare: 0.1, Pollers: 8, CPUs: 2, Pays: true},
			[]string{"8 ring pollers", "on 2 CPUs", "take turns"}, "did not pay"},
		{"does not pay, machine busy", ShmSpin{Waits: 100, PolledShare: 0.5, LateShare: 0.4, SleptShare: 0.5, BackedOffShare: 0.3, CPUWaitThreads: 1.5, CPUsShort: true, Pollers: 2, CPUs: 2},
			[]string{"polling did not pay", "50.0% of the ring waits slept", "40.0% were caught only after 100 µs", "backed off (30.0%", "fewer CPUs were free than pollers", "1.5 of them", "may lose to sockets here"}, "take turns"},
		{"polls caught, CPUs short", ShmSpin{Waits: 100, PolledShare: 0.9, SleptShare: 0.1, CPUWaitThreads: 2, CPUsShort: true, Pollers: 2, CPUs: 2, Pays: true},
			[]string{"fewer CPUs were free than pollers", "2 of them on average"}, "did not pay"},
		{"does not pay, peer slow", ShmSpin{Waits: 100, SleptShare: 1, BackedOffShare: 0.8, Pollers: 2, CPUs: 2},
			[]string{"polling did not pay", "100.0% of the ring waits slept", "backed off (80.0%"}, "CPUs were free"},
	}
	for _, tc := range cases {
		got := spinNote(&tc.s)
		rest := got
		for _, w := range tc.want {
			i := strings.Index(rest, w)
			if i < 0 {
				t.Errorf("%s: note %q lacks %q (in order)", tc.name, got, w)
				break
			}
			rest = rest[i+len(w):]
		}
		if len(tc.want) == 0 && got != "" || tc.not != "" && strings.Contains(got, tc.not) {
			t.Errorf("%s: note %q", tc.name, got)
		}
	}
}
