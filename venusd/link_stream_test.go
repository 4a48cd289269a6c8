package venusd

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/perflab/perflab/venusd/wire"
)

// BenchmarkLinkStream measures the rate the emulated link carries (--bandwidth), as a stream:
// a pipelined ping client (depth 8) sends requests back to back through the link to a venusd
// server in another process, for about a quarter of a second at the asked rate (at 10 Gbit/s,
// 300 MiB in 1 MiB frames; slower rates in frames of 1 ms on the wire, at least 250 of them).
// The rate is the request frames' bytes, headers included, over the time from the first
// request to the last reply; that time also holds one frame's trip through the transport and
// its reply, which makes the figure up to about 0.5% low. The same stream without emulation
// gives the transport's own ceiling. Settings are interleaved over rounds, after a round that
// is not counted (in both processes the first runs went at half speed); the figures are
// medians over rounds, and "warned" counts the runs whose result had warnings (Result.Warnings). PERFLAB_LINK_SETTINGS picks settings whose name contains it (e.g.
// "shm", "10Gbit"). docs/venusd.md has the table of this VM.
func BenchmarkLinkStream(b *testing.B) {
	p := startPeer(b)
	type setting struct {
		name      string
		addr      string
		bits      float64 // asked, bit/s; 0 unlimited
		frame     int     // request frame payload, bytes
		requests  int
		transport string
	}
	var settings []setting
	for _, tr := range []struct{ name, addr string }{{"unix", p.unix}, {"shm", p.shm}} {
		for _, bits := range []float64{0, 100e6, 1e9, 10e9} {
			frame, n := 1<<20, 300
			if bits > 0 {
				frame = min(1<<20, int(bits/8*1e-3))
				n = max(250, int(bits/8*0.25)/frame)
			}
			name := tr.name + " unlimited"
			if bits > 0 {
				name = fmt.Sprintf("%s %gMbit", tr.name, bits/1e6)
			}
			settings = append(settings, setting{name: name, addr: tr.addr, bits: bits, frame: frame, requests: n, transport: tr.name})
		}
	}
	if only := os.Getenv("PERFLAB_LINK_SETTINGS"); only != "" {
		var some []setting
		for _, s := range settings {
			if strings.Contains(s.name, only) {
				some = append(some, s)
			}
		}
		settings = some
	}
	warned := make([]int, len(settings)) // measured runs that warned
	warm := false
	run := func(i int, s setting) float64 {
		cfg := ClientConfig{Connect: s.addr, Workload: "ping", Mode: ModePipeline, Depth: 8, Getenv: noEnv, LLM: LLMConfig{Seed: 1},
			Bandwidth: s.bits / 8, Ping: PingConfig{Requests: s.requests, Warmup: 8, RequestBytes: s.frame, ReplyBytes: 64}}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := RunWorkload(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Warnings) > 0 && warm {
			warned[i]++
			b.Logf("%s: %s", s.name, strings.Join(res.Warnings, "; "))
		}
		return res.Ping.ThroughputPerS * float64(s.frame+wire.HeaderSize) * 8
	}
	load := func() string {
		l, _ := os.ReadFile("/proc/loadavg")
		return strings.Join(strings.Fields(string(l))[:3], " ")
	}
	b.Logf("load average before: %s", load())
	const rounds = 5
	got := make([][]float64, len(settings))
	for r := -1; r < rounds; r++ {
		for i, s := range settings {
			warm = r >= 0
			v := run(i, s)
			if r >= 0 { // round -1 warms both processes up (their first runs went at half speed)
				got[i] = append(got[i], v)
			}
		}
	}
	b.Logf("load average after: %s", load())
	b.Logf("%-18s %12s %12s %8s %8s  %s", "setting", "asked", "median", "error", "warned", "rounds (Gbit/s)")
	for i, s := range settings {
		m := median(got[i])
		asked, e := "-", "-"
		if s.bits > 0 {
			asked = fmt.Sprintf("%.4g Gbit/s", s.bits/1e9)
			e = fmt.Sprintf("%+.1f%%", 100*(m-s.bits)/s.bits)
		}
		var rs []string
		for _, v := range got[i] {
			rs = append(rs, fmt.Sprintf("%.3f", v/1e9))
		}
		b.Logf("%-18s %12s %8.4g Gbit/s %8s %5d/%d  %s", s.name, asked, m/1e9, e, warned[i], rounds, strings.Join(rs, " "))
	}
}
