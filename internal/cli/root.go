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
	"strings"
	"time"

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
	interactive    bool          // stdin and stdout are terminals
	lease          time.Duration // serve --lease; 0 = the engine's default
	noStepRes      bool          // serve --step-resources=false
	workerLease    time.Duration // serve --worker-lease (worker.Config.Lease)
	storeTimeout   time.Duration // serve --store-timeout (server.Config.StoreTimeout); 0 = none
	viewCache      int64         // serve --view-cache in bytes (server.Config.ViewCacheBytes); 0 = the server's default, negative = off
	// events: record events inside steps by default; set by serve (its
	// --events, default on) and run (--events) before they open the
	// runtime — each command has its own flag variable, since the flags of
	// all commands are defined on one env.
	events bool
	// agentHint is " --agent FILE" when the command loaded an agent file,
	// for the commands it suggests (resume, input).
	agentHint string
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
			fmt.Fprintln(stderr, "stepwise:", trimPrefix(xe.err))
		}
		return xe.code
	}
	fmt.Fprintln(stderr, "stepwise:", trimPrefix(err))
	if isUsage(err) || strings.HasPrefix(err.Error(), "unknown command ") {
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
	usageErrors(root)
	return root
}

// usageErrors makes cobra's own refusals — a bad flag, a wrong number of
// arguments, an unknown command — usage errors (exit status 2) in every
// command, like the commands' own checks.
func usageErrors(c *cobra.Command) {
	c.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err.Error()} })
	if args := c.Args; args != nil {
		c.Args = func(cmd *cobra.Command, a []string) error {
			if err := args(cmd, a); err != nil {
				return usageError{err.Error()}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		usageErrors(sub)
	}
}

// commands are registered by the subcommand files.
var commands []func(*env) *cobra.Command

func register(f func(*env) *cobra.Command) { commands = append(commands, f) }

// trimPrefix returns the message of err without the "stepwise: " that the
// sentinels start with (wrapped or not), so that it is printed once.
func trimPrefix(err error) string {
	msg := strings.ReplaceAll(err.Error(), ": stepwise: ", ": ")
	for strings.HasPrefix(msg, "stepwise: ") {
		msg = msg[len("stepwise: "):]
	}
	return msg
}

func isUsage(err error) bool {
	var u usageError
	return errors.As(err, &u)
}

type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// isTerminal reports whether v is a terminal: a character device other
// than the null device (</dev/null is not someone typing).
func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(fi, null)
}

// shellWord quotes s for a shell command line when it needs it.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
