package venusd

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/perflab/perflab/venusd/link"
	"github.com/perflab/perflab/venusd/wire"
)

// H5: RunWorkload refuses out-of-range link parameters at once, before it connects (the
// ranges themselves: venusd/link's TestRanges).
func TestLinkRanges(t *testing.T) {
	// RunWorkload refuses them at once, before it connects.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	for _, cfg := range []ClientConfig{{Delay: 2562047 * time.Hour}, {Bandwidth: 1.0 / 8}} {
		cfg.Connect, cfg.Workload, cfg.Getenv = "tcp://127.0.0.1:1", "ping", noEnv
		if _, err := RunWorkload(ctx, cfg); err == nil || strings.Contains(err.Error(), "connect") {
			t.Errorf("RunWorkload(delay %v, bandwidth %g): %v, want a range error", cfg.Delay, cfg.Bandwidth, err)
		}
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("refusing took %v", d)
	}
}

// A link asked for more than any transport carries (1 Tbit/s, in 1 MiB frames) falls behind,
// and the run says so in Result.Warnings, naming the transport and the rate it carried. Every
// transport of a real machine is slower than that, and a busy machine only slower still.
func TestLinkWarnsWhenBehind(t *testing.T) {
	for _, tr := range []string{"unix", "shm"} {
		t.Run(tr, func(t *testing.T) {
			s := startServer(t, ServerConfig{Listen: listenAddr(t, tr), Getenv: noEnv})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := RunWorkload(ctx, ClientConfig{Connect: s.Addr(), Workload: "ping", Mode: ModePipeline, Depth: 8,
				Bandwidth: link.MaxBandwidth, Getenv: noEnv,
				Ping: PingConfig{Requests: 64, Warmup: 8, RequestBytes: 1 << 20, ReplyBytes: 64}})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Warnings) == 0 || !strings.HasPrefix(res.Warnings[0], "sent: ") ||
				!strings.Contains(res.Warnings[0], "held up by the "+tr+" transport") || !strings.Contains(res.Warnings[0], "below the 1 Tbit/s asked") {
				t.Errorf("warnings %q, want the first to say the %s transport carried less than 1 Tbit/s", res.Warnings, tr)
			}
		})
	}
	// Without a link there is nothing to warn about.
	s := startServer(t, ServerConfig{Listen: listenAddr(t, "unix"), Getenv: noEnv})
	res, err := RunWorkload(context.Background(), ClientConfig{Connect: s.Addr(), Workload: "ping", Getenv: noEnv, Ping: PingConfig{Requests: 10, Warmup: 1}})
	if err != nil || len(res.Warnings) != 0 {
		t.Errorf("no link: warnings %q, %v", res.Warnings, err)
	}
}

// A run with a link reports what each direction of it did (Result.Link): every frame the
// client sent went through it, and the hand-over percentiles are ordered; a run without one
// reports nothing.
func TestLinkStats(t *testing.T) {
	s := startServer(t, ServerConfig{Listen: listenAddr(t, "unix"), Getenv: noEnv})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := RunWorkload(ctx, ClientConfig{Connect: s.Addr(), Workload: "ping", Delay: 100 * time.Microsecond, Getenv: noEnv,
		Ping: PingConfig{Requests: 50, Warmup: 5}})
	if err != nil {
		t.Fatal(err)
	}
	l := res.Link
	if l == nil {
		t.Fatal("delayed run: no link statistics")
	}
	if l.Sent.Frames != res.Totals.FramesSent || l.Received.Frames > res.Totals.FramesRecv || l.Received.Frames == 0 {
		t.Errorf("link frames sent %d received %d, client frames sent %d received %d", l.Sent.Frames, l.Received.Frames,
			res.Totals.FramesSent, res.Totals.FramesRecv)
	}
	for _, d := range []LinkDirection{l.Sent, l.Received} {
		if !(0 < d.HandOverP50US && d.HandOverP50US <= d.HandOverP99US && d.HandOverP99US <= max(d.HandOverMaxUS, 0.125)) || d.Late > d.Frames {
			t.Errorf("direction %+v: want 0 < p50 <= p99 <= max, late <= frames", d)
		}
	}
	res, err = RunWorkload(ctx, ClientConfig{Connect: s.Addr(), Workload: "ping", Getenv: noEnv, Ping: PingConfig{Requests: 10, Warmup: 1}})
	if err != nil || res.Link != nil {
		t.Errorf("no link: link statistics %+v, %v", res.Link, err)
	}
}

