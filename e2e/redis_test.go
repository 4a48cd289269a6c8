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

// redisServer starts Debian's redis-server on a free loopback port, without persistence, for
// the test's length, and returns the port.
func redisServer(t *testing.T) int {
	t.Helper()
	redis := need(t, "redis-server", "redis-server")
	port := freePort(t)
	startDaemon(t, fmt.Sprintf("127.0.0.1:%d", port), redis, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	return port
}

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
	need(t, "redis-benchmark", "redis-tools")
	port := redisServer(t)
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
				warned = warned || strings.Contains(w, "captured payload heads ended before the pipelined messages did")
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

// TestRedisPubSub records redis-cli subscribed to a channel of Debian's redis-server while
// another client publishes to it, at the default 64-byte heads and at 256: the messages the
// server pushes answer no request, so they are pushes, not replies without a request; the
// SUBSCRIBE is the one round trip; the pushes past the heads make the message count a lower
// bound that never exceeds what was published, and not the round trips'.
func TestRedisPubSub(t *testing.T) {
	cli := need(t, "redis-cli", "redis-tools")
	port := redisServer(t)
	redisCLI := func(args ...string) string {
		t.Helper()
		b, err := exec.Command(cli, append([]string{"-p", strconv.Itoa(port)}, args...)...).Output()
		if err != nil {
			t.Fatalf("redis-cli %v: %v", args, err)
		}
		return strings.TrimSpace(string(b))
	}
	const published = 300
	for _, head := range []string{"64", "256"} {
		t.Run("head_"+head, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "sub.plt")
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			rec := exec.CommandContext(ctx, perflab, "record", "--payload-bytes", head, "-o", out, "--", cli, "-p", strconv.Itoa(port), "subscribe", "news")
			var stderr strings.Builder
			rec.Stderr = &stderr
			if err := rec.Start(); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(30 * time.Second); !strings.HasSuffix(redisCLI("pubsub", "numsub", "news"), "1"); time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the subscriber never subscribed\n%s", stderr.String())
				}
			}
			var script strings.Builder
			for i := 0; i < published; i++ {
				fmt.Fprintf(&script, "PUBLISH news item-%d\n", i)
			}
			pub := exec.Command(cli, "-p", strconv.Itoa(port))
			pub.Stdin = strings.NewReader(script.String())
			if b, err := pub.CombinedOutput(); err != nil {
				t.Fatalf("publish: %v\n%s", err, b)
			}
			redisCLI("client", "kill", "type", "pubsub") // the subscriber's connection closes; it exits
			_ = rec.Wait()                               // with redis-cli's status, 1
			if !strings.Contains(stderr.String(), "trace written") {
				t.Fatalf("record: %s", stderr.String())
			}
			s := analyzeTrace(t, dir, out)
			var pushes, other uint64
			for _, c := range s.Commands {
				switch {
				case c.Kind == "push" && c.Direction == "recv":
					pushes += c.Count
				case c.Direction == "recv" && c.Name != "SUBSCRIBE":
					other += c.Count
				}
			}
			if s.RoundTrips.Count != 1 || s.RoundTrips.Unpaired != 0 || other != 0 {
				t.Errorf("round trips %d, unpaired replies %d, other replies %d; want 1 (the SUBSCRIBE), 0, 0", s.RoundTrips.Count, s.RoundTrips.Unpaired, other)
			}
			if pushes == 0 || pushes > published || s.CallsPastHead != 0 {
				t.Errorf("pushes %d of %d published, calls past the head %d (round-trip counts said to be lower bounds)", pushes, published, s.CallsPastHead)
			}
			if pushes < published && s.PushesPastHead == 0 {
				t.Errorf("%d pushes of %d published, and no pushes past the heads said", pushes, published)
			}
			for _, w := range s.Warnings {
				if strings.Contains(w, "answer no request seen") {
					t.Errorf("warning %q", w)
				}
				if i := strings.Index(w, "pushes: at least "); i >= 0 {
					var n uint64
					if _, err := fmt.Sscanf(w[i+len("pushes: at least "):], "%d", &n); err != nil || n > published || n < pushes {
						t.Errorf("%q: at least %d of %d published, %d decoded", w, n, published, pushes)
					}
				}
			}
		})
	}
}

