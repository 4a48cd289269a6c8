package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionOf(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var out []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			out = append(out, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		stamp string
		bi    *debug.BuildInfo
		want  string
	}{
		{"stamped", "v0.3.0-4-gabc", &debug.BuildInfo{Main: debug.Module{Version: "v9.9.9"}}, "v0.3.0-4-gabc"},
		{"go install module@version", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261123203322-0123456789ab"}},
			"v0.0.0-20261123203322-0123456789ab"},
		{"built in a checkout", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: vcs("vcs.revision", "0123456789abcdef0123", "vcs.time", "2026-11-23T20:33:22Z", "vcs.modified", "false")},
			"devel-0123456789ab (2026-11-23T20:33:22Z)"},
		{"uncommitted changes", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: vcs("vcs.revision", "0123456789abcdef0123", "vcs.modified", "true")}, "devel-0123456789ab-dirty"},
		{"nothing recorded", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
		{"no build info", "dev", nil, "dev"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := versionOf(tc.stamp, tc.bi); got != tc.want {
				t.Errorf("versionOf = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestVersionFlag: perflab --version and perflab version print the same line.
func TestVersionFlag(t *testing.T) {
	var a, b strings.Builder
	if code := Main(context.Background(), &Env{Stdout: &a, Stderr: &a}, []string{"--version"}); code != 0 {
		t.Fatalf("--version: exit %d: %s", code, a.String())
	}
	if code := Main(context.Background(), &Env{Stdout: &b, Stderr: &b}, []string{"version"}); code != 0 {
		t.Fatalf("version: exit %d: %s", code, b.String())
	}
	if a.String() != b.String() || !strings.HasPrefix(a.String(), "perflab ") {
		t.Errorf("--version %q, version %q", a.String(), b.String())
	}
}

// TestVersionFromVCS builds perflab the way go install does in this checkout (no -ldflags) and
// checks that it reports the revision it was built from.
func TestVersionFromVCS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds perflab")
	}
	rev, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "perflab")
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, "github.com/perflab/perflab/cmd/perflab")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if info, err := exec.Command("go", "version", "-m", bin).Output(); err == nil && !strings.Contains(string(info), "vcs.revision") {
		top, _ := exec.Command("git", "rev-parse", "--show-toplevel").Output()
		if st, err := os.Stat(filepath.Join(strings.TrimSpace(string(top)), ".git")); err == nil && !st.IsDir() {
			t.Skip("a git worktree (.git is a file): the go command stamps VCS information only in a main checkout")
		}
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	// The go command stamps a main checkout either as a pseudo-version
	// (v0.0.0-TIME-REV12) or, where it gives none, perflab names the revision
	// (devel-REV12): both carry the revision's first 12 digits.
	if want := string(rev[:12]); !strings.Contains(string(out), want) {
		t.Errorf("perflab --version printed %q, want it to name revision %s", out, want)
	}
}
