package analyzers

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/perflab/perflab/fixtures"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// writeTrace writes a trace made by gen into a temporary file and returns its path.
func writeTrace(t testing.TB, name string, meta trace.Meta, gen func(w *trace.Writer) error) string {
	t.Helper()
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, meta, fixtures.Options())
	if err != nil {
		t.Fatal(err)
	}
	if err := gen(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func fixturePath(t testing.TB, name string) string {
	t.Helper()
	b, err := fixtures.FS.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), filepath.Base(name))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestAnalyzePingPong(t *testing.T) {
	s, err := Analyze(protocol.Files([]string{fixturePath(t, "traces/pingpong.plt")}, nil), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Events != 300 || s.Totals.Send.Calls != 150 || s.Totals.Recv.Frames != 150 || s.Protocol != "venus" {
		t.Errorf("events %d, totals %+v, protocol %q", s.Events, s.Totals, s.Protocol)
	}
	if s.RoundTrips.Count != 150 || s.RoundTrips.Unanswered != 0 {
		t.Errorf("round trips %+v", s.RoundTrips)
	}
	// the generator's RTT is 40 µs + up to 20 µs of jitter
	if l := s.RoundTrips.RTTUS; l.P50 < 40 || l.Max > 60 || !(l.P50Low <= l.P50 && l.P50 <= l.P50High) {
		t.Errorf("RTT %+v", l)
	}
	if s.InFlight == nil || s.InFlight.Max != 1 || len(s.LittlesLaw) != 1 {
		t.Fatalf("in flight %+v, Little %+v", s.InFlight, s.LittlesLaw)
	}
	if e := s.LittlesLaw[0].Error; e > 0.01 || e < -0.01 {
		t.Errorf("Little's law off by %.3f on a closed loop of one", e)
	}
}

// The same venus-like workload recorded by the tracer and by eBPF gives the same per-token
// answer: 9 messages and 4 round trips per token (5 calls, 4 of which want replies).
func TestAnalyzeVenusSources(t *testing.T) {
	for _, src := range []trace.Source{trace.SourceTracer, trace.SourceEBPF} {
		t.Run(src.String(), func(t *testing.T) {
			path := writeTrace(t, "v.plt", fixtures.Meta(src.String(), "venus"), func(w *trace.Writer) error {
				return fixtures.Venus(w, fixtures.VenusOptions{Tokens: 8, Uploads: 4, Source: src})
			})
			s, err := Analyze(protocol.Files([]string{path}, nil), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Units) != 1 {
				t.Fatalf("units %+v", s.Units)
			}
			u := s.Units[0]
			if u.Name != "token" || u.Count != 8 || u.MessagesPerUnit != 9 || u.RoundTripsPerUnit != 4 {
				t.Errorf("unit %+v", u)
			}
			if u.NetWaitUS <= 0 || u.NetWaitUS >= u.UnitTimeUS || u.MaxSpeedup <= 1 {
				t.Errorf("network wait %v of %v µs, speedup bound %v", u.NetWaitUS, u.UnitTimeUS, u.MaxSpeedup)
			}
			if len(s.Phases) != 2 || s.Phases[0].Name != "load" || s.Phases[0].Messages != 4 {
				t.Errorf("phases %+v", s.Phases)
			}
			if s.RoundTrips.Count != 32 || s.RoundTrips.Unanswered != 0 {
				t.Errorf("round trips %+v", s.RoundTrips)
			}
		})
	}
}

func TestHistQuantiles(t *testing.T) {
	var h Hist
	for i := int64(1); i <= 100000; i++ {
		h.Add(i * 1000)
	}
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		want := q * 100000 * 1000
		got := h.Quantile(q)
		if d := (got - want) / want; d > 0.016 || d < -0.016 {
			t.Errorf("q%.3f = %.0f, want %.0f within 1.6%%", q, got, want)
		}
	}
	lo, hi, ok := h.MedianCI(0.95)
	if !ok || lo >= hi || lo > 50e6 || hi < 50e6 {
		t.Errorf("median CI %v–%v", lo, hi)
	}
	var small Hist
	for _, v := range []int64{5, 1, 4, 2, 3} {
		small.Add(v)
	}
	if small.Quantile(0.5) != 3 || small.Max() != 5 {
		t.Errorf("exact small sample: median %v", small.Quantile(0.5))
	}
	if _, _, ok := small.MedianCI(0.95); ok {
		t.Errorf("5 samples gave a 95%% interval of the median")
	}
}

func TestQuantileRanks(t *testing.T) {
	// n = 10 at 95%: the median lies between X(2) and X(9) (P = 0.979); p99 has no interval
	if j, k, ok := quantileRanks(10, 0.5, 0.95); !ok || j != 2 || k != 9 {
		t.Errorf("median ranks of 10: %d %d %v, want 2 9", j, k, ok)
	}
	if _, _, ok := quantileRanks(10, 0.99, 0.95); ok {
		t.Error("a p99 interval from 10 samples")
	}
	if j, k, ok := quantileRanks(1000, 0.99, 0.95); !ok || j > 990 || k < 990 || k > 1000 {
		t.Errorf("p99 ranks of 1000: %d %d %v", j, k, ok)
	}
	if j, k, ok := quantileRanks(100000, 0.99, 0.95); !ok || j > 99000 || k < 99000 {
		t.Errorf("p99 ranks of 100000: %d %d %v", j, k, ok)
	}
}

