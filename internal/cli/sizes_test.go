//go:build linux

package cli

import (
	"flag"
	"io"
	"testing"
)

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

// TestByteRangeFlags checks that byte-count flags read sizes as every verb does.
func TestByteRangeFlags(t *testing.T) {
	for in, want := range map[string]int{"4096": 4096, "4K": 4096, "4KiB": 4096, "4KB": 4000, "1M": 1 << 20} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		n := fs.Int("request-bytes", 64, "bytes")
		ByteRange(fs, "request-bytes", 20, 16<<20)
		if err := fs.Parse([]string{"--request-bytes", in}); err != nil || *n != want {
			t.Errorf("--request-bytes %s: %d, %v; want %d", in, *n, err, want)
		}
	}
	for _, in := range []string{"1", "32M", "lots", "-4K"} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Int("request-bytes", 64, "bytes")
		ByteRange(fs, "request-bytes", 20, 16<<20)
		if err := fs.Parse([]string{"--request-bytes", in}); err == nil {
			t.Errorf("--request-bytes %s accepted", in)
		}
	}
}