// PingConfig.Pause waits before each request, outside its round trip; a negative one is
// refused.
func TestPingPause(t *testing.T) {
	s := startServer(t, ServerConfig{Listen: listenAddr(t, "unix"), Getenv: noEnv})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const pause = 50 * time.Millisecond
	res, err := RunWorkload(ctx, ClientConfig{Connect: s.Addr(), Workload: "ping", Getenv: noEnv,
		Ping: PingConfig{Requests: 5, Warmup: 1, Pause: pause}})
	if err != nil {
		t.Fatal(err)
	}
	p := res.Ping
	if elapsed := time.Duration(float64(p.Requests) / p.ThroughputPerS * 1e9); elapsed < time.Duration(p.Requests)*pause {
		t.Errorf("%d pings took %v, want at least %v each", p.Requests, elapsed, pause)
	}
	if p.RTTMinUS >= float64(pause)/1e3 {
		t.Errorf("fastest round trip %.0f µs: the %v pause counted in it", p.RTTMinUS, pause)
	}
	for _, bad := range []time.Duration{-time.Nanosecond, link.MaxDelay + 1} {
		if _, err := RunWorkload(ctx, ClientConfig{Connect: s.Addr(), Workload: "ping", Getenv: noEnv, Ping: PingConfig{Pause: bad}}); err == nil || !strings.Contains(err.Error(), "pause") {
			t.Errorf("pause %v: %v, want it refused", bad, err)
		}
	}
}

