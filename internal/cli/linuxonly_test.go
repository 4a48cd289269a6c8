package cli

import (
	"context"
	"strings"
	"testing"
)

// TestLinuxOnlyVerbs checks what a perflab built for another system says for the verbs that
// record or serve: one line naming the verb and Linux, exit 2; and that the verbs that read
// traces are not marked.
func TestLinuxOnlyVerbs(t *testing.T) {
	old := hostOS
	hostOS = "darwin"
	defer func() { hostOS = old }()
	for _, verb := range []string{"record", "top", "venus", "bench"} {
		if !commands[verb].LinuxOnly {
			t.Errorf("%s is not marked LinuxOnly", verb)
		}
		var out strings.Builder
		code := Main(context.Background(), &Env{Stdout: &out, Stderr: &out}, []string{verb, "run", "-p", "1"})
		if code != ExitBadInput {
			t.Errorf("%s on darwin: exit %d, want %d", verb, code, ExitBadInput)
		}
		msg := out.String()
		if strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "perflab "+verb+": needs Linux") {
			t.Errorf("%s on darwin said %q, want one line 'perflab %s: needs Linux...'", verb, msg, verb)
		}
	}
	for _, verb := range []string{"analyze", "compare", "gate", "model", "export", "merge"} {
		if c := commands[verb]; c == nil || c.LinuxOnly {
			t.Errorf("%s: missing or marked LinuxOnly", verb)
		}
	}
}
