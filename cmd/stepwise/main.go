// Command stepwise runs, resumes, inspects and serves Stepwise agents.
// See the README and `stepwise --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	// Listed for the cold-build order only (see its doc): it must sort
	// before internal/cli.
	_ "github.com/stepwise-run/stepwise/internal/buildorder"
	"github.com/stepwise-run/stepwise/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