// BenchmarkLinkAccuracy measures the emulated link against what it was asked for: a ping
// client in this process and a venusd server in another (Unix socket). Each round trip is held
// against what was asked for it: 2·delay, plus the two jitter draws the link made for its two
// frames (replayed here from the link's seeded generator, in the order arrival makes them: the
// request's, then the reply's), plus the serialisation of the two frames at the bandwidth. The
// median of those per-round-trip excesses, minus a reference's median round trip of the same
// frames without emulation, halved (each direction emulates the same link), is one direction's
// error. Comparing the median of jittered round trips with the median of the jitter distribution
// instead would add the sampling error of 600 draws (about 2% of a 10 ms jitter) and, on a
// loaded machine, the mean rather than the median of late wake-ups.
//
// It is measured against two references, and the link's own hand-over besides:
//   - "undelayed": ping-pong at full speed. Its peers never idle long, so on a VM whose idle
//     vCPUs halt, it pays less for waking them than any delayed run does: the difference is
//     what the machine charges a peer for waking after idling through the delay, which a real
//     link of that delay would charge as well.
//   - "paced": the same pings without emulation, each sent after a pause as long as the round
//     trip asked of the link (PingConfig.Pause, waited as the link waits), so that both peers
//     idle between frames as long as in the delayed run and pay the same wake-ups: the error
//     against it is the link's.
//   - "hand-over": how long after each frame's time the link let it go (Result.Link, median and
//     99th percentile of the sent frames): the link's own lateness, before the peer wakes to
//     take the frame.
//
// Settings and references are interleaved over rounds; the figures are medians over rounds.
// docs/venusd.md has the table of this VM. PERFLAB_LINK_SETTINGS=bandwidth (or delay, jitter)
// runs only the settings whose name contains it.
func BenchmarkLinkAccuracy(b *testing.B) {
	p := startPeer(b)
	type setting struct {
		name          string
		delay, jitter time.Duration
		bw            float64 // bytes/s
		req           int     // request payload bytes
		shm           bool    // over the shm transport instead of the Unix socket
	}
	var settings []setting
	for _, d := range []time.Duration{50 * time.Microsecond, 100 * time.Microsecond, 200 * time.Microsecond, 500 * time.Microsecond,
		time.Millisecond, 1100 * time.Microsecond, 1500 * time.Microsecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond} {
		settings = append(settings, setting{name: "delay " + d.String(), delay: d, req: 64})
	}
	for _, j := range []time.Duration{100 * time.Microsecond, time.Millisecond, 10 * time.Millisecond} {
		settings = append(settings, setting{name: "jitter " + j.String(), delay: 100 * time.Microsecond, jitter: j, req: 64})
	}
	for _, bits := range []float64{1e6, 10e6, 100e6, 1e9, 10e9} {
		bw := bits / 8
		// A request that takes about 2 ms on the wire.
		settings = append(settings, setting{name: fmt.Sprintf("bandwidth %gMbit", bits/1e6), bw: bw, req: max(64, int(bw*0.002))})
		if bits >= 10e9 { // more than this VM's Unix socket carries (BenchmarkLinkStream)
			settings = append(settings, setting{name: fmt.Sprintf("bandwidth %gMbit shm", bits/1e6), bw: bw, req: max(64, int(bw*0.002)), shm: true})
		}
	}
	if only := os.Getenv("PERFLAB_LINK_SETTINGS"); only != "" {
		// e.g. PERFLAB_LINK_SETTINGS=bandwidth: only the settings whose name contains it.
		var some []setting
		for _, s := range settings {
			if strings.Contains(s.name, only) {
				some = append(some, s)
			}
		}
		settings = some
	}
	// A round trip's time in the link: 2·delay, the mean of two jitter draws, serialisation.
	inLink := func(s setting) time.Duration {
		d := 2*s.delay + s.jitter
		if s.bw > 0 {
			d += time.Duration(float64(2*wire.HeaderSize+s.req+64) / s.bw * 1e9)
		}
		return d
	}
	const (
		undelayed = iota // reference: no emulation, no pause
		paced            // reference: no emulation, a pause of inLink before each request
		emulated
	)
	// run returns the median round trip (references) or the median excess over what was asked
	// (emulated), and the median and 99th percentile of the sent frames' hand-over lateness
	// (emulated), µs.
	run := func(s setting, how int) (float64, [2]float64) {
		expect := inLink(s)
		n := int(min(400, max(60, float64(time.Second)/float64(expect+100*time.Microsecond))))
		if s.jitter > 0 {
			// The median of a jittered round trip varies by about jitter/(2√n) from run to
			// run: enough samples to read it within 2%.
			n = 600
		}
		const warmup = 10
		addr := p.unix
		if s.shm {
			addr = p.shm
		}
		cfg := ClientConfig{Connect: addr, Workload: "ping", Getenv: noEnv, LLM: LLMConfig{Seed: 1},
			Ping: PingConfig{Requests: n, Warmup: warmup, RequestBytes: s.req, ReplyBytes: 64, KeepSamples: true}}
		switch how {
		case emulated:
			cfg.Delay, cfg.Jitter, cfg.Bandwidth = s.delay, s.jitter, s.bw
		case paced:
			cfg.Ping.Pause = expect
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := RunWorkload(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if how != emulated {
			return res.Ping.RTTP50US, [2]float64{}
		}
		// The link's generator (client.go: seeded LLM.Seed+7): its draws for the warm-up's
		// round trips and the one that drains it (skip), then two per measured round trip.
		rng := rand.New(rand.NewPCG(cfg.LLM.Seed+7, 0x5656))
		skip := 2 * (warmup + 1)
		draws := make([]float64, skip+2*len(res.Ping.RTTsUS)+1)
		for i := range draws {
			if s.jitter > 0 {
				draws[i] = float64(rng.Int64N(int64(s.jitter))) / 1e3
			}
		}
		fixed := float64(2*s.delay) / 1e3
		if s.bw > 0 {
			fixed += float64(2*wire.HeaderSize+s.req+64) / s.bw * 1e6
		}
		// excesses with the draws replayed shift draws away from where they should be.
		excesses := func(shift int) []float64 {
			e := make([]float64, len(res.Ping.RTTsUS))
			for i, rtt := range res.Ping.RTTsUS {
				j := skip + 2*i + shift
				e[i] = rtt - (fixed + draws[j] + draws[j+1])
			}
			return e
		}
		excess := excesses(0)
		// Were the draws replayed in step with the link's, the excesses spread like the
		// baseline's round trips; out of step, like the jitter itself. So replayed one draw
		// earlier or later they spread more, however loaded the machine (checked where the
		// jitter is wide enough to tell).
		iqr := func(v []float64) float64 {
			v = append([]float64(nil), v...)
			sort.Float64s(v)
			return v[len(v)*3/4] - v[len(v)/4]
		}
		if s.jitter >= time.Millisecond {
			if in, early, late := iqr(excess), iqr(excesses(-1)), iqr(excesses(1)); in >= min(early, late) {
				b.Fatalf("%s: per-round-trip excesses spread %.0f µs between quartiles, %.0f and %.0f µs with the draws one earlier or later: the replayed jitter draws are not the link's",
					s.name, in, early, late)
			}
		}
		if res.Link == nil {
			b.Fatalf("%s: no link statistics in the result", s.name)
		}
		return median(excess), [2]float64{res.Link.Sent.HandOverP50US, res.Link.Sent.HandOverP99US}
	}
	// Per setting and round: the excess per round trip beyond what was asked, minus each
	// reference's round trip, and the hand-over median.
	extra, extraPaced := make([][]float64, len(settings)), make([][]float64, len(settings))
	handOver, handOver99 := make([][]float64, len(settings)), make([][]float64, len(settings))
	for r := 0; r < 3; r++ {
		for i, s := range settings {
			base, _ := run(s, undelayed)
			pacedBase, _ := run(s, paced)
			e, h := run(s, emulated)
			extra[i] = append(extra[i], e-base)
			extraPaced[i] = append(extraPaced[i], e-pacedBase)
			handOver[i], handOver99[i] = append(handOver[i], h[0]), append(handOver99[i], h[1])
		}
	}
	// Each direction emulates the same link: the error of one direction is half the round
	// trip's, held against 5% of, or 20 µs more than, what one direction was asked.
	b.Logf("%-22s %10s | %-26s | %-26s | %-15s", "", "", "against undelayed", "against paced (the link's)", "hand-over, sent")
	b.Logf("%-22s %10s | %9s %7s %8s | %9s %7s %8s | %7s %7s", "setting", "asked µs", "error µs", "error %", "within", "error µs", "error %", "within", "p50 µs", "p99 µs")
	worst, worstPaced := 0.0, 0.0
	for i, s := range settings {
		want := float64(inLink(s)) / 1e3 / 2
		allowed := max(20, 0.05*want)
		e, ep := median(extra[i])/2, median(extraPaced[i])/2
		worst = max(worst, math.Abs(e)/allowed)
		worstPaced = max(worstPaced, math.Abs(ep)/allowed)
		b.Logf("%-22s %10.1f | %9.1f %6.1f%% %8v | %9.1f %6.1f%% %8v | %7.2f %7.1f", s.name, want,
			e, 100*e/want, math.Abs(e) <= allowed, ep, 100*ep/want, math.Abs(ep) <= allowed, median(handOver[i]), median(handOver99[i]))
	}
	b.ReportMetric(worst, "worst-error/allowed")
	b.ReportMetric(worstPaced, "worst-link-error/allowed")
}
