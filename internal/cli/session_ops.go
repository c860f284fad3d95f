package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stepwise-run/stepwise/render"

	"github.com/spf13/cobra"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

func init() {
	register(contextCmd)
	register(forkCmd)
	register(summaryCmd)
	register(traceCmd)
	register(retryCmd)
	register(replayCmd)
	register(cancelCmd)
	register(forksCmd)
}

func contextCmd(e *env) *cobra.Command {
	var agent string
	c := &cobra.Command{
		Use:   "context SESSION [--agent FILE|NAME]",
		Short: "Preview the exact messages the next model call would receive",
		Long: `Preview the exact request (system prompt, messages, tools) the next model call
of a session would send, after the agent's context policy. The agent is the
session's by default: a built-in agent, or with --server any agent the server
loaded. For a session of an agent from a file, the database records the
agent's name, not its file: without --agent FILE the messages are rebuilt
as GET /v1/sessions/{id}/context does for an agent it does not run, without
the agent's system prompt and tools.`,
		Args: cobra.ExactArgs(1),
		RunE: e.runWith(&agent, func(cmd *cobra.Command, b backend, args []string) error {
			req, err := b.Context(cmd.Context(), args[0], b.AgentName(agent))
			if err != nil {
				return err
			}
			if l, ok := b.(local); ok && agent == "" {
				if name := sessionAgent(cmd.Context(), l, args[0]); name != "" {
					if _, err := l.eng.Agent(name); errors.Is(err, stepwise.ErrUnknownAgent) {
						fmt.Fprintf(e.stderr, "stepwise: agent %q is not loaded here: its system prompt and tools are left out (pass its agent file with --agent FILE)\n", name)
					}
				}
			}
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(req)
		}),
	}
	c.Flags().StringVar(&agent, "agent", "", "agent file or name (default: the session's agent)")
	return c
}

// sessionAgent returns the agent of a session, "" when it cannot be read.
func sessionAgent(ctx context.Context, l local, id string) string {
	sess, err := l.st.SessionGet(ctx, &store.SessionGetParams{ID: id})
	if err != nil {
		return ""
	}
	return sess.Agent
}

func forkCmd(e *env) *cobra.Command {
	var at int64
	var edit string
	c := &cobra.Command{
		Use:   "fork SESSION --at K [--edit TEXT]",
		Short: "Fork a session at step K (O(1), nothing copied); optionally replace step K's message",
		Args:  cobra.ExactArgs(1),
		RunE: e.runWith(nil, func(cmd *cobra.Command, b backend, args []string) error {
			p := stepwise.ForkParams{SessionID: args[0], At: at}
			if cmd.Flags().Changed("edit") {
				p.Edit = &edit
			}
			s, err := b.Fork(cmd.Context(), p)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "%s\n", s.ID)
			return nil
		}),
	}
	c.Flags().Int64Var(&at, "at", 0, "fork point: the fork keeps steps 1..K")
	c.Flags().StringVar(&edit, "edit", "", "replace the content of step K in the fork")
	return c
}

func forksCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "forks SESSION",
		Short: "Print the fork tree of a session",
		Args:  cobra.ExactArgs(1),
		RunE: e.readWith(func(cmd *cobra.Command, b backend, args []string) error {
			t, err := b.Tree(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			var walk func(t *stepwise.ForkTree, depth int)
			walk = func(t *stepwise.ForkTree, depth int) {
				mark := ""
				if t.Session.ID == args[0] {
					mark = "  ◀"
				}
				at := ""
				if t.Session.ParentSessionID != "" {
					at = " @" + forkPlace(cmd.Context(), b, t.Session)
				}
				fmt.Fprintf(e.stdout, "%s%s%s  (%d steps)%s\n", strings.Repeat("  ", depth), t.Session.ID, at, t.Session.LastSequence, mark)
				for _, k := range t.Forks {
					walk(k, depth+1)
				}
			}
			walk(t, 0)
			return nil
		}),
	}
}

func summaryCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "summary SESSION",
		Short: "Counts per kind and role, tokens, cost, duration, sequence range, forks",
		Args:  cobra.ExactArgs(1),
		RunE: e.readWith(func(cmd *cobra.Command, b backend, args []string) error {
			s, err := b.Summary(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(s)
		}),
	}
}

func traceCmd(e *env) *cobra.Command {
	var from, to int64
	c := &cobra.Command{
		Use:   "trace SESSION",
		Short: "Render a session's steps as text (Action / Decision / Call Program …)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := e.reader(cmd)
			if err != nil {
				return err
			}
			defer b.Close()
			steps, err := b.Steps(cmd.Context(), args[0], from, to)
			if err != nil {
				return fmt.Errorf("session %q: %w", args[0], err)
			}
			fmt.Fprintln(e.stdout, render.Steps(steps))
			return nil
		},
	}
	c.Flags().Int64Var(&from, "from", 0, "first sequence")
	c.Flags().Int64Var(&to, "to", 0, "last sequence")
	return c
}

