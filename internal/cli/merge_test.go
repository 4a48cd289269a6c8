package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/perflab/perflab/trace"
	"github.com/perflab/perflab/venusd"
)

// recordTwoHosts runs a venusd server and a ping client over loopback TCP, each with its own
// tracer trace (as two hosts would record them), and returns the client's and the server's.
func recordTwoHosts(t *testing.T) (clientPath, serverPath string) {
	t.Helper()
	paths := recordHosts(t, 1, 1500*time.Millisecond)
	return paths[0], paths[1]
}

// recordHosts runs n venusd servers and one client that pings each in turn for d over loopback
// TCP, every process with its own tracer trace, and returns the client's trace then the servers'.
func recordHosts(t *testing.T, n int, d time.Duration) []string {
	t.Helper()
	return recordHostsWith(t, n, func(c *venusd.ClientConfig) {
		c.Workload = "ping"
		c.Ping = venusd.PingConfig{Duration: d, Warmup: 10, RequestBytes: 64, ReplyBytes: 64}
	})
}

// recordHostsWith is recordHosts with the client's workload set by set.
func recordHostsWith(t *testing.T, n int, set func(*venusd.ClientConfig)) []string {
	t.Helper()
	dir := t.TempDir()
	paths := []string{filepath.Join(dir, "client.plt")}
	cw, err := trace.Create(paths[0], venusd.TraceMeta([]string{"perflab", "venus", "run", "--trace", paths[0]}, 64), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		sp := filepath.Join(dir, fmt.Sprintf("server%d.plt", i))
		paths = append(paths, sp)
		sw, err := trace.Create(sp, venusd.TraceMeta([]string{"perflab", "venus", "serve", "--trace", sp}, 64), nil)
		if err != nil {
			t.Fatal(err)
		}
		s, err := venusd.NewServer(venusd.ServerConfig{Listen: "tcp://127.0.0.1:0", Trace: sw, Getenv: func(string) string { return "" }})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Serve(ctx) }()
		rctx, rcancel := context.WithTimeout(context.Background(), 60*time.Second)
		cc := venusd.ClientConfig{Connect: s.Addr(), Trace: cw, NoVerify: true, Getenv: func(string) string { return "" }}
		set(&cc)
		_, err = venusd.RunWorkload(rctx, cc)
		rcancel()
		cancel()
		if serr := <-done; serr != nil {
			t.Errorf("serve: %v", serr)
		}
		if err != nil {
			t.Fatalf("venus run: %v", err)
		}
		if err := sw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cw.Close(); err != nil {
		t.Fatal(err)
	}
	return paths
}

