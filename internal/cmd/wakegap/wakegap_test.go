package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMain makes the test binary the echo server when measure starts it as one.
func TestMain(m *testing.M) {
	if path := os.Getenv(serverEnv); path != "" {
		if err := serve(path, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A short measurement against a real server process: a row per gap and way of waiting, each
// wake-up part of its round trip, and a table line for each.
func TestMeasure(t *testing.T) {
	gaps := []time.Duration{0, 50 * time.Microsecond}
	rows, err := measure(3, gaps)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(gaps)*len(waits) {
		t.Fatalf("%d rows, want %d", len(rows), len(gaps)*len(waits))
	}
	for _, r := range rows {
		if !(r.rtt > 0 && r.server > 0 && r.client > 0 && r.server < r.rtt && r.client < r.rtt) {
			t.Errorf("gap %v %s: rtt %.1f server %.1f client %.1f µs, want both wake-ups inside the round trip", r.gap, r.wait, r.rtt, r.server, r.client)
		}
	}
	var b bytes.Buffer
	writeTable(&b, rows)
	if lines := strings.Split(strings.TrimSpace(b.String()), "\n"); len(lines) != 1+len(rows) || !strings.Contains(lines[2], "sleep") {
		t.Errorf("table:\n%s", b.String())
	}
}

func TestParseGaps(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []time.Duration
	}{
		{"0,50, 1000", []time.Duration{0, 50 * time.Microsecond, time.Millisecond}},
		{"-1", nil},
		{"x", nil},
		{"2000000", nil},
	} {
		got, err := parseGaps(tc.in)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) || (err != nil) != (tc.want == nil) {
			t.Errorf("parseGaps(%q) = %v, %v, want %v", tc.in, got, err, tc.want)
		}
	}
}
