package export

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/internal/testutil"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

func writePprof(t *testing.T, paths []string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Pprof(&buf, protocol.Files(paths, nil), analyzers.Options{Protocol: "venus"}); err != nil {
		t.Fatalf("Pprof: %v", err)
	}
	return buf.Bytes()
}

func parsePprof(t *testing.T, b []byte) *profile.Profile {
	t.Helper()
	p, err := profile.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("profile.Parse: %v", err)
	}
	if err := p.CheckValid(); err != nil {
		t.Fatalf("CheckValid: %v", err)
	}
	return p
}

// sums adds up each sample type over the profile, and over the samples whose stack holds a
// frame named frame (when frame is not "").
func sums(p *profile.Profile, frame string) map[string]int64 {
	out := map[string]int64{}
	for _, s := range p.Sample {
		if frame != "" {
			found := false
			for _, l := range s.Location {
				for _, ln := range l.Line {
					found = found || ln.Function.Name == frame
				}
			}
			if !found {
				continue
			}
		}
		for i, st := range p.SampleType {
			out[st.Type] += s.Value[i]
		}
	}
	return out
}

func TestPprofRoundTrip(t *testing.T) {
	const tokens = 4
	path := synthTrace{tokens: tokens}.write(t, t.TempDir(), "venus.plt")
	p := parsePprof(t, writePprof(t, []string{path}))
	if p.DefaultSampleType != "rtt" {
		t.Errorf("default sample type %q, want rtt", p.DefaultSampleType)
	}
	var types []string
	for _, st := range p.SampleType {
		types = append(types, st.Type+"/"+st.Unit)
	}
	if got, want := strings.Join(types, " "), "messages/count latency/nanoseconds bytes/bytes round_trips/count rtt/nanoseconds"; got != want {
		t.Errorf("sample types %q, want %q", got, want)
	}
	const roundTrips = 6 + (tokens - 1) + 2
	all := sums(p, "")
	// Messages: a request and a reply per round trip, a flush and a submit per token (the
	// failed call and the unix-socket write carry no Venus frame).
	if want := int64(2*roundTrips + 2*tokens); all["messages"] != want {
		t.Errorf("messages = %d, want %d", all["messages"], want)
	}
	if all["round_trips"] != roundTrips {
		t.Errorf("round trips = %d, want %d", all["round_trips"], roundTrips)
	}
	if all["rtt"] <= 0 || all["latency"] <= 0 || all["bytes"] <= 0 {
		t.Errorf("empty values: %v", all)
	}
	waits := sums(p, "vkWaitForFences")
	if waits["round_trips"] != tokens+1 {
		t.Errorf("vkWaitForFences round trips = %d, want %d", waits["round_trips"], tokens+1)
	}
	// Every stack is process → thread → connection → direction → command (leaf first).
	for _, s := range p.Sample {
		if len(s.Location) != 5 {
			t.Fatalf("stack depth %d, want 5", len(s.Location))
		}
		root := s.Location[4].Line[0].Function.Name
		thread := s.Location[3].Line[0].Function.Name
		conn := s.Location[2].Line[0].Function.Name
		if root != "venus-client pid 100" || !strings.HasPrefix(thread, root+" tid ") || !strings.HasPrefix(conn, "conn 1 tcp 127.0.0.1:40000") {
			t.Errorf("unexpected stack %q / %q / %q", root, thread, conn)
		}
	}
	testutil.Golden(t, "pprof_venus.txt", []byte(p.String()))
}

func TestPprofTwoTraces(t *testing.T) {
	dir := t.TempDir()
	a := synthTrace{tokens: 2}.write(t, dir, "a.plt")
	b := synthTrace{tokens: 3, tracer: true}.write(t, dir, "b.plt")
	p := parsePprof(t, writePprof(t, []string{a, b}))
	if got := sums(p, "a.plt: venus-client pid 100")["round_trips"]; got != 6+1+2 {
		t.Errorf("round trips of a.plt = %d, want 9", got)
	}
	if got := sums(p, "b.plt: venus-client pid 100")["round_trips"]; got != 6+2+2 {
		t.Errorf("round trips of b.plt = %d, want 10", got)
	}
}

func TestPprofDeterministic(t *testing.T) {
	path := synthTrace{tokens: 3}.write(t, t.TempDir(), "venus.plt")
	a, b := writePprof(t, []string{path}), writePprof(t, []string{path})
	if !bytes.Equal(a, b) {
		t.Error("two runs on the same trace gave different profiles")
	}
}

func TestPprofBadInput(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.plt")
	if err := os.WriteFile(junk, []byte("PK\x03\x04 not a trace"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := synthTrace{tokens: 1}.write(t, dir, "good.plt")
	for _, tc := range []struct {
		paths []string
		opt   analyzers.Options
	}{
		{nil, analyzers.Options{}},
		{[]string{filepath.Join(dir, "missing.plt")}, analyzers.Options{}},
		{[]string{junk}, analyzers.Options{}},
		{[]string{good}, analyzers.Options{Protocol: "no-such-protocol"}},
	} {
		var buf bytes.Buffer
		if err := Pprof(&buf, protocol.Files(tc.paths, nil), tc.opt); err == nil {
			t.Errorf("Pprof(%v, %+v): no error", tc.paths, tc.opt)
		}
		if buf.Len() != 0 {
			t.Errorf("Pprof(%v) wrote %d bytes before failing", tc.paths, buf.Len())
		}
	}
}

// TestPprofGoTool opens the profile with `go tool pprof -top`, as a user would.
func TestPprofGoTool(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found: ", err)
	}
	dir := t.TempDir()
	path := synthTrace{tokens: 3}.write(t, dir, "venus.plt")
	prof := filepath.Join(dir, "venus.pb.gz")
	if err := os.WriteFile(prof, writePprof(t, []string{path}), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	for _, tc := range []struct{ index, want string }{
		{"rtt", "vkWaitForFences"},
		{"bytes", "vkFlushMappedMemoryRanges"},
	} {
		cmd := exec.CommandContext(ctx, goBin, "tool", "pprof", "-top", "-sample_index="+tc.index, prof)
		cmd.Env = append(os.Environ(), "PPROF_TMPDIR="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go tool pprof -top: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), "venus-client pid 100") {
			t.Errorf("go tool pprof -top -sample_index=%s output lacks %q:\n%s", tc.index, tc.want, out)
		}
	}
}

// TestPprofFixtures golden-tests the profile of the committed fixture trace and of the fixtures
// package's venus-like trace.
func TestPprofFixtures(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		golden string
		path   string
	}{
		{"pprof_pingpong.txt", pingpongTrace(t, dir)},
		{"pprof_venus_ebpf.txt", venusTrace(t, dir, "venus-ebpf.plt", trace.SourceEBPF, 3)},
	} {
		var buf bytes.Buffer
		if err := Pprof(&buf, protocol.Files([]string{tc.path}, nil), analyzers.Options{}); err != nil {
			t.Fatal(err)
		}
		p := parsePprof(t, buf.Bytes())
		if sums(p, "")["round_trips"] == 0 {
			t.Errorf("%s: no round trips", tc.golden)
		}
		testutil.Golden(t, tc.golden, []byte(p.String()))
	}
}

// BenchmarkPprof measures the profile writer on a venus-like trace of about 90,000 calls.
func BenchmarkPprof(b *testing.B) {
	path := venusTrace(b, b.TempDir(), "big.plt", trace.SourceEBPF, 10_000)
	b.ReportAllocs()
	for b.Loop() {
		if err := Pprof(io.Discard, protocol.Files([]string{path}, nil), analyzers.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
