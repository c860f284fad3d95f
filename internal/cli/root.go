// Package cli implements the stepwise command line: one file per
// subcommand, each writing to the injected streams so that the whole
// binary can be tested.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// Exit codes of the stepwise command.
const (
	ExitOK      = 0
	ExitFailure = 1 // an error, or a run that failed or was cancelled
	ExitUsage   = 2 // bad flags or arguments
	ExitWaiting = 3 // the run is waiting for human input
)

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// env holds what every subcommand shares.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	db             string
	server, token  string
	interactive    bool // stdin and stdout are terminals
	events         bool // record events inside steps by default (serve, run --events)
}

// Main runs the command line with args (without the program name) and
// returns the process exit code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, interactive: isTerminal(stdin) && isTerminal(stdout)}
	root := newRoot(e)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var xe *exitError
	if errors.As(err, &xe) {
		if xe.err != nil {
			fmt.Fprintln(stderr, "stepwise:", xe.err)
		}
		return xe.code
	}
	fmt.Fprintln(stderr, "stepwise:", err)
	if isUsage(err) {
		return ExitUsage
	}
	return ExitFailure
}

func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:           "stepwise",
		Short:         "Durable, streamable, forkable step logs for LLM agents",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	def := os.Getenv("STEPWISE_DB")
	if def == "" {
		def = "sqlite:./.stepwise/stepwise.db"
	}
	root.PersistentFlags().StringVar(&e.db, "db", def, "database: sqlite:PATH, postgres://… or memory: (env STEPWISE_DB)")
	root.PersistentFlags().StringVar(&e.server, "server", os.Getenv("STEPWISE_SERVER"), "talk to a stepwise server at this URL instead of a database (env STEPWISE_SERVER)")
	root.PersistentFlags().StringVar(&e.token, "token", os.Getenv("STEPWISE_TOKEN"), "bearer token for --server (env STEPWISE_TOKEN)")
	for _, add := range commands {
		root.AddCommand(add(e))
	}
	return root
}

// commands are registered by the subcommand files.
var commands []func(*env) *cobra.Command

func register(f func(*env) *cobra.Command) { commands = append(commands, f) }

func isUsage(err error) bool {
	var u usageError
	return errors.As(err, &u)
}

type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
