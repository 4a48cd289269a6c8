// Command perflab captures, explains, predicts and guards the round trips of networked programs.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/perflab/perflab/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, &cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}, os.Args[1:])
	stop()
	os.Exit(code)
}
