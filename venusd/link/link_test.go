package link

import (
	"math"
	"strings"
	"testing"
	"time"
)

// H5: out-of-range link parameters are refused before anything runs (they used to hang: a
// 2562047h delay, a 1 bit/s link).
func TestRanges(t *testing.T) {
	for _, tc := range []struct {
		delay, jitter time.Duration
		bw            float64
		want          string // "" valid
	}{
		{0, 0, 0, ""},
		{50 * time.Microsecond, time.Millisecond, 1e6 / 8, ""},
		{MaxDelay, MaxDelay, MaxBandwidth, ""},
		{0, 0, MinBandwidth, ""},
		{-time.Nanosecond, 0, 0, "delay"},
		{2562047 * time.Hour, 0, 0, "delay"},
		{0, -1, 0, "jitter"},
		{0, MaxDelay + 1, 0, "jitter"},
		{0, 0, 1.0 / 8, "bandwidth"},
		{0, 0, -1, "bandwidth"},
		{0, 0, math.NaN(), "bandwidth"},
		{0, 0, math.Inf(1), "bandwidth"},
		{0, 0, 2 * MaxBandwidth, "bandwidth"},
	} {
		err := Validate(tc.delay, tc.jitter, tc.bw)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want) || !strings.Contains(err.Error(), "want")) {
			t.Errorf("Validate(%v, %v, %g) = %v, want %q", tc.delay, tc.jitter, tc.bw, err, tc.want)
		}
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
