package reports

import (
	"math"
	"strconv"
	"strings"
)

// The number formatters of every report: analyze's table, markdown and HTML, compare, gate,
// model and bench all print numbers through these, so one value reads the same everywhere.
// (JSON prints the values themselves; SVG coordinates and axis ticks have their own needs.)

// Num formats a measured value (a time in µs, a rate, a ratio) with four significant digits,
// trailing zeros dropped and never an exponent: 416.7, 47.82, 2.48, 0.972, 0.000123; from 1000
// on, a whole number with thousands separators as Count writes it: 19,280. Zero is "0"; NaN
// and infinities are "-".
func Num(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	if v == 0 {
		return "0"
	}
	if math.Abs(v) >= 999.95 {
		return Count(v)
	}
	decimals := min(3-int(math.Floor(math.Log10(math.Abs(v)))), 12)
	s := strconv.FormatFloat(v, 'f', decimals, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		return "0"
	}
	return s
}

// Amount formats v as Num does followed by a noun, singular when v prints as exactly 1:
// "1 reply", "0.5 replies", "4 replies".
func Amount(v float64, one, many string) string {
	n := Num(v)
	if n == "1" {
		return n + " " + one
	}
	return n + " " + many
}

// Count formats a count (calls, bytes, round trips) or a rate read as one, rounded to a whole
// number, with thousands separators: 29,403,024.
func Count[N ~int | ~int64 | ~uint32 | ~uint64 | ~float64](v N) string {
	var s string
	switch x := any(v).(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return "-"
		}
		s = strconv.FormatFloat(math.Round(x), 'f', 0, 64)
	case uint64:
		s = strconv.FormatUint(x, 10)
	case uint32:
		s = strconv.FormatUint(uint64(x), 10)
	default:
		s = strconv.FormatInt(int64(v), 10)
	}
	digits, sign := strings.TrimPrefix(s, "-"), ""
	if len(digits) < len(s) && digits != "0" {
		sign = "-"
	}
	var b strings.Builder
	b.WriteString(sign)
	for i, c := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Share formats a fraction 0..1 as a percentage with one decimal: 0.123 is "12.3%".
func Share(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return strconv.FormatFloat(100*v, 'f', 1, 64) + "%"
}

// Change formats a relative change or error (0.05 is five per cent more) as a signed
// percentage with one decimal, "+5.0%" or "-75.0%"; a change that rounds to nothing is "0.0%".
func Change(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	if math.Abs(v) < 0.0005 {
		return "0.0%"
	}
	s := strconv.FormatFloat(100*v, 'f', 1, 64) + "%"
	if v > 0 {
		s = "+" + s
	}
	return s
}

// PValue formats a test's p-value with three decimals, "<0.001" below that.
func PValue(p float64) string {
	if p < 0.001 {
		return "<0.001"
	}
	return strconv.FormatFloat(p, 'f', 3, 64)
}

// Interval formats a confidence interval of measured values: "49.27 – 51.42".
func Interval(lo, hi float64) string { return Num(lo) + " – " + Num(hi) }

// ID formats an identifier (a connection id, a pid, an errno): digits only, no separators.
func ID(v uint64) string { return strconv.FormatUint(v, 10) }
