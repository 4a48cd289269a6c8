// Package units reads the sizes and rates users type, with one meaning for every verb
// (docs/design.md, "Sizes and rates"):
//
//   - K, M, G, T and KiB, MiB, GiB, TiB are binary multiples of a byte (1024ⁿ): 15M is
//     15,728,640 bytes, like 15MiB;
//   - KB, MB, GB, TB (and kB) are decimal multiples (1000ⁿ): 15MB is 15,000,000 bytes;
//   - bit, kbit, Mbit, Gbit, Tbit (and bps, kbps, Mbps, Gbps, Tbps) are decimal bits: 100Mbit is
//     100,000,000 bits, 12,500,000 bytes;
//   - a rate may end in "/s": 15MB/s, 100Mbit/s.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MaxBytes is the largest byte count ParseBytes returns: 2⁶², far beyond any memory, so that a
// product with a small count cannot overflow an int64.
const MaxBytes = 1 << 62

type suffix struct {
	s string
	m float64 // bytes per unit
}

// byteSuffixes are the byte units, longest first so that "KiB" is not read as "B".
var byteSuffixes = []suffix{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	{"B", 1},
}

// bitSuffixes are the bit units (decimal; a byte is 8 bits).
var bitSuffixes = []suffix{
	{"kbit", 1e3 / 8}, {"Kbit", 1e3 / 8}, {"Mbit", 1e6 / 8}, {"Gbit", 1e9 / 8}, {"Tbit", 1e12 / 8}, {"bit", 1.0 / 8},
	{"kbps", 1e3 / 8}, {"Kbps", 1e3 / 8}, {"Mbps", 1e6 / 8}, {"Gbps", 1e9 / 8}, {"Tbps", 1e12 / 8}, {"bps", 1.0 / 8},
}

// parse reads a non-negative number with one of the suffixes (or none: bytes) and returns it in
// bytes.
func parse(s string, suffixes ...[]suffix) (float64, error) {
	t := strings.TrimSpace(s)
	mult := 1.0
	found := false
	for _, list := range suffixes {
		for _, u := range list {
			if strings.HasSuffix(t, u.s) {
				t, mult, found = strings.TrimSpace(strings.TrimSuffix(t, u.s)), u.m, true
				break
			}
		}
		if found {
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || t == "" || strings.ContainsAny(t, "+_xXpP") || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("bad number %q", s)
	}
	return v * mult, nil
}

// ParseBytes reads a byte count: "262144", "256K", "256KiB", "4MB", "1.5GiB". The count must come
// out whole and at most MaxBytes.
func ParseBytes(s string) (int64, error) {
	v, err := parse(s, byteSuffixes)
	if err != nil || v != math.Trunc(v) || v > MaxBytes {
		return 0, fmt.Errorf("bad byte count %q: want a whole number of bytes like 4096, 256K, 4MiB or 4MB", s)
	}
	return int64(v), nil
}

// ParseRate reads a rate and returns it in bytes per second: a byte count as ParseBytes reads it
// ("15M", "15MB", "2.5e6"), or a bit rate ("100Mbit", "1Gbps"), either optionally ending in
// "/s". "0" is 0: the caller says what no rate means.
func ParseRate(s string) (float64, error) {
	t := strings.TrimSuffix(strings.TrimSpace(s), "/s")
	v, err := parse(t, bitSuffixes, byteSuffixes)
	if err != nil || v > 1e18 {
		return 0, fmt.Errorf("bad rate %q: want bytes per second like 15MB, 15MiB/s, or bits like 100Mbit", s)
	}
	return v, nil
}
