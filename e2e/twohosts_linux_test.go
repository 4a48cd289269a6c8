//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/ggmlpeer"
	"github.com/perflab/perflab/internal/testutil"
	"github.com/perflab/perflab/trace"
)

// ggmlPeerEnv makes the e2e test binary a ggml-rpc peer (runGGMLPeer) instead of running tests:
// "serve HOST:PORT" or "client HOST:PORT".
const ggmlPeerEnv = "PERFLAB_E2E_GGML_PEER"

// tbfRate is the rate limit of every veth in these tests: slow enough that a 100 kB transfer
// takes milliseconds on the wire, fast enough that a run stays short.
const (
	tbfRate    = "200mbit"
	tbfRateBps = 200e6
)

// netns is a network namespace made by the test, deleted when it ends.
type netns string

// newNetns makes network namespace perflab-NAME-PID with its loopback up.
func newNetns(t *testing.T, name string) netns {
	t.Helper()
	ns := netns(fmt.Sprintf("perflab-%s-%d", name, os.Getpid()))
	sh(t, "ip", "netns", "add", string(ns))
	t.Cleanup(func() { exec.Command("ip", "netns", "del", string(ns)).Run() })
	sh(t, "ip", "-n", string(ns), "link", "set", "lo", "up")
	return ns
}

// veth joins a and b with a veth pair, a at aIP and b at bIP (a /30 of the benchmarking range
// 198.18.0.0/15, reachable only inside the two namespaces), each end limited to tbfRate by a
// token bucket filter.
func veth(t *testing.T, a, b netns, tag, aIP, bIP string) {
	t.Helper()
	ea, eb := fmt.Sprintf("pl%s%da", tag, os.Getpid()%100000), fmt.Sprintf("pl%s%db", tag, os.Getpid()%100000)
	sh(t, "ip", "link", "add", ea, "type", "veth", "peer", "name", eb)
	t.Cleanup(func() { exec.Command("ip", "link", "del", ea).Run() })
	for _, e := range []struct {
		ns        netns
		dev, cidr string
	}{{a, ea, aIP + "/30"}, {b, eb, bIP + "/30"}} {
		sh(t, "ip", "link", "set", e.dev, "netns", string(e.ns))
		sh(t, "ip", "-n", string(e.ns), "addr", "add", e.cidr, "dev", e.dev)
		sh(t, "ip", "-n", string(e.ns), "link", "set", e.dev, "up")
		sh(t, "tc", "-n", string(e.ns), "qdisc", "add", "dev", e.dev, "root", "tbf", "rate", tbfRate, "burst", "32kb", "latency", "100ms")
	}
}

// sh runs a setup command and fails the test when it fails.
func sh(t *testing.T, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// needNetns skips (fails under PERFLAB_E2E=1) when ip, tc or root are missing.
func needNetns(t *testing.T) {
	t.Helper()
	need(t, "ip", "iproute2")
	need(t, "tc", "iproute2")
}

// recorded is a `perflab record` running in a namespace.
type recorded struct {
	cmd  *exec.Cmd
	errb *testutil.SyncBuffer
	done chan error
}

// record starts `perflab record -o out -- args...` inside ns, with env added.
func record(t *testing.T, ns netns, out string, env []string, args ...string) *recorded {
	t.Helper()
	full := append([]string{"netns", "exec", string(ns), perflab, "record", "-o", out, "--"}, args...)
	cmd := exec.Command("ip", full...)
	cmd.Env = append(os.Environ(), env...)
	r := &recorded{cmd: cmd, errb: &testutil.SyncBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = r.errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-r.done
		r.done <- nil
	})
	return r
}

