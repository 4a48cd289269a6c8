package cli

import (
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestBadFlagValues runs every verb with bad flag values through Main: each must exit 2 with
// one line that names the flag and what it allows, then where the usage is, and never print
// the usage itself.
func TestBadFlagValues(t *testing.T) {
	const tr = pingpongTrace
	for _, tc := range []struct {
		args []string
		want string // in the message, after "perflab VERB: "
	}{
		// record
		{[]string{"record", "--payload-bytes", "-1", "--", "true"}, "--payload-bytes -1: want 0 to 256"},
		{[]string{"record", "--payload-bytes", "257", "--", "true"}, "--payload-bytes 257: want 0 to 256"},
		{[]string{"record", "--ring-bytes", "5000", "--", "true"}, "--ring-bytes 5000: want a power of two"},
		{[]string{"record", "--ring-bytes", "x", "--", "true"}, "--ring-bytes x: want a power of two"},
		{[]string{"record", "--duration", "-1s", "--", "true"}, "--duration -1s: want a duration from 0"},
		{[]string{"record", "--duration", "soon", "--", "true"}, "--duration soon: want a duration"},
		{[]string{"record", "-p", "abc"}, "-p"},
		{[]string{"record", "--label", "novalue", "--", "true"}, "--label novalue: want K=V"},
		// analyze
		{[]string{"analyze", "--format", "svg", tr}, "--format \"svg\" unknown (want html"},
		{[]string{"analyze", "--protocol", "gopher", tr}, "--protocol gopher: want one of auto"},
		// compare
		{[]string{"compare", "--alpha", "0", tr, tr}, "--alpha 0: want a number between 0 and 1"},
		{[]string{"compare", "--alpha", "1.5", tr, tr}, "--alpha 1.5: want a number between 0 and 1"},
		{[]string{"compare", "--alpha", "NaN", tr, tr}, "--alpha NaN: want a number between 0 and 1"},
		{[]string{"compare", "--alpha", "x", tr, tr}, "--alpha x: want a number between 0 and 1"},
		{[]string{"compare", "--format", "xml", tr, tr}, "--format xml: want one of table"},
		// gate
		{[]string{"gate", "--baseline", tr, "--runs", "1000000000000", tr}, "--runs 1000000000000: want 6 to 10000"},
		{[]string{"gate", "--baseline", tr, "--runs", "5", tr}, "--runs 5: want 6 to 10000"},
		{[]string{"gate", "--baseline", tr, "--runs", "-3", tr}, "--runs -3: want 6 to 10000"},
		{[]string{"gate", "--baseline", tr, "--on-inconclusive", "maybe", tr}, "--on-inconclusive maybe: want one of pass, fail"},
		{[]string{"gate", "--baseline", tr, "--format", "pdf", tr}, "--format pdf: want one of"},
		{[]string{"gate", "--baseline", tr, "--update=maybe", tr}, "--update maybe: want true or false"},
		// model
		{[]string{"model", "--fit", "90us,10us", "--rtt", "-1ms"}, "--rtt -1ms: want a duration from 0 to 1m"},
		{[]string{"model", "--fit", "90us,10us", "--measured-rtt", "-1ms"}, "--measured-rtt -1ms: want a duration from 0"},
		{[]string{"model", "--fit", "90us,10us", "--coalesce", "-5"}, "--coalesce -5: want 0 to 65536"},
		{[]string{"model", "--fit", "90us,10us", "--pipeline", "0"}, "--pipeline 0: want 1 to 65536"},
		{[]string{"model", "--fit", "90us,10us", "--pipeline", "99999999999999999999"}, "--pipeline 99999999999999999999: want 1 to 65536"},
		{[]string{"model", "--fit", "90us,10us", "--bandwidth", "-5MB"}, "--bandwidth -5MB: want bytes per second"},
		{[]string{"model", "--fit", "-1us,10us"}, "--fit -1us,10us: want two non-negative durations"},
		{[]string{"model", "--fit", "90us,10us", "--mode", "turbo"}, "--mode turbo: want one of baseline"},
		// venus serve
		{[]string{"venus", "serve", "--max-conns", "0"}, "--max-conns 0: want 1 to 65536"},
		{[]string{"venus", "serve", "--payload-bytes", "300"}, "--payload-bytes 300: want 0 to 256"},
		{[]string{"venus", "serve", "--idle-timeout", "-1s"}, "--idle-timeout -1s: want a duration"},
		{[]string{"venus", "serve", "--max-frame", "1"}, "--max-frame 1: want 4KiB to 1GiB"},
		{[]string{"venus", "serve", "--max-memory", "lots"}, "--max-memory lots: want a byte count"},
		{[]string{"venus", "serve", "--loop", "spin"}, "--loop spin: want one of conn, batch"},
		// venus run
		{[]string{"venus", "run", "--connect", "tcp://127.0.0.1:1", "--workload", "ping", "--requests", "-1"}, "--requests -1: want 1 to 1000000000"},
		{[]string{"venus", "run", "--connect", "tcp://127.0.0.1:1", "--workload", "ping", "--reply-bytes", "2147483648"}, "--reply-bytes 2147483648: want 20 to 16777216"},
		{[]string{"venus", "run", "--connect", "tcp://127.0.0.1:1", "--workload", "ping", "--request-bytes", "1"}, "--request-bytes 1: want 20 to 16777216"},
		{[]string{"venus", "run", "--connect", "tcp://127.0.0.1:1", "--workload", "ping", "--warmup", "-1"}, "--warmup -1: want 0 to"},
		{[]string{"venus", "run", "--connect", "tcp://127.0.0.1:1", "--workload", "ping", "--duration", "-1s"}, "--duration -1s: want a duration"},
		{[]string{"venus", "run", "--connect", "tcp://127.0.0.1:1", "--tokens", "0"}, "--tokens 0: want 1 to 1048576"},
		{[]string{"venus", "run", "--connect", "tcp://127.0.0.1:1", "--tokens", "many"}, "--tokens many: want 1 to 1048576"},
		{[]string{"venus", "run", "--connect", "tcp://127.0.0.1:1", "--hidden", "5000"}, "--hidden 5000: want 1 to 4096"},
		{[]string{"venus", "run", "--connect", "tcp://127.0.0.1:1", "--depth", "0"}, "--depth 0: want 1 to 65536"},
		{[]string{"venus", "run", "--connect", "tcp://127.0.0.1:1", "--delay", "-1ms"}, "--delay -1ms: want a duration from 0"},
		{[]string{"venus", "run", "--connect", "tcp://127.0.0.1:1", "--jitter", "-1ms"}, "--jitter -1ms: want a duration from 0"},
		{[]string{"venus", "run", "--connect", "tcp://127.0.0.1:1", "--bandwidth", "fast"}, "--bandwidth fast: want"},
		{[]string{"venus", "run", "--connect", "tcp://127.0.0.1:1", "--payload-bytes", "-1"}, "--payload-bytes -1: want 0 to 256"},
		{[]string{"venus", "run", "--connect", "tcp://127.0.0.1:1", "--seed", "-1"}, "--seed -1: want a non-negative integer"},
		{[]string{"venus", "run", "--connect", "tcp://127.0.0.1:1", "--json=2"}, "--json 2: want true or false"},
		// bench
		{[]string{"bench", "--duration", "0s"}, "--duration 0s: want a duration from 1ms to 10m"},
		{[]string{"bench", "--delay", "2s"}, "--delay 2s: want a duration from 0 to 1s"},
		{[]string{"bench", "--shm-spin", "-1"}, "--shm-spin -1: want 0 to 16777216"},
		{[]string{"bench", "--request-bytes", "5"}, "--request-bytes 5: want 20 to 1048576"},
		{[]string{"bench", "--clients", "0"}, "--clients: \"0\" is not a number from 1 to"},
		{[]string{"bench", "--format", "xml"}, "--format xml: want one of table, markdown, html"},
		{[]string{"bench", "--loop", "x"}, "--loop x: want one of batch, conn"},
		// top (record's flags, and --sort)
		{[]string{"top", "--sort", "x", "-p", "1"}, "--sort x: want one of msgs"},
		{[]string{"top", "--payload-bytes", "-1", "-p", "1"}, "--payload-bytes -1: want 0 to 256"},
		{[]string{"top", "-p", "1"}, "-p 1: want a process whose descendants are not the whole system"},
		// export
		{[]string{"export", "--format", "xml", tr}, "--format \"xml\" unknown (want"},
	} {
		verb := tc.args[0]
		if verb == "venus" {
			verb += " " + tc.args[1]
		}
		checkOneLine(t, tc.args, verb, tc.want)
	}
}

// TestUnknownFlagEveryVerb gives every verb a flag it does not have and a flag without its value.
func TestUnknownFlagEveryVerb(t *testing.T) {
	var verbs [][]string
	for name, c := range commands {
		if len(c.Subcommands) == 0 {
			verbs = append(verbs, []string{name})
		}
		for _, s := range c.Subcommands {
			verbs = append(verbs, []string{name, s})
		}
	}
	sort.Slice(verbs, func(i, j int) bool { return strings.Join(verbs[i], " ") < strings.Join(verbs[j], " ") })
	for _, v := range verbs {
		if v[0] == "version" {
			continue // takes no flags and ignores its arguments
		}
		verb := strings.Join(v, " ")
		checkOneLine(t, append(append([]string{}, v...), "--no-such-flag", "1"), verb, "unknown flag --no-such-flag")
		// -h prints the usage and succeeds.
		code, _, errs := runCLI(t, append(append([]string{}, v...), "-h")...)
		if code != ExitOK || !strings.Contains(errs, "usage: perflab "+verb) {
			t.Errorf("%s -h: exit %d, stderr %q; want 0 and the usage", verb, code, errs)
		}
	}
	for _, args := range [][]string{
		{"record", "-o"}, {"analyze", "--format"}, {"model", "--rtt"}, {"gate", "--runs"},
		{"venus", "run", "--requests"}, {"bench", "--duration"}, {"export", "-o"}, {"compare", "--alpha"},
	} {
		verb := args[0]
		if verb == "venus" {
			verb += " " + args[1]
		}
		checkOneLine(t, args, verb, "needs a value")
	}
}

var usageDump = regexp.MustCompile(`(?i)usage:|flags:|\n\s+-\w`)

func checkOneLine(t *testing.T, args []string, verb, want string) {
	t.Helper()
	code, out, errs := runCLI(t, args...)
	prefix := "perflab " + verb + ": "
	suffix := "; run 'perflab " + verb + " -h' for usage\n"
	switch {
	case code != ExitBadInput:
		t.Errorf("%q: exit %d, want 2; stderr %q", args, code, errs)
	case strings.Count(errs, "\n") != 1 || !strings.HasSuffix(errs, "\n"):
		t.Errorf("%q: stderr is not one line: %q", args, errs)
	case !strings.HasPrefix(errs, prefix) || !strings.HasSuffix(errs, suffix):
		t.Errorf("%q: stderr %q, want %q ... %q", args, errs, prefix, suffix)
	case !strings.Contains(errs, want):
		t.Errorf("%q: stderr %q lacks %q", args, errs, want)
	case usageDump.MatchString(errs) || out != "":
		t.Errorf("%q: usage printed: stderr %q, stdout %q", args, errs, out)
	case strings.Contains(errs, "panic"):
		t.Errorf("%q: panic: %q", args, errs)
	}
}

// TestRecordRefusesItself: -p naming init, perflab or an ancestor of perflab would record
// perflab itself and (nearly) every process: refused unless --whole-system, and perflab's own
// pid always.
func TestRecordRefusesItself(t *testing.T) {
	self := strconv.Itoa(os.Getpid())
	parent := strconv.Itoa(os.Getppid())
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"record", "-p", "1"}, "-p 1: want a process whose descendants are not the whole system (pid 1 is init); add --whole-system"},
		{[]string{"record", "-p", self}, "-p " + self + ": want a process other than perflab itself"},
		{[]string{"record", "--whole-system", "-p", self}, "-p " + self + ": want a process other than perflab itself"},
		{[]string{"record", "-p", parent}, "-p " + parent + ": want a process that is not an ancestor of perflab"},
		{[]string{"record", "-p", "0"}, "-p 0: want process ids"},
	} {
		checkOneLine(t, tc.args, "record", tc.want)
	}
}