func retryCmd(e *env) *cobra.Command {
	var from int64
	var destructive bool
	var agent string
	c := &cobra.Command{
		Use:   "retry SESSION --from K",
		Short: "Regenerate from step K: fork at K-1 and run again (or --destructive: delete steps >= K)",
		Args:  cobra.ExactArgs(1),
		RunE: e.runWith(&agent, func(cmd *cobra.Command, b backend, args []string) error {
			r, err := b.Retry(cmd.Context(), stepwise.RetryParams{SessionID: args[0], From: from, Destructive: destructive, Agent: b.AgentName(agent)})
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "session %s  run %s\n", r.SessionID, r.ID)
			return e.drive(cmd.Context(), b, r.ID, false)
		}),
	}
	c.Flags().Int64Var(&from, "from", 0, "first step to regenerate")
	c.Flags().BoolVar(&destructive, "destructive", false, "delete steps >= K in place instead of forking")
	c.Flags().StringVar(&agent, "agent", "", "agent file or name (default: the session's agent)")
	return c
}

func replayCmd(e *env) *cobra.Command {
	var live []string
	var allLive bool
	var agent string
	c := &cobra.Command{
		Use:   "replay SESSION",
		Short: "Re-run a session into a fork, reusing recorded model and tool outputs until they diverge",
		Args:  cobra.ExactArgs(1),
		RunE: e.runWith(&agent, func(cmd *cobra.Command, b backend, args []string) error {
			p := stepwise.ReplayParams{SessionID: args[0], Agent: b.AgentName(agent), LiveTools: live, AllToolsLive: allLive}
			var r *stepwise.Run
			var err error
			if l, ok := b.(local); ok {
				r, err = l.eng.ReplayAll(cmd.Context(), p) // every turn, here
			} else if r, err = b.Replay(cmd.Context(), p); err == nil {
				fmt.Fprintf(e.stdout, "replaying into session %s (run %s)\n", r.SessionID, r.ID)
				r, err = e.followReplay(cmd.Context(), b.(remote), p.SessionID, r)
			}
			if err != nil {
				return err
			}
			steps, err := b.Steps(cmd.Context(), r.SessionID, 0, 0)
			if err != nil {
				return err
			}
			reused, liveN := 0, 0
			for _, s := range steps {
				switch s.Replay {
				case "reused":
					reused++
				case "live":
					liveN++
				}
			}
			fmt.Fprintf(e.stdout, "replayed into session %s: run %s %s; %d steps reused, %d live\n", r.SessionID, r.ID, r.Status, reused, liveN)
			return nil
		}),
	}
	c.Flags().StringSliceVar(&live, "live-tool", nil, "tool that must run live (repeatable)")
	c.Flags().BoolVar(&allLive, "all-tools-live", false, "run every tool live")
	c.Flags().StringVar(&agent, "agent", "", "agent file or name (default: the session's agent)")
	return c
}

func cancelCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel RUN",
		Short: "Cancel a run that has not finished",
		Args:  cobra.ExactArgs(1),
		RunE: e.runWith(nil, func(cmd *cobra.Command, b backend, args []string) error {
			r, err := b.Cancel(cmd.Context(), args[0], "cancelled from the command line")
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "run %s %s\n", r.ID, r.Status)
			return nil
		}),
	}
}

// followReplay follows the runs of a replay on a server, one per user turn
// of the source session (the server queues the next when one completes),
// and returns the last.
func (e *env) followReplay(ctx context.Context, b remote, source string, r *stepwise.Run) (*stepwise.Run, error) {
	steps, err := b.Steps(ctx, source, 0, 0)
	if err != nil {
		return nil, err
	}
	turns := 0
	for _, s := range steps {
		if s.Kind == steptype.KindUser && s.Hop == 0 {
			turns++
		}
	}
	followed := map[string]bool{}
	for {
		followed[r.ID] = true
		if err := consume(b.Follow(ctx, r.ID), newPrinter(e.stdout, false, false)); err != nil {
			return nil, err
		}
		if r, err = b.Run(ctx, r.ID); err != nil {
			return nil, err
		}
		if r.Status != steptype.RunCompleted || len(followed) >= turns {
			return r, nil
		}
		next, err := nextTurn(ctx, b, r.SessionID, followed)
		if err != nil || next == nil {
			return r, err
		}
		r = next
	}
}

// nextTurn waits for the next top-level run of a replay session: one not
// followed yet. The server queues it as the previous one ends; nil after
// replayTurnWait without one.
func nextTurn(ctx context.Context, b remote, sessionID string, followed map[string]bool) (*stepwise.Run, error) {
	deadline := time.Now().Add(replayTurnWait)
	for {
		runs, err := b.c.SessionRuns(ctx, sessionID)
		if err != nil {
			return nil, err
		}
		for i := len(runs) - 1; i >= 0; i-- { // oldest first
			if runs[i].Hop == 0 && !followed[runs[i].ID] {
				return runs[i], nil
			}
		}
		if time.Now().After(deadline) {
			return nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond): // polling the server: no event names the queued run
		}
	}
}

// replayTurnWait bounds the wait for the server to queue a replay's next
// turn.
const replayTurnWait = 30 * time.Second

// forkPlace is where a fork branches off its parent, for display: "5
// (edited)" for a fork whose first own step is an edited copy of the
// parent's step 5 (it shares 1..4), else the fork sequence.
func forkPlace(ctx context.Context, b backend, s *stepwise.Session) string {
	next := s.ForkSequence + 1
	if s.LastSequence >= next {
		steps, err := b.Steps(ctx, s.ID, next, next)
		if err == nil && len(steps) == 1 && steps[0].Metadata["edited_from"] != nil {
			return fmt.Sprintf("%d (edited)", next)
		}
	}
	return fmt.Sprint(s.ForkSequence)
}
