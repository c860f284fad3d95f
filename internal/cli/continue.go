package cli

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stepwise-run/stepwise"
)

func init() { register(continueCmd) }

// continueCmd answers a breakpoint's pause (docs/breakpoints.md) and runs
// on to the next one.
func continueCmd(e *env) *cobra.Command {
	var agent, state string
	var step, jsonOut bool
	c := &cobra.Command{
		Use:   "continue SESSION|RUN [--step] [--state JSON]",
		Short: "Go on from a breakpoint: continue, step once, or edit the state first",
		Long: `Answer the breakpoint a run paused at (stepwise run --break-before/--break-after,
or the breakpoints of its agent file) and execute the run to its next pause or
its end. --step pauses again before the next step; --state merges a JSON object
into the run's state (RFC 7386) before the run goes on.`,
		Args: cobra.ExactArgs(1),
		RunE: e.runWith(&agent, func(cmd *cobra.Command, b backend, args []string) error {
			ans := stepwise.BreakpointAnswer{Action: stepwise.BreakContinue}
			if step {
				ans.Action = stepwise.BreakStep
			}
			if state != "" {
				if t := strings.TrimSpace(state); !json.Valid([]byte(t)) || !strings.HasPrefix(t, "{") {
					return usagef("--state must be a JSON object, such as '{\"n\": 5}'")
				}
				ans.State = json.RawMessage(state)
			}
			pend, err := b.Pending(cmd.Context(), "")
			if err != nil {
				return err
			}
			var pause *stepwise.PendingInput
			for _, p := range pend {
				if p.Request.Breakpoint != nil && (p.SessionID == args[0] || p.RunID == args[0]) {
					pause = p
				}
			}
			if pause == nil {
				return &exitError{code: ExitFailure, err: fmt.Errorf("%s is not paused at a breakpoint (stepwise inputs lists what is pending)", args[0])}
			}
			raw, _ := json.Marshal(ans)
			s, err := b.Answer(cmd.Context(), pause.RunID, pause.RequestID, raw)
			if err != nil {
				return err
			}
			bp := pause.Request.Breakpoint
			if !jsonOut {
				fmt.Fprintf(e.stdout, "%s at the breakpoint %s step %q: %s\n", ans.Action, bp.When, bp.Step, clip(s.Content, 80))
			}
			if rest, err := b.Pending(cmd.Context(), pause.RunID); err != nil || len(rest) > 0 {
				return err
			}
			return e.drive(cmd.Context(), b, pause.RunID, jsonOut)
		}),
	}
	c.Flags().BoolVar(&step, "step", false, "pause again before the next step")
	c.Flags().StringVar(&state, "state", "", "a JSON object merged into the run's state before it goes on")
	c.Flags().StringVar(&agent, "agent", "", "agent file of the run, to execute it (built-in agents need none)")
	c.Flags().BoolVar(&jsonOut, "json", false, "print committed steps as JSON lines")
	return c
}

// breakpointsOf returns the breakpoints of the --break-before and
// --break-after flags, or nil.
func breakpointsOf(before, after []string) *stepwise.Breakpoints {
	if len(before)+len(after) == 0 {
		return nil
	}
	return &stepwise.Breakpoints{Before: before, After: after}
}
