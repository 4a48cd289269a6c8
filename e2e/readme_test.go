package e2e

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The README's tour run as a doc test, as
// cmd/benchstat's doc_test.go does: every command of its ```sh blocks runs with the built
// perflab first on PATH, in a fresh directory, in order. Each must exit with the code its
// `# exit N` comment gives (0 without one); a line ending in `&` starts a background process
// that the test stops at the end; `# needs root` lines run only as root. Every line of the
// ```text block after a command (its example output) must appear in what the command printed,
// compared without table borders and with blanks collapsed; in lines with digits each number
// stands for any number. And every excerpt's figures are checked, in the README and in the
// output alike, by the tourChecks below (Little's law within ±2%, exact counts per token, ...):
// an excerpt with digits but no check fails the test. The tour's socket,
// /tmp/perflab-tour.sock, is moved into the test's directory.

// tourCmd is one command of the tour.
type tourCmd struct {
	line       int // in the file
	shell      string
	exit       int
	background bool
	needsRoot  bool
	want       []string // expected output lines, as written
}

var trailingComment = regexp.MustCompile(`\s+#\s*(.*)$`)

// parseTour returns the commands of a tour file.
func parseTour(t *testing.T, path string) []tourCmd {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cmds []tourCmd
	var block string // "sh", "text" or ""
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			if block != "" {
				block = ""
			} else {
				block = strings.TrimPrefix(line, "```")
			}
			continue
		}
		switch block {
		case "sh":
			s := strings.TrimSpace(line)
			if s == "" || strings.HasPrefix(s, "#") {
				continue
			}
			c := tourCmd{line: n}
			if m := trailingComment.FindStringSubmatchIndex(s); m != nil {
				comment := s[m[2]:m[3]]
				s = s[:m[0]]
				if code, ok := strings.CutPrefix(comment, "exit "); ok {
					if c.exit, err = strconv.Atoi(code); err != nil {
						t.Fatalf("%s:%d: bad exit comment %q", path, n, comment)
					}
				}
				c.needsRoot = comment == "needs root"
			}
			if b, ok := strings.CutSuffix(s, "&"); ok {
				s, c.background = strings.TrimSpace(b), true
			}
			c.shell = s
			cmds = append(cmds, c)
		case "text":
			if len(cmds) == 0 {
				t.Fatalf("%s:%d: output block before any command", path, n)
			}
			cmds[len(cmds)-1].want = append(cmds[len(cmds)-1].want, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cmds
}

// normalize drops table borders and collapses blanks, so an excerpt matches however wide the
// columns came out.
func normalize(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '|' || r == '+' || r == '-' {
			return ' '
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}

func hasDigit(s string) bool { return strings.ContainsAny(s, "0123456789") }

var numberRun = regexp.MustCompile(`[0-9][0-9.,]*`)

// shapePattern returns a pattern for a normalized excerpt line in which every number matches
// any number, bounds included (figures change from run to run, and a p-value of 0.004 may
// print as ≤0.002 in another; the words around them may not change).
func shapePattern(line string) *regexp.Regexp {
	var b strings.Builder
	last := 0
	for _, m := range numberRun.FindAllStringIndex(line, -1) {
		before := strings.TrimSuffix(strings.TrimSuffix(line[last:m[0]], "≤"), "<")
		b.WriteString(regexp.QuoteMeta(before))
		b.WriteString(`(?:≤|<)?[0-9][0-9.,]*(?:e [0-9]+)?`)
		last = m[1]
	}
	b.WriteString(regexp.QuoteMeta(line[last:]))
	return regexp.MustCompile(b.String())
}

// tourCheck checks figures of one excerpt: re runs over the normalized text (table borders,
// '+' and '-' signs and repeated blanks gone), and ok judges each match's groups.
type tourCheck struct {
	cmd  string // a substring of the command whose excerpt this checks
	what string
	re   *regexp.Regexp
	ok   func(g []float64) bool
}

// tourChecks hold at least one figure of every excerpt to what must be true of it.
var tourChecks = []tourCheck{
	{"perflab record", "no event lost", regexp.MustCompile(`([0-9]+) lost`), func(g []float64) bool { return g[0] == 0 }},
	{"--mode coalesce+pipeline --trace", "12 frames and 6 round trips per token",
		regexp.MustCompile(`per token: ([0-9.]+) frames, ([0-9.]+) round trips`), func(g []float64) bool { return g[0] == 12 && g[1] == 6 }},
	{"perflab analyze baseline.plt", "Little's law holds within ±2%",
		regexp.MustCompile(`(?:trace|round trips) (?:[0-9.,]+ ){4}([0-9.]+)%`), func(g []float64) bool { return g[0] <= 2 }},
	{"perflab analyze baseline.plt", "33 requests and 33 round trips per token",
		regexp.MustCompile(`token (?:[a-z]+ )?[0-9]+ ([0-9.]+) [0-9.]+ ([0-9.]+) `), func(g []float64) bool { return g[0] == 33 && g[1] == 33 }},
	{"perflab compare", "messages per token 66 → 12, exact",
		regexp.MustCompile(`messages_per_token ([0-9.]+) ([0-9.]+) 81\.8%`), func(g []float64) bool { return g[0] == 66 && g[1] == 12 }},
	{"perflab gate --baseline gate-baseline.json slow", "messages per token +450%",
		regexp.MustCompile(`messages_per_token ≤ 0% regression ([0-9.]+) → ([0-9.]+) \( 450\.0%`), func(g []float64) bool { return g[0] == 12 && g[1] == 66 }},
	{"perflab model", "the model keeps the counts: 66 → 12 messages, 33 → 6 round trips",
		regexp.MustCompile(`baseline \(measured\) 1 1 ([0-9]+) ([0-9]+) .*coalesce pipeline sync 8 2 ms ([0-9]+) ([0-9]+) `), func(g []float64) bool {
			return g[0] == 66 && g[1] == 33 && g[2] == 12 && g[3] == 6
		}},
	{"perflab bench", "Little's law within ±2% at every point",
		regexp.MustCompile(`unix/baseline/d1/c[0-9]+ (?:[0-9.,]+ ){4}([0-9.]+)%`), func(g []float64) bool { return g[0] <= 2 }},
}

// checkFigures applies the checks of command cmd to text and returns what failed; found counts
// the checks that matched at all.
func checkFigures(cmd, text string) (found int, failed []string) {
	norm := normalize(text)
	for _, c := range tourChecks {
		if !strings.Contains(cmd, c.cmd) {
			continue
		}
		ms := c.re.FindAllStringSubmatch(norm, -1)
		if len(ms) == 0 {
			failed = append(failed, c.what+": no match for "+c.re.String())
			continue
		}
		found++
		for _, m := range ms {
			g := make([]float64, len(m)-1)
			for i, v := range m[1:] {
				g[i], _ = strconv.ParseFloat(strings.ReplaceAll(v, ",", ""), 64)
			}
			if !c.ok(g) {
				failed = append(failed, c.what+": "+m[0])
			}
		}
	}
	return found, failed
}

// TestReadmeFigures checks the README's own excerpts: each with digits has a check of its
// figures, and the figures pass it (the tour then checks the commands' output the same way).
func TestReadmeFigures(t *testing.T) {
	for _, c := range parseTour(t, filepath.Join(repoRoot, "README.md")) {
		text := strings.Join(c.want, "\n")
		if !hasDigit(text) {
			continue
		}
		found, failed := checkFigures(c.shell, text)
		if found == 0 {
			t.Errorf("README line %d: the excerpt of %q has figures but no check of them (add one to tourChecks)", c.line, c.shell)
		}
		for _, f := range failed {
			t.Errorf("README line %d: %s: %s", c.line, c.shell, f)
		}
	}
}

func TestTour(t *testing.T) {
	path := filepath.Join(repoRoot, "README.md")
	cmds := parseTour(t, path)
	var all strings.Builder
	for _, c := range cmds {
		all.WriteString(c.shell + "\n")
	}
	for _, verb := range []string{"perflab record", "perflab analyze", "perflab compare", "perflab gate", "perflab model", "perflab bench"} {
		if !strings.Contains(all.String(), verb) {
			t.Errorf("the tour has no %q command", verb)
		}
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "venus.sock")
	env := append(os.Environ(), "PATH="+filepath.Dir(perflab)+string(os.PathListSeparator)+os.Getenv("PATH"))
	root := os.Geteuid() == 0
	for _, c := range cmds {
		shell := strings.ReplaceAll(c.shell, "/tmp/perflab-tour.sock", sock)
		name := "line " + strconv.Itoa(c.line)
		if c.needsRoot && !root {
			t.Logf("%s: skipped, needs root: %s", name, c.shell)
			continue
		}
		if c.background {
			startBackground(t, dir, env, shell, sock)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", shell)
		cmd.Dir, cmd.Env = dir, env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		cancel()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s: %s: %v", name, c.shell, err)
		}
		got := out.String()
		if strings.Contains(got, "panic:") || strings.Contains(got, "internal error") {
			t.Errorf("%s: %s panicked:\n%s", name, c.shell, got)
		}
		if code != c.exit {
			t.Errorf("%s: %s: exit %d, the tour says %d\n%s", name, c.shell, code, c.exit, tail(got, 3000))
			continue
		}
		norm := normalize(got)
		for _, w := range c.want {
			nw := normalize(w)
			if nw == "" {
				continue
			}
			if hasDigit(w) {
				if !shapePattern(nw).MatchString(norm) {
					t.Errorf("%s: %s: output has no line shaped like the tour's %q\n%s", name, c.shell, strings.TrimSpace(w), tail(got, 3000))
				}
				continue
			}
			if !strings.Contains(norm, nw) {
				t.Errorf("%s: %s: output lacks the tour's line %q\n%s", name, c.shell, strings.TrimSpace(w), tail(got, 3000))
			}
		}
		if hasDigit(strings.Join(c.want, "")) {
			if _, failed := checkFigures(c.shell, got); len(failed) > 0 {
				t.Errorf("%s: %s: figures: %s\n%s", name, c.shell, strings.Join(failed, "; "), tail(got, 3000))
			}
		}
		t.Logf("%s: ok: %s", name, c.shell)
	}
}

// startBackground starts shell in its own process group and stops the group when the test
// ends; when the command serves sock, it waits for the socket to appear.
func startBackground(t *testing.T, dir string, env []string, shell, sock string) {
	t.Helper()
	cmd := exec.Command("bash", "-c", "exec "+shell)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
			t.Errorf("%s: did not stop on SIGINT within 10 s", shell)
		}
	})
	if !strings.Contains(shell, sock) {
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(sock); err == nil {
			return
		}
		select {
		case <-done:
			t.Fatalf("%s exited:\n%s", shell, out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("%s: %s did not appear within 10 s", shell, sock)
}
