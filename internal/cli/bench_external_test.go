//go:build linux

package cli

import (
	"strings"
	"testing"
)

// TestBenchExternalBadInput: the external sweep's flags are checked before anything starts,
// each mistake one line naming it, exit 2.
func TestBenchExternalBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--client", "redis-benchmark -c {clients}"}, "--client needs the server"},
		{[]string{"--server-pid", "1"}, "need --client"},
		{[]string{"--server-pid", "1", "--server-cmd", "redis-server", "--client", "x -c {clients}"}, "not both"},
		{[]string{"--server-pid", "1", "--client", "redis-benchmark -c 4"}, "{clients}"},
		{[]string{"--server-pid", "x", "--client", "b -c {clients}"}, "--server-pid"},
		{[]string{"--server-pid", "999999999", "--client", "b -c {clients}"}, "--server-pid"},
		{[]string{"--server-cmd", "perflab-no-such-server", "--client", "b -c {clients}"}, "cannot start"},
		{[]string{"--server-pid", "1", "--client", "b -c {clients}", "--client-format", "xml"}, "--client-format"},
		{[]string{"--server-pid", "1", "--client", "b -c {clients}", "--clients", "0"}, "--clients"},
	} {
		code, _, stderr := runCLI(t, append([]string{"bench"}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("bench %q: exit %d, stderr %q; want 2 and one line with %q", tc.args, code, stderr, tc.want)
		}
	}
}