// Two traces analysed together: totals add up, each trace keeps its own units and connections.
func TestAnalyzeTwoTraces(t *testing.T) {
	p := fixturePath(t, "traces/pingpong.plt")
	v := writeTrace(t, "v.plt", fixtures.Meta("ebpf", "venus"), func(w *trace.Writer) error {
		return fixtures.Venus(w, fixtures.VenusOptions{Tokens: 4, Uploads: 2, Source: trace.SourceEBPF})
	})
	one, err := Analyze(protocol.Files([]string{p}, nil), Options{})
	if err != nil {
		t.Fatal(err)
	}
	two, err := Analyze(protocol.Files([]string{v}, nil), Options{})
	if err != nil {
		t.Fatal(err)
	}
	both, err := Analyze(protocol.Files([]string{p, v}, nil), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if both.Events != one.Events+two.Events || both.RoundTrips.Count != one.RoundTrips.Count+two.RoundTrips.Count ||
		len(both.Connections) != len(one.Connections)+len(two.Connections) || len(both.Traces) != 2 || len(both.Meta) != 2 {
		t.Errorf("both: events %d, round trips %d, %d connections", both.Events, both.RoundTrips.Count, len(both.Connections))
	}
	if len(both.Units) != 1 || both.Units[0] != two.Units[0] {
		t.Errorf("units %+v, want the venus trace's %+v", both.Units, two.Units)
	}
}

func TestAnalyzeBadPaths(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{filepath.Join(dir, "none.plt"), dir} {
		_, err := Analyze(protocol.Files([]string{p}, nil), Options{})
		var re *protocol.ReadError
		if !errors.As(err, &re) || re.Path != p {
			t.Errorf("%s: error %v, want a ReadError naming it", p, err)
		}
	}
	if _, err := Analyze(protocol.Files([]string{fixturePath(t, "traces/pingpong.plt")}, nil), Options{Protocol: "smtp"}); err == nil {
		t.Error("unknown protocol accepted")
	}
}

// Units opened by a command named on the command line, for traces without markers.
func TestAnalyzeUnitCommands(t *testing.T) {
	path := writeTrace(t, "v.plt", fixtures.Meta("ebpf", "venus"), func(w *trace.Writer) error {
		return fixtures.Venus(w, fixtures.VenusOptions{Tokens: 8, Uploads: 4, Source: trace.SourceEBPF})
	})
	s, err := Analyze(protocol.Files([]string{path}, nil), Options{UnitCommands: "vkQueueSubmit", Unit: "step"})
	if err != nil {
		t.Fatal(err)
	}
	// a unit runs through the first reply after its vkQueueSubmit: the first one lacks the
	// previous token's wait and read, so 7 of the 8 are the steady state
	if len(s.Units) != 1 || s.Units[0].Name != "step" || s.Units[0].Count != 7 || s.Units[0].Shape != "steady" ||
		s.Units[0].MessagesPerUnit != 9 || s.Units[0].RequestsPerUnit != 5 || s.Units[0].RepliesPerUnit != 4 || s.Units[0].RoundTripsPerUnit != 4 {
		t.Errorf("units %+v", s.Units)
	}
	var all uint64
	for _, u := range s.UnitShapes {
		all += u.Count
	}
	if all != 8 {
		t.Errorf("unit shapes %+v, want 8 units in all", s.UnitShapes)
	}
}

// Markers from a second trace (a tracer's) give an eBPF trace without markers its tokens.
func TestAnalyzeMarkersFromTrace(t *testing.T) {
	ebpf := writeTrace(t, "e.plt", fixtures.Meta("ebpf", "venus"), func(w *trace.Writer) error {
		return fixtures.Venus(w, fixtures.VenusOptions{Tokens: 6, Uploads: 3, Source: trace.SourceEBPF, Seed: 9})
	})
	tracer := writeTrace(t, "t.plt", fixtures.Meta("tracer", "venus"), func(w *trace.Writer) error {
		return fixtures.Venus(w, fixtures.VenusOptions{Tokens: 6, Uploads: 3, Seed: 9})
	})
	want, err := Analyze(protocol.Files([]string{tracer}, nil), Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Analyze(protocol.Files([]string{ebpf}, nil), Options{Markers: tracer})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Units) != 1 || got.Units[0].MessagesPerUnit != want.Units[0].MessagesPerUnit ||
		got.Units[0].RoundTripsPerUnit != want.Units[0].RoundTripsPerUnit || got.Units[0].Count != 6 {
		t.Errorf("units %+v, want %+v", got.Units, want.Units)
	}
	if _, err := Analyze(protocol.Files([]string{ebpf}, nil), Options{Markers: filepath.Join(t.TempDir(), "none.plt")}); err == nil {
		t.Error("a missing markers file was accepted")
	}
}
