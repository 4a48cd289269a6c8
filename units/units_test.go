package units

import "testing"

func TestParseBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"262144", 262144}, {"256KiB", 262144}, {"256K", 262144}, {"4MiB", 4 << 20}, {"4M", 4 << 20},
		{"4MB", 4000000}, {"1G", 1 << 30}, {"1GB", 1e9}, {"2kB", 2000}, {"1.5KiB", 1536}, {"1e9", 1e9},
		{" 15M ", 15728640}, {"15MiB", 15728640}, {"15MB", 15000000}, {"0", 0}, {"7B", 7}, {"1T", 1 << 40},
	} {
		if got, err := ParseBytes(tc.in); err != nil || got != tc.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "-1", "lots", "M", "0.5B", "99999999999999999999", "1e300", "NaN", "Inf", "0x10", "1_000", "+5", "100Mbit"} {
		if v, err := ParseBytes(in); err == nil {
			t.Errorf("ParseBytes(%q) = %d, want an error", in, v)
		}
	}
}

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
	}{
		{"15M", 15728640}, {"15MiB/s", 15728640}, {"15MB", 15e6}, {"15MB/s", 15e6}, {"2.5e6", 2.5e6},
		{"100Mbit", 12.5e6}, {"100Mbit/s", 12.5e6}, {"100Mbps", 12.5e6}, {"1Gbit", 125e6}, {"10Gbit", 1.25e9},
		{"500kbit", 62500}, {"8bit", 1}, {"100KiB/s", 102400}, {"0", 0}, {"1Tbit", 125e9},
	} {
		if got, err := ParseRate(tc.in); err != nil || got != tc.want {
			t.Errorf("ParseRate(%q) = %g, %v; want %g", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "-1M", "fast", "Mbit", "1e30", "/s", "NaN"} {
		if v, err := ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) = %g, want an error", in, v)
		}
	}
}

// TestSameMeaning checks the promise of the package: a size means the same bytes whether it is
// read as a count or as a rate.
func TestSameMeaning(t *testing.T) {
	for _, in := range []string{"15M", "15MiB", "15MB", "4KiB", "4K", "4kB", "1G", "1GB", "262144"} {
		n, err1 := ParseBytes(in)
		r, err2 := ParseRate(in)
		if err1 != nil || err2 != nil || float64(n) != r {
			t.Errorf("%q: ParseBytes %d (%v), ParseRate %g (%v)", in, n, err1, r, err2)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"15M", "100Mbit/s", "1.5KiB", "2.5e6", "-1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := ParseBytes(s); err == nil && (n < 0 || n > MaxBytes) {
			t.Errorf("ParseBytes(%q) = %d", s, n)
		}
		if r, err := ParseRate(s); err == nil && (r < 0 || r > 1e18) {
			t.Errorf("ParseRate(%q) = %g", s, r)
		}
	})
}
