package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRedisBenchmarkVerdicts records redis-benchmark against redis-server from Debian, at the
// default 64-byte payload heads, and checks what perflab concludes, not only what it counts:
//   - pipelined (-P 16: 576 and 720 bytes a call, a head shows one command and a piece): every
//     connection is still found to speak resp, the counts are said to be lower bounds, and the
//     same SET and GET sent 16 to a call is not called polling;
//   - one SET at a time, the same key and value every time: a write repeated is not a poll;
//   - one GET at a time of random keys (-r): requests that differ are not a poll;
//   - one GET at a time of one key, every reply the same: that is what a poll looks like on
//     the wire, and perflab says so.
func TestRedisBenchmarkVerdicts(t *testing.T) {
	redis := need(t, "redis-server", "redis-server")
	need(t, "redis-benchmark", "redis-tools")
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	startDaemon(t, addr, redis, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	const n = 4000
	cases := []struct {
		name    string
		args    string
		polling bool
		check   func(t *testing.T, s analyzeJSON)
	}{
		{"pipelined", "-c 4 -P 16 -t set,get", false, func(t *testing.T, s analyzeJSON) {
			for _, p := range s.Decoding.Protocols {
				if p.Name != "resp" {
					t.Errorf("%d connections decoded as %s, want every one resp", p.Connections, p.Name)
				}
			}
			if s.CallsPastHead == 0 {
				t.Errorf("calls_past_head 0: the counts are not said to be lower bounds")
			}
			warned := false
			for _, w := range s.Warnings {
				warned = warned || strings.Contains(w, "calls held more pipelined messages than their captured payload heads show")
			}
			if !warned {
				t.Errorf("the replies to requests past the heads are not explained: %q", s.Warnings)
			}
		}},
		{"set one at a time", "-c 1 -P 1 -t set", false, nil},
		{"get random keys", "-c 1 -P 1 -r 100000 -t get", false, nil},
		{"get one key", "-c 1 -P 1 -t get", true, func(t *testing.T, s analyzeJSON) {
			if got := s.replies()["GET"]; got != n {
				t.Errorf("%d GET replies, redis-benchmark sent %d GETs", got, n)
			}
		}},
	}
	for k, c := range cases {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, fmt.Sprintf("rb%d.plt", k))
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			args := append([]string{"record", "-o", out, "--", "redis-benchmark", "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-n", strconv.Itoa(n), "-q"}, strings.Fields(c.args)...)
			if b, err := exec.CommandContext(ctx, perflab, args...).CombinedOutput(); err != nil {
				t.Fatalf("record redis-benchmark: %v\n%s", err, b)
			}
			s := analyzeTrace(t, dir, out)
			if s.Protocol != "resp" || s.Decoding == nil {
				t.Fatalf("protocol %q, decoding %+v; want resp", s.Protocol, s.Decoding)
			}
			if title := s.finding("polling_storm"); (title != "") != c.polling {
				t.Errorf("polling finding %q, want one: %v", title, c.polling)
			}
			if c.check != nil {
				c.check(t, s)
			}
		})
	}
}