// shiftTrace writes a copy of the trace at in whose clock reads t + offset + drift·(t − pivot)
// at true time t (starts and ends of events alike), as another host's clock would.
func shiftTrace(t *testing.T, in, out string, offset, drift float64, pivot int64) {
	t.Helper()
	f, err := trace.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	shift := func(ts int64) int64 { return ts + int64(math.Round(offset+drift*float64(ts-pivot))) }
	w, err := trace.Create(out, f.Meta, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range f.Connections {
		c.FirstSeen, c.LastSeen = shift(c.FirstSeen), shift(c.LastSeen)
		if err := w.WriteConnection(&c); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range f.Events {
		end := shift(e.TS + e.Dur)
		e.TS = shift(e.TS)
		e.Dur = end - e.TS
		if err := w.WriteEvent(&e); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range f.Markers {
		end := shift(m.TS + m.Dur)
		m.TS = shift(m.TS)
		m.Dur = end - m.TS
		if err := w.WriteMarker(&m); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func readMerged(t *testing.T, path string) *trace.File {
	t.Helper()
	f, err := trace.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Meta.Clocks) != 2 {
		t.Fatalf("merged meta.clocks: %d entries, want 2", len(f.Meta.Clocks))
	}
	return f
}

// TestMergeRecoversClock records a real venusd client and server separately, shifts the
// server's clock by a known offset and drift, and checks that perflab merge's bounds contain the
// shift it has to undo, and that unshifted they contain zero.
func TestMergeRecoversClock(t *testing.T) {
	clientPath, serverPath := recordTwoHosts(t)
	cf, err := trace.ReadFile(clientPath)
	if err != nil {
		t.Fatal(err)
	}
	sf, err := trace.ReadFile(serverPath)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()

	t.Run("unshifted", func(t *testing.T) {
		out := filepath.Join(dir, "both.plt")
		code, stdout, stderr := runCLI(t, "merge", "-o", out, clientPath, serverPath)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if !strings.Contains(stdout, "wrote "+out) {
			t.Errorf("stdout: %s", stdout)
		}
		m := readMerged(t, out)
		k := m.Meta.Clocks[1]
		t.Logf("offset %d [%d, %d] ns, drift %.3f [%.3f, %.3f] ppm, %d messages", k.OffsetNS, k.OffsetLoNS, k.OffsetHiNS, k.DriftPPM, k.DriftLoPPM, k.DriftHiPPM, k.Messages)
		if k.OffsetLoNS > 0 || k.OffsetHiNS < 0 || k.DriftLoPPM > 0 || k.DriftHiPPM < 0 {
			t.Errorf("bounds exclude the zero offset and drift of one machine's clock: %+v", k)
		}
		if k.Messages < 200 {
			t.Errorf("%d messages matched, want hundreds from a 1.5 s ping run", k.Messages)
		}
		if got, want := len(m.Events), len(cf.Events)+len(sf.Events); got != want {
			t.Errorf("merged trace: %d events, want %d", got, want)
		}
		if !sort.SliceIsSorted(m.Events, func(i, j int) bool { return m.Events[i].TS < m.Events[j].TS }) {
			t.Error("merged events are not in time order")
		}
		hosts := map[uint64]bool{}
		for _, c := range m.Connections {
			hosts[c.ID>>40] = true
		}
		if len(hosts) != 2 {
			t.Errorf("merged connections from %d inputs, want 2", len(hosts))
		}
	})

	for _, c := range []struct {
		name          string
		offset, drift float64
	}{
		{"ahead", 3.7e9, 80e-6},
		{"behind", -2.25e9, -150e-6},
	} {
		t.Run(c.name, func(t *testing.T) {
			pivot := sf.Meta.StartMono
			shifted := filepath.Join(dir, c.name+".plt")
			shiftTrace(t, serverPath, shifted, c.offset, c.drift, pivot)
			out := filepath.Join(dir, c.name+"-both.plt")
			code, _, stderr := runCLI(t, "merge", "-o", out, clientPath, shifted)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			k := readMerged(t, out).Meta.Clocks[1]
			// The shifted clock reads s = t + O + D(t − P); the client's clock is t = P + (s − O − P)/(1+D).
			// Around Ref that is t = s + θ + δ(s − Ref) with:
			ref := float64(k.RefNS)
			theta := float64(pivot) + (ref-c.offset-float64(pivot))/(1+c.drift) - ref
			delta := 1/(1+c.drift) - 1
			t.Logf("offset %d [%d, %d] ns (true %.0f), drift %.3f [%.3f, %.3f] ppm (true %.3f)", k.OffsetNS, k.OffsetLoNS, k.OffsetHiNS, theta, k.DriftPPM, k.DriftLoPPM, k.DriftHiPPM, delta*1e6)
			const slack = 2 // ns of rounding in shiftTrace
			if theta < float64(k.OffsetLoNS)-slack || theta > float64(k.OffsetHiNS)+slack {
				t.Errorf("true offset %.0f ns outside [%d, %d]", theta, k.OffsetLoNS, k.OffsetHiNS)
			}
			if delta*1e6 < k.DriftLoPPM-0.01 || delta*1e6 > k.DriftHiPPM+0.01 {
				t.Errorf("true drift %.3f ppm outside [%.3f, %.3f]", delta*1e6, k.DriftLoPPM, k.DriftHiPPM)
			}
			if w := k.OffsetHiNS - k.OffsetLoNS; w > 50e6 {
				t.Errorf("offset interval %d ns wide: the messages should bound it far tighter", w)
			}
		})
	}
}

// TestMergeRefuses checks the one-line refusals: traces that share no connection, and traffic
// in one direction only, which bounds the offset from one side.
func TestMergeRefuses(t *testing.T) {
	clientPath, serverPath := recordTwoHosts(t)
	dir := t.TempDir()

	sf, err := trace.ReadFile(serverPath)
	if err != nil {
		t.Fatal(err)
	}
	oneWay := filepath.Join(dir, "server-recv-only.plt")
	w, err := trace.Create(oneWay, sf.Meta, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range sf.Connections {
		w.WriteConnection(&c)
	}
	for _, e := range sf.Events {
		if e.Dir != trace.DirSend {
			w.WriteEvent(&e)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name, a, b, want string
	}{
		{"no shared connection", clientPath, clientPath, "no connection matches"},
		{"one direction", clientPath, oneWay, "both directions are needed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, "out.plt")
			code, _, stderr := runCLI(t, "merge", "-o", out, c.a, c.b)
			if code != 2 {
				t.Fatalf("exit %d, want 2: %s", code, stderr)
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if !strings.Contains(lines[0], c.want) || !strings.Contains(stderr, "perflab merge -h") {
				t.Errorf("stderr: %q, want one line with %q then the usage hint", stderr, c.want)
			}
		})
	}
	code, _, stderr := runCLI(t, "merge", "-o", filepath.Join(dir, "x.plt"), clientPath)
	if code != 2 || !strings.Contains(stderr, "at least two traces") {
		t.Errorf("one trace: exit %d, %q", code, stderr)
	}
}

// TestMergeThreeHosts merges one client's recording with the recordings of the two servers it
// talked to, each server's clock shifted differently: both are placed against the client, and
// each placement's bounds contain its shift.
func TestMergeThreeHosts(t *testing.T) {
	paths := recordHosts(t, 2, time.Second)
	dir := t.TempDir()
	shifts := []struct{ offset, drift float64 }{{1.25e9, 40e-6}, {-0.5e9, -60e-6}}
	args := []string{"merge", "--json", "-o", filepath.Join(dir, "all.plt"), paths[0]}
	var pivots []int64
	for i, sh := range shifts {
		f, err := trace.ReadFile(paths[i+1])
		if err != nil {
			t.Fatal(err)
		}
		pivots = append(pivots, f.Meta.StartMono)
		p := filepath.Join(dir, fmt.Sprintf("shifted%d.plt", i))
		shiftTrace(t, paths[i+1], p, sh.offset, sh.drift, f.Meta.StartMono)
		args = append(args, p)
	}
	code, stdout, stderr := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res struct {
		Clocks []trace.Clock `json:"clocks"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("--json output: %v\n%s", err, stdout)
	}
	if len(res.Clocks) != 3 || res.Clocks[0].Peer != -1 {
		t.Fatalf("clocks: %+v", res.Clocks)
	}
	for i, sh := range shifts {
		k := res.Clocks[i+1]
		ref, pivot := float64(k.RefNS), float64(pivots[i])
		theta := pivot + (ref-sh.offset-pivot)/(1+sh.drift) - ref
		delta := (1/(1+sh.drift) - 1) * 1e6
		t.Logf("server %d: offset %d [%d, %d] ns (true %.0f), drift %.3f [%.3f, %.3f] ppm (true %.3f), peer %d", i, k.OffsetNS, k.OffsetLoNS, k.OffsetHiNS, theta, k.DriftPPM, k.DriftLoPPM, k.DriftHiPPM, delta, k.Peer)
		if k.Peer != 0 {
			t.Errorf("server %d placed against input %d, want the client (0)", i, k.Peer)
		}
		if theta < float64(k.OffsetLoNS)-2 || theta > float64(k.OffsetHiNS)+2 {
			t.Errorf("server %d: true offset %.0f ns outside [%d, %d]", i, theta, k.OffsetLoNS, k.OffsetHiNS)
		}
		if delta < k.DriftLoPPM-0.01 || delta > k.DriftHiPPM+0.01 {
			t.Errorf("server %d: true drift %.3f ppm outside [%.3f, %.3f]", i, delta, k.DriftLoPPM, k.DriftHiPPM)
		}
	}
}
