package cli

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is perflab's version when stamped at build time with -ldflags "-X ...cli.Version=..."
// (make build stamps `git describe`); "dev" otherwise, and then BuildVersion asks the build.
var Version = "dev"

func init() {
	Register(&Command{
		Name:    "version",
		Summary: "print perflab's version (also: perflab --version)",
		Usage:   "",
		Run: func(ctx context.Context, env *Env, args []string) error {
			fmt.Fprintln(env.Stdout, versionLine())
			return nil
		},
	})
}

// versionLine is what `perflab version` and `perflab --version` print.
func versionLine() string {
	return fmt.Sprintf("perflab %s %s %s/%s", BuildVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// BuildVersion returns perflab's version: the stamped Version, else what the Go toolchain
// recorded in the binary (debug.ReadBuildInfo).
func BuildVersion() string {
	bi, _ := debug.ReadBuildInfo()
	return versionOf(Version, bi)
}

// versionOf picks the version from a stamp and build information: the stamp when there is
// one; the module version when the binary was built by `go install module@version`; else the
// VCS revision the build was made from ("devel-0123456789ab", "-dirty" with uncommitted
// changes, and the commit time); "dev" when the build recorded none of these.
func versionOf(stamp string, bi *debug.BuildInfo) string {
	if stamp != "" && stamp != "dev" {
		return stamp
	}
	if bi == nil {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, when string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	v := "devel-" + rev[:min(12, len(rev))]
	if dirty {
		v += "-dirty"
	}
	if when != "" {
		v += " (" + when + ")"
	}
	return v
}
