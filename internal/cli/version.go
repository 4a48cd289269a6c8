package cli

import (
	"context"
	"fmt"
	"runtime"
)

// Version is perflab's version, stamped at build time with -ldflags "-X ...cli.Version=...".
var Version = "dev"

func init() {
	Register(&Command{
		Name:    "version",
		Summary: "print perflab's version",
		Usage:   "",
		Run: func(ctx context.Context, env *Env, args []string) error {
			fmt.Fprintf(env.Stdout, "perflab %s %s %s/%s\n", Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	})
}
