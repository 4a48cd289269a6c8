package cli

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/perflab/perflab/breakdown"
	"github.com/perflab/perflab/evidence"
	"github.com/perflab/perflab/venusd"
)

// analyzeTwoHosts merges the traces and returns analyze's two_hosts split of the merged trace.
func analyzeTwoHosts(t *testing.T, out string, traces ...string) *breakdown.Report {
	t.Helper()
	if code, _, stderr := runCLI(t, append([]string{"merge", "-o", out}, traces...)...); code != 0 {
		t.Fatalf("merge: exit %d: %s", code, stderr)
	}
	code, stdout, stderr := runCLI(t, "analyze", "--format", "json", out)
	if code != 0 {
		t.Fatalf("analyze: exit %d: %s", code, stderr)
	}
	var s struct {
		TwoHosts *breakdown.Report `json:"two_hosts"`
		Evidence *evidence.Report  `json:"evidence"`
		Totals   struct {
			Send struct{ Frames uint64 } `json:"send"`
		} `json:"totals"`
	}
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatal(err)
	}
	if s.TwoHosts == nil {
		t.Fatal("analyze of a merged trace has no two_hosts")
	}
	if s.TwoHosts.Messages != s.Totals.Send.Frames {
		t.Errorf("two_hosts.messages %d, want each frame once: %d sent", s.TwoHosts.Messages, s.Totals.Send.Frames)
	}
	// The evidence's waiting is split into network and server by the same decomposition.
	if e := s.Evidence; e != nil && e.Attribution != nil && s.TwoHosts.RoundTrips > 0 {
		m := s.TwoHosts.Mean
		if m.NetOut+m.NetBack < 0 || m.Queue+m.Service < 0 {
			// On a loaded machine the network's mean can come out below zero within the clock
			// interval; SplitWaiting then leaves the waiting whole rather than print a negative part.
			if e.Attribution.ServerKnown {
				t.Errorf("evidence split the waiting by a negative part: two_hosts mean %+v", m)
			}
		} else if a := e.Attribution; !a.ServerKnown || math.Abs(a.WaitingNetworkUS-(m.NetOut+m.NetBack)) > 0.01 || math.Abs(a.WaitingServerUS-(m.Queue+m.Service)) > 0.01 {
			t.Errorf("evidence waiting split %v: network %.3f server %.3f µs, two_hosts mean %+v", a.ServerKnown, a.WaitingNetworkUS, a.WaitingServerUS, m)
		}
		t.Logf("evidence: waiting split into network %.2f and server %.2f µs", e.Attribution.WaitingNetworkUS, e.Attribution.WaitingServerUS)
	}
	return s.TwoHosts
}

