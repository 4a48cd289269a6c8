//go:build linux

package probes

import (
	"os"
	"os/exec"
	"slices"
	"testing"
)

func TestParentOf(t *testing.T) {
	tests := []struct {
		stat string
		want uint32
		ok   bool
	}{
		{"123 (bash) S 45 123 123 0", 45, true},
		{"7 (a) b) c) R 1 7 7", 1, true},
		{"7 (x", 0, false},
		{"7 (x) S", 0, false},
		{"7 (x) S notanumber", 0, false},
	}
	for _, tc := range tests {
		got, ok := parentOf([]byte(tc.stat))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parentOf(%q) = %d, %v; want %d, %v", tc.stat, got, ok, tc.want, tc.ok)
		}
	}
}

func TestDescendants(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	d := Descendants([]uint32{uint32(os.Getpid())})
	if !slices.Contains(d, uint32(cmd.Process.Pid)) {
		t.Errorf("descendants %v lack the child %d", d, cmd.Process.Pid)
	}
}

func TestRunningState(t *testing.T) {
	for _, tc := range []struct {
		stat string
		want bool
	}{
		{"42 (sleep) S 1 42 42 0", true},
		{"42 (a) b) R 1 42 42 0", true},
		{"42 (true) Z 41 42 42 0", false},
		{"42 (x) X 41 42 42 0", false},
		{"garbage", false},
		{"42 (x)", false},
	} {
		if got := runningState([]byte(tc.stat)); got != tc.want {
			t.Errorf("runningState(%q) = %v, want %v", tc.stat, got, tc.want)
		}
	}
	if !running(uint32(os.Getpid())) {
		t.Error("this test's own process is not running")
	}
}