// waitFor waits until the recorded program's stderr says want.
func (r *recorded) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Contains(r.errb.String(), want) {
			return
		}
		select {
		case err := <-r.done:
			r.done <- err
			t.Fatalf("recording exited (%v) before %q:\n%s", err, want, r.errb.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("no %q within 30 s:\n%s", want, r.errb.String())
}

// wait waits for the recording to end by itself (its command exited), at most 90 s.
func (r *recorded) wait(t *testing.T, what string) {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err
		if err != nil {
			t.Fatalf("%s: %v\n%s", what, err, r.errb.String())
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("%s: still running after 90 s\n%s", what, r.errb.String())
	}
}

// stop ends a recording of a server with SIGINT (perflab record stops its command and closes
// the trace) and waits at most 30 s.
func (r *recorded) stop(t *testing.T, what string) {
	t.Helper()
	r.cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-r.done:
		r.done <- err
		if err != nil {
			t.Fatalf("%s: %v\n%s", what, err, r.errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: did not stop within 30 s of SIGINT\n%s", what, r.errb.String())
	}
}

// clock is what merge --json reports of one input.
type clock struct {
	OffsetNS   int64   `json:"offset_ns"`
	OffsetLoNS int64   `json:"offset_lo_ns"`
	OffsetHiNS int64   `json:"offset_hi_ns"`
	DriftPPM   float64 `json:"drift_ppm"`
	DriftLoPPM float64 `json:"drift_lo_ppm"`
	DriftHiPPM float64 `json:"drift_hi_ppm"`
	RefNS      int64   `json:"ref_ns"`
	Messages   int     `json:"messages"`
}

// mergeJSON merges traces into out and returns the clocks.
func mergeJSON(t *testing.T, dir, out string, traces ...string) []clock {
	t.Helper()
	r := mustPerflab(t, dir, append([]string{"merge", "--json", "-o", out}, traces...)...)
	var m struct{ Clocks []clock }
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("merge --json: %v\n%s", err, r.stdout)
	}
	if r.stderr != "" {
		t.Logf("merge: %s", r.stderr)
	}
	for _, p := range traces {
		f, err := trace.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for src, n := range f.Lost {
			if n > 0 {
				t.Logf("%s: %d events lost (%s)", filepath.Base(p), n, src)
			}
		}
	}
	return m.Clocks
}

// shift writes a copy of the trace at in whose clock reads t + offset + drift·(t − pivot) at true
// time t, as another host's clock would.
func shift(t *testing.T, in, out string, offset, drift float64, pivot int64) {
	t.Helper()
	f, err := trace.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	at := func(ts int64) int64 { return ts + int64(math.Round(offset+drift*float64(ts-pivot))) }
	w, err := trace.Create(out, f.Meta, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range f.Connections {
		c.FirstSeen, c.LastSeen = at(c.FirstSeen), at(c.LastSeen)
		if err := w.WriteConnection(&c); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range f.Events {
		end := at(e.TS + e.Dur)
		e.TS = at(e.TS)
		e.Dur = end - e.TS
		if err := w.WriteEvent(&e); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range f.Markers {
		end := at(m.TS + m.Dur)
		m.TS = at(m.TS)
		m.Dur = end - m.TS
		if err := w.WriteMarker(&m); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// checkClock checks that merge's bounds for a host hold the zero offset and drift of one
// machine's clock (unshifted) or recover the known shift (offset ns, drift) applied around pivot.
func checkClock(t *testing.T, name string, k clock, offset, drift float64, pivot int64) {
	t.Helper()
	// The shifted clock reads s = t + O + D(t − P); the reference's is t = P + (s − O − P)/(1+D),
	// which around Ref is t = s + θ + δ(s − Ref) with:
	ref := float64(k.RefNS)
	theta := float64(pivot) + (ref-offset-float64(pivot))/(1+drift) - ref
	delta := 1/(1+drift) - 1
	t.Logf("%s: offset %d [%d, %d] ns (true %.0f), drift %.3f [%.3f, %.3f] ppm (true %.3f), %d messages",
		name, k.OffsetNS, k.OffsetLoNS, k.OffsetHiNS, theta, k.DriftPPM, k.DriftLoPPM, k.DriftHiPPM, delta*1e6, k.Messages)
	const slack = 2 // ns of rounding in shift
	if theta < float64(k.OffsetLoNS)-slack || theta > float64(k.OffsetHiNS)+slack {
		t.Errorf("%s: true offset %.0f ns outside [%d, %d]", name, theta, k.OffsetLoNS, k.OffsetHiNS)
	}
	if delta*1e6 < k.DriftLoPPM-0.01 || delta*1e6 > k.DriftHiPPM+0.01 {
		t.Errorf("%s: true drift %.3f ppm outside [%.3f, %.3f]", name, delta*1e6, k.DriftLoPPM, k.DriftHiPPM)
	}
}

// parts is a split of analyze's two_hosts.
type parts struct {
	RTT     float64 `json:"rtt_us"`
	Client  float64 `json:"client_us"`
	NetOut  float64 `json:"net_out_us"`
	Queue   float64 `json:"queue_us"`
	Service float64 `json:"service_us"`
	NetBack float64 `json:"net_back_us"`
}

type twoHosts struct {
	Hosts      []struct{ Input string }
	Messages   uint64  `json:"messages"`
	BothEnds   uint64  `json:"messages_both_ends"`
	RoundTrips uint64  `json:"round_trips"`
	Unmatched  uint64  `json:"round_trips_unmatched"`
	ClockUS    float64 `json:"clock_uncertainty_us"`
	Mean       parts   `json:"mean_us"`
	Commands   []struct {
		Name  string `json:"name"`
		Count uint64 `json:"count"`
		Mean  parts  `json:"mean_us"`
	} `json:"commands"`
	Slowest []json.RawMessage `json:"slowest"`
}

// analyzeTwoHosts runs analyze on a merged trace and checks what holds on any: every round trip
// matched at both ends, every message seen at both, the parts summing to the RTT.
func analyzeTwoHosts(t *testing.T, dir, merged string, hosts int) twoHosts {
	t.Helper()
	r := mustPerflab(t, dir, "analyze", "--format", "json", merged)
	var s struct {
		TwoHosts *twoHosts `json:"two_hosts"`
		Warnings []string  `json:"warnings"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatal(err)
	}
	h := s.TwoHosts
	if h == nil {
		t.Fatalf("analyze of a merged trace: no two_hosts")
	}
	m := h.Mean
	t.Logf("%s: %d round trips, %d messages, clock ±%.1f µs: rtt %.1f = client %.1f + out %.1f + queue %.1f + service %.1f + back %.1f µs",
		filepath.Base(merged), h.RoundTrips, h.Messages, h.ClockUS, m.RTT, m.Client, m.NetOut, m.Queue, m.Service, m.NetBack)
	if len(h.Hosts) != hosts || h.RoundTrips == 0 || h.Unmatched != 0 || h.BothEnds != h.Messages || len(h.Slowest) == 0 {
		t.Errorf("%d hosts, %d round trips (%d without a server end), %d of %d messages at both ends; want %d hosts, all matched",
			len(h.Hosts), h.RoundTrips, h.Unmatched, h.BothEnds, h.Messages, hosts)
	}
	if sum := m.Client + m.NetOut + m.Queue + m.Service + m.NetBack; math.Abs(sum-m.RTT) > 0.01 {
		t.Errorf("parts sum to %.3f µs, RTT %.3f", sum, m.RTT)
	}
	for _, w := range s.Warnings {
		if strings.Contains(w, "two hosts:") && strings.Contains(w, "below the clock uncertainty") {
			t.Errorf("warning: %s", w)
		}
	}
	return *h
}

// TestTwoHostsNetns records the bundled server and client in two network namespaces joined by
// a rate-limited veth pair, each with eBPF, merges the recordings, and checks that the merge
// bounds hold the zero offset of one machine's clock, recover a known shift and drift of the
// server's, and that analyze splits the round trips with the TBF's transfer time in the network.
func TestTwoHostsNetns(t *testing.T) {
	needNetns(t)
	dir := t.TempDir()
	a, b := newNetns(t, "cli"), newNetns(t, "srv")
	veth(t, a, b, "v", "198.18.0.1", "198.18.0.2")

	server := filepath.Join(dir, "server.plt")
	srv := record(t, b, server, nil, perflab, "venus", "serve", "--allow-remote", "--listen", "tcp://198.18.0.2:5556")
	srv.waitFor(t, "listening on")
	client := filepath.Join(dir, "client.plt")
	cl := record(t, a, client, nil, perflab, "venus", "run", "--connect", "tcp://198.18.0.2:5556",
		"--workload", "llm", "--tokens", "40", "--delay", "200us", "--no-verify")
	cl.wait(t, "record the client")
	srv.stop(t, "record the server")

	ks := mergeJSON(t, dir, filepath.Join(dir, "both.plt"), client, server)
	checkClock(t, "unshifted", ks[1], 0, 0, 0)
	h := analyzeTwoHosts(t, dir, filepath.Join(dir, "both.plt"), 2)
	for _, c := range h.Commands {
		if c.Name != "vnTransferMemoryData" {
			continue
		}
		// The weights go up in transfers of about 100 kB; the TBF lets 200 Mbit/s through.
		minUS := 0.5 * 80e3 * 8 / tbfRateBps * 1e6
		if c.Mean.NetOut < minUS {
			t.Errorf("vnTransferMemoryData: network out %.1f µs on average, want the TBF's transfer time (at least %.0f µs)", c.Mean.NetOut, minUS)
		}
	}

	f, err := trace.ReadFile(server)
	if err != nil {
		t.Fatal(err)
	}
	pivot := f.Meta.StartMono
	for _, c := range []struct {
		name          string
		offset, drift float64
	}{{"ahead", 3.7e9, 80e-6}, {"behind", -2.25e9, -150e-6}} {
		shifted := filepath.Join(dir, c.name+".plt")
		shift(t, server, shifted, c.offset, c.drift, pivot)
		out := filepath.Join(dir, c.name+"-both.plt")
		ks := mergeJSON(t, dir, out, client, shifted)
		checkClock(t, c.name, ks[1], c.offset, c.drift, pivot)
		hs := analyzeTwoHosts(t, dir, out, 2)
		if hs.RoundTrips != h.RoundTrips || math.Abs(hs.Mean.RTT-h.Mean.RTT) > 0.01 {
			t.Errorf("%s: %d round trips of %.1f µs, unshifted %d of %.1f", c.name, hs.RoundTrips, hs.Mean.RTT, h.RoundTrips, h.Mean.RTT)
		}
		if tol := h.ClockUS + hs.ClockUS; math.Abs(hs.Mean.NetOut-h.Mean.NetOut) > tol {
			t.Errorf("%s: network out %.1f µs, unshifted %.1f: further apart than the clock intervals (±%.1f µs)", c.name, hs.Mean.NetOut, h.Mean.NetOut, tol)
		}
	}
}

// TestTwoHostsGGML does the same with ggml-rpc traffic from the test peer.
func TestTwoHostsGGML(t *testing.T) {
	needNetns(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	a, b := newNetns(t, "gcli"), newNetns(t, "gsrv")
	veth(t, a, b, "g", "198.18.0.5", "198.18.0.6")
	addr := "198.18.0.6:50052"
	server := filepath.Join(dir, "server.plt")
	srv := record(t, b, server, []string{ggmlPeerEnv + "=serve " + addr}, exe)
	srv.waitFor(t, "ggml peer: listening")
	client := filepath.Join(dir, "client.plt")
	cl := record(t, a, client, []string{ggmlPeerEnv + "=client " + addr}, exe)
	cl.wait(t, "record the ggml client")
	srv.stop(t, "record the ggml server")

	ks := mergeJSON(t, dir, filepath.Join(dir, "both.plt"), client, server)
	checkClock(t, "unshifted", ks[1], 0, 0, 0)
	h := analyzeTwoHosts(t, dir, filepath.Join(dir, "both.plt"), 2)
	found := false
	for _, c := range h.Commands {
		found = found || c.Name == "GET_TENSOR"
	}
	if !found {
		t.Errorf("no GET_TENSOR round trips split: %+v", h.Commands)
	}
	f, err := trace.ReadFile(server)
	if err != nil {
		t.Fatal(err)
	}
	shifted := filepath.Join(dir, "shifted.plt")
	shift(t, server, shifted, -1.5e9, 60e-6, f.Meta.StartMono)
	ks = mergeJSON(t, dir, filepath.Join(dir, "shifted-both.plt"), client, shifted)
	checkClock(t, "shifted", ks[1], -1.5e9, 60e-6, f.Meta.StartMono)
}

// TestTwoHostsThree records one client that talks to two servers, each in its own namespace
// behind its own rate-limited veth: three recordings, each server's clock shifted differently.
func TestTwoHostsThree(t *testing.T) {
	needNetns(t)
	dir := t.TempDir()
	a, b, c := newNetns(t, "3cli"), newNetns(t, "3sa"), newNetns(t, "3sb")
	veth(t, a, b, "x", "198.18.0.9", "198.18.0.10")
	veth(t, a, c, "y", "198.18.0.13", "198.18.0.14")
	servers := []string{filepath.Join(dir, "sa.plt"), filepath.Join(dir, "sb.plt")}
	var srvs []*recorded
	for i, ns := range []netns{b, c} {
		ip := []string{"198.18.0.10", "198.18.0.14"}[i]
		r := record(t, ns, servers[i], nil, perflab, "venus", "serve", "--allow-remote", "--listen", "tcp://"+ip+":5556")
		r.waitFor(t, "listening on")
		srvs = append(srvs, r)
	}
	client := filepath.Join(dir, "client.plt")
	run := func(ip string) string {
		return fmt.Sprintf("%s venus run --connect tcp://%s:5556 --workload llm --tokens 25 --delay 200us --no-verify", perflab, ip)
	}
	cl := record(t, a, client, nil, "sh", "-c", run("198.18.0.10")+" && "+run("198.18.0.14"))
	cl.wait(t, "record the client")
	for i, r := range srvs {
		r.stop(t, fmt.Sprintf("record server %d", i))
	}

	ks := mergeJSON(t, dir, filepath.Join(dir, "all.plt"), client, servers[0], servers[1])
	checkClock(t, "server 0 unshifted", ks[1], 0, 0, 0)
	checkClock(t, "server 1 unshifted", ks[2], 0, 0, 0)
	analyzeTwoHosts(t, dir, filepath.Join(dir, "all.plt"), 3)

	shifts := []struct{ offset, drift float64 }{{-1.25e9, -40e-6}, {0.5e9, 60e-6}}
	var shifted []string
	var pivots []int64
	for i, s := range servers {
		f, err := trace.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		pivots = append(pivots, f.Meta.StartMono)
		out := filepath.Join(dir, fmt.Sprintf("shifted%d.plt", i))
		shift(t, s, out, shifts[i].offset, shifts[i].drift, f.Meta.StartMono)
		shifted = append(shifted, out)
	}
	ks = mergeJSON(t, dir, filepath.Join(dir, "all-shifted.plt"), client, shifted[0], shifted[1])
	for i := range shifted {
		checkClock(t, fmt.Sprintf("server %d shifted", i), ks[i+1], shifts[i].offset, shifts[i].drift, pivots[i])
	}
	analyzeTwoHosts(t, dir, filepath.Join(dir, "all-shifted.plt"), 3)
}

// runGGMLPeer is the test binary run as a ggml-rpc peer: "serve ADDR" answers every connection
// until killed; "client ADDR" runs llama.cpp-like sessions for about 1.5 s (long enough for the
// merge to bound the drift), pausing between them.
func runGGMLPeer(spec string) error {
	role, addr, _ := strings.Cut(spec, " ")
	switch role {
	case "serve":
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "ggml peer: listening on", addr)
		return (&ggmlpeer.Server{Version: ggmlpeer.Version{Major: 5}}).Serve(ln)
	case "client":
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		cl, err := ggmlpeer.Dial(c)
		if err != nil {
			return err
		}
		for start := time.Now(); time.Since(start) < 1500*time.Millisecond; {
			if err := cl.Workload(20); err != nil {
				return err
			}
			time.Sleep(5 * time.Millisecond)
		}
		return nil
	}
	return fmt.Errorf("%s=%q: want serve ADDR or client ADDR", ggmlPeerEnv, spec)
}
