//go:build linux

package cli

import "testing"

// TestBandwidthMeansTheSame checks that venus run and model read --bandwidth alike (both through
// units.ParseRate): 15M is 15 MiB/s in both, and both take bit rates.
func TestBandwidthMeansTheSame(t *testing.T) {
	for in, want := range map[string]float64{"15M": 15 << 20, "15MiB": 15 << 20, "15MB": 15e6, "100Mbit": 12.5e6, "1Gbit/s": 125e6, "2.5e6": 2.5e6} {
		link, err1 := parseLinkRate(in)
		model, err2 := modelBandwidth(in)
		if err1 != nil || err2 != nil || link != want || model != want {
			t.Errorf("--bandwidth %s: venus run %g (%v), model %g (%v); want %g", in, link, err1, model, err2, want)
		}
	}
}
