package reports

import (
	"math"
	"testing"
)

func TestNum(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {1234567.8, "1,234,568"}, {19280.4, "19,280"}, {1000, "1,000"}, {999.96, "1,000"}, {999.94, "999.9"},
		{416.67, "416.7"}, {47.82, "47.82"}, {24, "24"}, {2.48, "2.48"}, {1.5, "1.5"},
		{0.972, "0.972"}, {0.5, "0.5"}, {0.0123, "0.0123"}, {0.000123456, "0.0001235"},
		{-3.25, "-3.25"}, {-0.00000000000001, "0"}, {math.NaN(), "-"}, {math.Inf(-1), "-"},
	} {
		if got := Num(tc.v); got != tc.want {
			t.Errorf("Num(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestCount(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{Count(uint64(0)), "0"}, {Count(uint64(999)), "999"}, {Count(uint64(1000)), "1,000"},
		{Count(uint64(29403024)), "29,403,024"}, {Count(uint64(1 << 63)), "9,223,372,036,854,775,808"},
		{Count(-1234), "-1,234"}, {Count(666666.6), "666,667"}, {Count(-0.2), "0"}, {Count(math.NaN()), "-"},
	} {
		if tc.got != tc.want {
			t.Errorf("Count = %q, want %q", tc.got, tc.want)
		}
	}
}

func TestPercentages(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{Share(0), "0.0%"}, {Share(0.123), "12.3%"}, {Share(1), "100.0%"},
		{Change(0.05), "+5.0%"}, {Change(-0.75), "-75.0%"}, {Change(-0.0001), "0.0%"}, {Change(math.Inf(1)), "-"},
		{Interval(49.271, 51.42), "49.27 – 51.42"},
		{PValue(0.0499), "0.050"}, {PValue(0.00099), "<0.001"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestAmount(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{1, "1 reply"}, {1.00001, "1 reply"}, {0.5, "0.5 replies"}, {0, "0 replies"}, {4, "4 replies"}, {1.25, "1.25 replies"},
	} {
		if got := Amount(tc.v, "reply", "replies"); got != tc.want {
			t.Errorf("Amount(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