// TestRedisLongRequests records redis-cli running a script against Debian's redis-server at
// the default 64-byte heads: SETs with an expiry whose value pushes the EX past the head (the
// request's length cannot be told from what was captured), GETs, the 170 KB COMMAND DOCS reply
// redis-cli asks for first (its later calls start with bytes that parse as values), and
// XREADs that BLOCK on an empty stream. Every reply must answer its own request: a SET's is
// +OK (5 bytes), a GET's the value (87 bytes), and the XREADs' wait is left out of the serial
// round trips' cost, since pipelining cannot take it away.
func TestRedisLongRequests(t *testing.T) {
	cli := need(t, "redis-cli", "redis-tools")
	port := redisServer(t)
	const sets, xreads = 150, 4
	value := strings.Repeat("v", 80)
	var script strings.Builder
	for i := 0; i < sets; i++ {
		fmt.Fprintf(&script, "SET key%d %s EX 100\nGET key%d\n", i, value, i)
		if i%(sets/xreads) == sets/xreads-1 {
			fmt.Fprintf(&script, "XREAD BLOCK 100 STREAMS nothing $\n")
		}
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "long.plt")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rec := exec.CommandContext(ctx, perflab, "record", "-o", out, "--", cli, "-p", strconv.Itoa(port))
	rec.Stdin = strings.NewReader(script.String())
	if b, err := rec.CombinedOutput(); err != nil {
		t.Fatalf("record redis-cli: %v\n%s", err, b)
	}
	s := analyzeTrace(t, dir, out)
	replies := map[string][2]uint64{}
	for _, c := range s.Commands {
		if c.Direction == "recv" {
			replies[c.Name] = [2]uint64{c.Count, c.Bytes}
		}
	}
	for name, want := range map[string][2]uint64{"SET": {sets, 5 * sets}, "GET": {sets, 87 * sets}, "XREAD": {xreads, 5 * xreads}} {
		if replies[name] != want {
			t.Errorf("%s: %d replies of %d bytes, want %d of %d (%v)", name, replies[name][0], replies[name][1], want[0], want[1], replies)
		}
	}
	if cmd := replies["COMMAND"]; cmd[0] != 1 || cmd[1] < 100_000 {
		t.Errorf("COMMAND: %d replies of %d bytes, want one of its 170 KB (%v)", cmd[0], cmd[1], replies)
	}
	if want := uint64(2*sets + xreads + 1); s.RoundTrips.Count != want || s.RoundTrips.Unpaired != 0 || s.RoundTrips.Unanswered != 0 || s.CallsPastHead != 0 {
		t.Errorf("round trips %d (unpaired %d, unanswered %d, calls past the head %d), want %d, 0, 0, 0", s.RoundTrips.Count, s.RoundTrips.Unpaired, s.RoundTrips.Unanswered, s.CallsPastHead, want)
	}
	// one request at a time: the serial finding stands on the SETs and GETs alone
	serial := ""
	if s.Evidence != nil {
		for _, f := range s.Evidence.Findings {
			if f.Kind == "serial_round_trips" {
				serial = f.Evidence
			}
		}
	}
	if !strings.Contains(serial, fmt.Sprintf("%d round trips, one at a time", 2*sets+1)) || !strings.Contains(serial, fmt.Sprintf("%d round trips of commands that block by design (XREAD BLOCK)", xreads)) {
		t.Errorf("serial round trips: %q, want the %d others one at a time and the %d XREAD BLOCKs left out", serial, 2*sets+1, xreads)
	}
}