// TestAnalyzeTwoHosts splits the round trips of a real venusd client and server recorded apart,
// merged as they are and with the server's clock shifted by seconds and drifting: the parts sum
// to the RTT, every message is counted once, and the shifted split agrees with the unshifted one
// within the clock interval it reports.
func TestAnalyzeTwoHosts(t *testing.T) {
	clientPath, serverPath := recordTwoHosts(t)
	dir := t.TempDir()
	plain := analyzeTwoHosts(t, filepath.Join(dir, "plain.plt"), clientPath, serverPath)
	shifted := filepath.Join(dir, "shifted.plt")
	shiftTrace(t, serverPath, shifted, -2.25e9, 120e-6, 0)
	moved := analyzeTwoHosts(t, filepath.Join(dir, "moved.plt"), clientPath, shifted)

	for name, r := range map[string]*breakdown.Report{"unshifted": plain, "shifted": moved} {
		m := r.Mean
		t.Logf("%s: %d round trips, clock ±%.1f µs: rtt %.1f = client %.2f + out %.2f + queue %.2f + service %.2f + back %.2f µs",
			name, r.RoundTrips, r.ClockUS, m.RTT, m.Client, m.NetOut, m.Queue, m.Service, m.NetBack)
		if r.RoundTrips < 200 || r.Unmatched != 0 || r.BothEnds != r.Messages {
			t.Errorf("%s: %d round trips (%d unmatched), %d of %d messages at both ends; want hundreds, all matched", name, r.RoundTrips, r.Unmatched, r.BothEnds, r.Messages)
		}
		if sum := m.Client + m.NetOut + m.Queue + m.Service + m.NetBack; math.Abs(sum-m.RTT) > 0.01 {
			t.Errorf("%s: parts sum to %.3f µs, RTT %.3f", name, sum, m.RTT)
		}
		if len(r.Commands) == 0 || len(r.Slowest) == 0 {
			t.Errorf("%s: no commands or slowest round trips", name)
		}
	}
	// Given the recordings themselves, analyze puts them on one timeline as merge does.
	code, stdout, stderr := runCLI(t, "analyze", "--format", "json", clientPath, shifted)
	if code != 0 {
		t.Fatalf("analyze of two hosts' traces: exit %d: %s", code, stderr)
	}
	var both struct {
		TwoHosts *breakdown.Report `json:"two_hosts"`
	}
	if err := json.Unmarshal([]byte(stdout), &both); err != nil {
		t.Fatal(err)
	}
	if both.TwoHosts == nil || both.TwoHosts.RoundTrips != moved.RoundTrips || both.TwoHosts.Mean != moved.Mean {
		t.Errorf("analyze of the unmerged traces: %+v, want the merged trace's split %+v", both.TwoHosts, moved.Mean)
	}
	// The client's part ends where the reply is placed on the client's clock (when the client
	// had not been waiting for it), so it moves with the clock estimate, within its intervals.
	if plain.RoundTrips != moved.RoundTrips || plain.Mean.RTT != moved.Mean.RTT || math.Abs(plain.Mean.Client-moved.Mean.Client) > plain.ClockUS+moved.ClockUS+0.01 {
		t.Errorf("the server's clock changed the client's side: %+v vs %+v", plain.Mean, moved.Mean)
	}
	tol := plain.ClockUS + moved.ClockUS + 0.01
	for _, p := range [][2]float64{{plain.Mean.NetOut, moved.Mean.NetOut}, {plain.Mean.Queue + plain.Mean.Service, moved.Mean.Queue + moved.Mean.Service}, {plain.Mean.NetBack, moved.Mean.NetBack}} {
		if math.Abs(p[0]-p[1]) > tol {
			t.Errorf("part %.2f µs unshifted, %.2f shifted: further apart than the clock intervals (±%.2f µs)", p[0], p[1], tol)
		}
	}
}

// TestModelTwoHosts fits the token loop of a merged llm run whose client emulated 300 µs each
// way: the model takes the link from the network parts measured at both hosts, so a what-if on
// the measured link reproduces the baseline, and one slower by 1 ms adds 1 ms per round trip
// and changes nothing else.
func TestModelTwoHosts(t *testing.T) {
	paths := recordHostsWith(t, 1, func(c *venusd.ClientConfig) {
		c.Workload, c.Delay, c.LLM.Tokens = "llm", 300*time.Microsecond, 40
	})
	merged := filepath.Join(t.TempDir(), "both.plt")
	r := analyzeTwoHosts(t, merged, paths...)
	if r.NetRTT.P50 < 600 {
		t.Fatalf("network part of a round trip: median %.1f µs, want at least the emulated 600 µs", r.NetRTT.P50)
	}
	model := func(rttUS float64) (predicted, baseline float64, rts float64, notes []string) {
		t.Helper()
		code, stdout, stderr := runCLI(t, "model", "--from", merged, "--mode", "baseline", "--json", "--rtt", fmt.Sprintf("%.3fus", rttUS))
		if code != 0 {
			t.Fatalf("model: exit %d: %s", code, stderr)
		}
		var m struct {
			Model struct {
				TokenUS float64 `json:"token_time_us"`
				RTs     float64 `json:"round_trips_per_token"`
			} `json:"model_baseline"`
			Predicted struct {
				TokenUS float64 `json:"token_time_us"`
			} `json:"predicted"`
			Assumptions []string `json:"assumptions"`
		}
		if err := json.Unmarshal([]byte(stdout), &m); err != nil {
			t.Fatal(err)
		}
		return m.Predicted.TokenUS, m.Model.TokenUS, m.Model.RTs, m.Assumptions
	}
	same, base, rts, notes := model(r.NetRTT.P50)
	if len(notes) == 0 || !strings.Contains(notes[0], "measured at both hosts") {
		t.Errorf("the model does not say it took the link from the merged trace: %q", notes)
	}
	if math.Abs(same-base) > 0.01*base {
		t.Errorf("what-if on the measured link: %.1f µs per token, the model's baseline %.1f", same, base)
	}
	slower, _, _, _ := model(r.NetRTT.P50 + 1000)
	if want := base + 1000*rts; math.Abs(slower-want) > 0.01*want {
		t.Errorf("a link 1 ms slower: %.1f µs per token, want %.1f (%.0f round trips × 1 ms more)", slower, want, rts)
	}
}

