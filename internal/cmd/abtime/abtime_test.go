package main

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func TestSplitWords(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		bad  bool
	}{
		{"perflab analyze -o /dev/null T", []string{"perflab", "analyze", "-o", "/dev/null", "T"}, false},
		{"sh -c 'exec x > /dev/null'", []string{"sh", "-c", "exec x > /dev/null"}, false},
		{`a "b c" ''`, []string{"a", "b c", ""}, false},
		{"  a  ", []string{"a"}, false},
		{"a 'b", nil, true},
		{"   ", nil, true},
	} {
		got, err := splitWords(tc.in)
		if (err != nil) != tc.bad {
			t.Errorf("splitWords(%q) error %v, want error %v", tc.in, err, tc.bad)
			continue
		}
		if !tc.bad && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("splitWords(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestRunAlternates times two real commands and checks the report names both, gives three
// figures for each and the pairwise ratios.
func TestRunAlternates(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out, 2, "true", []string{"sh", "-c", "exit 0"}); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"A: sh -c exit 0", "B: true", "A/B, pair by pair:", "wall s", "cpu s", "peak MiB"} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
	if got := strings.Count(s, "median"); got != 9 {
		t.Errorf("report has %d median figures, want 9 (3 each for A, B and A/B):\n%s", got, s)
	}
}

func TestRunErrors(t *testing.T) {
	var out bytes.Buffer
	for _, tc := range []struct {
		n    int
		vs   string
		a    []string
		want string
	}{
		{0, "", []string{"true"}, "-n 0 out of range"},
		{1, "", nil, "no command given"},
		{1, "a 'b", []string{"true"}, "parse -vs"},
		{1, "", []string{"false"}, "run false"},
	} {
		err := run(&out, tc.n, tc.vs, tc.a)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%d, %q, %q) = %v, want an error with %q", tc.n, tc.vs, tc.a, err, tc.want)
		}
	}
}
