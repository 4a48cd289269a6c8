package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// scripts/demo.sh (make demo) as the README's first command: it finishes, says which recorder
// it used, prints the before/after table and the HTML report's path, and leaves no process
// behind. As root it runs twice: as root (eBPF) and as nobody (the in-process tracer), from a
// world-readable copy of the script and binary. Runs and tokens are cut down to keep it short.
func TestDemo(t *testing.T) {
	type who struct {
		name     string
		wrap     []string // command prefix
		recorder string
	}
	runs := []who{{"self", nil, "tracer"}}
	if os.Geteuid() == 0 {
		runs[0].recorder = "ebpf"
		if p, err := exec.LookPath("setpriv"); err == nil {
			runs = append(runs, who{"nobody", []string{p, "--reuid=nobody", "--regid=nogroup", "--clear-groups"}, "tracer"})
		}
	}
	for _, w := range runs {
		t.Run(w.name, func(t *testing.T) {
			// A world-readable tree with the script and the binary, as a fresh clone after
			// make build.
			root, err := os.MkdirTemp("", "perflab-demo-")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(root)
			for _, d := range []string{"scripts", "bin", "build"} {
				if err := os.MkdirAll(filepath.Join(root, d), 0o777); err != nil {
					t.Fatal(err)
				}
			}
			copyFile(t, filepath.Join(repoRoot, "scripts", "demo.sh"), filepath.Join(root, "scripts", "demo.sh"), 0o755)
			copyFile(t, perflab, filepath.Join(root, "bin", "perflab"), 0o755)
			for _, p := range []string{root, filepath.Join(root, "build")} {
				os.Chmod(p, 0o777)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			args := append(append([]string(nil), w.wrap...), filepath.Join(root, "scripts", "demo.sh"))
			cmd := exec.CommandContext(ctx, args[0], args[1:]...)
			cmd.Env = append(os.Environ(), "DEMO_RUNS=3", "DEMO_TOKENS=8", "HOME="+root)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			start := time.Now()
			err = cmd.Run()
			got := out.String()
			if err != nil {
				t.Fatalf("demo as %s: %v\n%s", w.name, err, got)
			}
			t.Logf("demo as %s: %.1f s", w.name, time.Since(start).Seconds())
			for _, want := range []string{"recorder: " + w.recorder, "tokens_per_s", "round_trips_per_token", "HTML report: build/demo/compare.html"} {
				if !strings.Contains(got, want) {
					t.Errorf("demo as %s: output lacks %q\n%s", w.name, want, got)
				}
			}
			for _, f := range []string{"compare.html", "before.html", "after.html", "before.plt", "after.plt"} {
				if st, err := os.Stat(filepath.Join(root, "build", "demo", f)); err != nil || st.Size() == 0 {
					t.Errorf("demo as %s: %s missing or empty: %v", w.name, f, err)
				}
			}
			checkDemoComparison(t, filepath.Join(root, "build", "demo"))
			if left := processesUnder(root); len(left) > 0 {
				t.Errorf("demo as %s left processes behind: %v", w.name, left)
			}
		})
	}
}

// checkDemoComparison: the page shows the comparison the demo printed (the same rows, metric
// by metric, with the same n), and the recorded runs are not among the runs compared.
func checkDemoComparison(t *testing.T, dir string) {
	t.Helper()
	txt, err := os.ReadFile(filepath.Join(dir, "compare.txt"))
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(dir, "compare.html"))
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for _, line := range strings.Split(string(txt), "\n") {
		f := strings.Fields(strings.ReplaceAll(line, "|", " ")) // the table's borders are not cells
		if len(f) < 4 || strings.HasSuffix(f[0], ":") || !strings.Contains(f[0], "_per_") && !strings.HasPrefix(f[0], "rtt_") {
			continue
		}
		rows++
		if !strings.Contains(string(page), "<td>"+f[0]) {
			t.Errorf("compare.html lacks the printed row %q", line)
		}
		for _, x := range f { // n: before/after counts
			if strings.Count(x, "/") == 1 && x[0] >= '0' && x[0] <= '9' && !strings.Contains(string(page), "<td>"+x+"</td>") {
				t.Errorf("compare.html lacks n %s of the printed row %q", x, line)
			}
		}
	}
	if rows == 0 {
		t.Errorf("compare.txt has no metric rows:\n%s", txt)
	}
	header := strings.SplitN(string(txt), "\n\n", 2)[0]
	for _, recorded := range []string{"-0.json", "tracer.plt", "before.plt", "after.plt"} {
		if strings.Contains(header, recorded) {
			t.Errorf("the recorded run %s is among the runs compared:\n%s", recorded, header)
		}
	}
	if !strings.Contains(header, "-1.json") || !strings.Contains(string(page), "-1.json") {
		t.Errorf("compare.txt and compare.html do not both compare the unrecorded runs:\n%s", header)
	}
}

// processesUnder returns the command lines of running processes whose executable or arguments
// name a path under dir.
func processesUnder(dir string) []string {
	var left []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		cl := strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")
		if strings.Contains(cl, dir) {
			left = append(left, e.Name()+": "+cl)
		}
	}
	return left
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
	os.Chmod(to, mode)
}
