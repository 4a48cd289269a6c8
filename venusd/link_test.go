package venusd

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// H5: out-of-range link parameters are refused before anything runs (they used to hang: a
// 2562047h delay, a 1 bit/s link).
func TestLinkRanges(t *testing.T) {
	for _, tc := range []struct {
		delay, jitter time.Duration
		bw            float64
		want          string // "" valid
	}{
		{0, 0, 0, ""},
		{50 * time.Microsecond, time.Millisecond, 1e6 / 8, ""},
		{MaxLinkDelay, MaxLinkDelay, MaxLinkBandwidth, ""},
		{0, 0, MinLinkBandwidth, ""},
		{-time.Nanosecond, 0, 0, "delay"},
		{2562047 * time.Hour, 0, 0, "delay"},
		{0, -1, 0, "jitter"},
		{0, MaxLinkDelay + 1, 0, "jitter"},
		{0, 0, 1.0 / 8, "bandwidth"},
		{0, 0, -1, "bandwidth"},
		{0, 0, math.NaN(), "bandwidth"},
		{0, 0, math.Inf(1), "bandwidth"},
		{0, 0, 2 * MaxLinkBandwidth, "bandwidth"},
	} {
		err := ValidateLink(tc.delay, tc.jitter, tc.bw)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want) || !strings.Contains(err.Error(), "want")) {
			t.Errorf("ValidateLink(%v, %v, %g) = %v, want %q", tc.delay, tc.jitter, tc.bw, err, tc.want)
		}
	}
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

// sleepUntil never returns before its deadline, through each of its three stages.
func TestSleepUntilNotEarly(t *testing.T) {
	for _, d := range []time.Duration{0, 20 * time.Microsecond, 100 * time.Microsecond, 600 * time.Microsecond, 2 * time.Millisecond} {
		for i := 0; i < 5; i++ {
			at := time.Now().Add(d)
			sleepUntil(at)
			if now := time.Now(); now.Before(at) {
				t.Fatalf("sleepUntil(+%v) returned %v early", d, at.Sub(now))
			}
		}
	}
}

// BenchmarkLinkAccuracy measures the emulated link against what it was asked for: a ping
// client in this process and a venusd server in another (Unix socket), each setting's median
// round trip minus the same-size baseline's (no emulation) median, halved (each direction
// emulates the same link), against what one direction was asked: delay + jitter/2 (the median
// of the sum of two uniform draws in [0, jitter) is jitter) + the serialisation of the two
// frames at the bandwidth, halved. Settings and baselines are interleaved over
// rounds; the figures are medians over rounds. docs/venusd.md has the table of this VM.
//
//	go test ./venusd -run '^$' -bench LinkAccuracy -benchtime 1x
func BenchmarkLinkAccuracy(b *testing.B) {
	p := startPeer(b)
	type setting struct {
		name          string
		delay, jitter time.Duration
		bw            float64 // bytes/s
		req           int     // request payload bytes
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
	}
	run := func(s setting, emulate bool) float64 {
		expect := 2*s.delay + s.jitter
		if s.bw > 0 {
			expect += time.Duration(float64(2*HeaderSize+s.req+64) / s.bw * 1e9)
		}
		n := int(min(400, max(60, float64(time.Second)/float64(expect+100*time.Microsecond))))
		if s.jitter > 0 {
			// The median of a jittered round trip varies by about jitter/(2√n) from run to
			// run: enough samples to read it within 2%.
			n = 600
		}
		cfg := ClientConfig{Connect: p.unix, Workload: "ping", Getenv: noEnv,
			Ping: PingConfig{Requests: n, Warmup: 10, RequestBytes: s.req, ReplyBytes: 64}}
		if emulate {
			cfg.Delay, cfg.Jitter, cfg.Bandwidth = s.delay, s.jitter, s.bw
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := RunWorkload(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		return res.Ping.RTTP50US
	}
	extra := make([][]float64, len(settings))
	for r := 0; r < 3; r++ {
		for i, s := range settings {
			base := run(s, false)
			extra[i] = append(extra[i], run(s, true)-base)
		}
	}
	// Each direction emulates the same link: the error of one direction is half the round
	// trip's, held against 5% of, or 20 µs more than, what one direction was asked.
	b.Logf("%-22s %14s %14s %10s %8s  %s", "setting", "asked µs", "measured µs", "error µs", "error %", "within 5% or 20 µs")
	worst := 0.0
	for i, s := range settings {
		want := float64(2*s.delay+s.jitter) / 1e3
		if s.bw > 0 {
			want += float64(2*HeaderSize+s.req+64) / s.bw * 1e6
		}
		want /= 2
		got := median(extra[i]) / 2
		e := got - want
		allowed := max(20, 0.05*want)
		worst = max(worst, math.Abs(e)/allowed)
		b.Logf("%-22s %14.1f %14.1f %10.1f %7.1f%%  %v", s.name, want, got, e, 100*e/want, math.Abs(e) <= allowed)
	}
	b.ReportMetric(worst, "worst-error/allowed")
}