// TestExportPerfettoTwoHosts exports a merged trace of a real client and server: each process
// is named after its host, and every round trip seen at both hosts is one flow of four steps
// (request sent, received, reply sent, received), each inside a slice of its thread.
func TestExportPerfettoTwoHosts(t *testing.T) {
	clientPath, serverPath := recordTwoHosts(t)
	dir := t.TempDir()
	merged := filepath.Join(dir, "both.plt")
	r := analyzeTwoHosts(t, merged, clientPath, serverPath)
	out := filepath.Join(dir, "both.json")
	if code, _, stderr := runCLI(t, "export", "--format", "perfetto", "-o", out, merged); code != 0 {
		t.Fatalf("export: exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Ph, Cat, Name string
			PID, TID      uint32
			TS, Dur       float64
			ID            uint64
			Args          struct{ Name string }
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	type span struct{ from, to float64 }
	slices := map[[2]uint32][]span{}
	hosts := map[string]bool{}
	steps := map[uint64]string{}
	for _, e := range doc.TraceEvents {
		switch {
		case e.Ph == "X":
			k := [2]uint32{e.PID, e.TID}
			slices[k] = append(slices[k], span{e.TS, e.TS + e.Dur})
		case e.Ph == "M" && e.Name == "process_name" && strings.HasPrefix(e.Args.Name, "host "):
			hosts[e.Args.Name[:6]] = true
		}
	}
	// a thread's slices by start, each with the latest end of those up to it: a time lies in
	// some slice exactly when the latest end among the slices begun by then reaches it
	reach := map[[2]uint32][]float64{}
	for k, ss := range slices {
		sort.Slice(ss, func(i, j int) bool { return ss[i].from < ss[j].from })
		r := make([]float64, len(ss))
		for i, s := range ss {
			r[i] = s.to
			if i > 0 {
				r[i] = max(r[i], r[i-1])
			}
		}
		reach[k] = r
	}
	unbound := 0
	for _, e := range doc.TraceEvents {
		if e.Cat != "host_flow" {
			continue
		}
		steps[e.ID] += e.Ph
		k := [2]uint32{e.PID, e.TID}
		ss := slices[k]
		n := sort.Search(len(ss), func(i int) bool { return ss[i].from > e.TS }) // slices begun by e.TS
		if n == 0 || reach[k][n-1] < e.TS {
			unbound++
		}
	}
	if !hosts["host 0"] || !hosts["host 1"] {
		t.Errorf("processes named after hosts: %v, want host 0 and host 1", hosts)
	}
	if uint64(len(steps)) != r.RoundTrips {
		t.Errorf("%d flows, want one per round trip split (%d)", len(steps), r.RoundTrips)
	}
	for id, s := range steps {
		if s != "sttf" {
			t.Fatalf("flow %d has steps %q, want s, t, t, f", id, s)
		}
	}
	if unbound > len(steps)*4/100 {
		t.Errorf("%d of %d flow steps lie in no slice of their thread", unbound, 4*len(steps))
	}
}
