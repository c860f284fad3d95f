package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
)

func init() { register(runCmd); register(resumeCmd) }

func runCmd(e *env) *cobra.Command {
	var agent, input, session string
	var meta map[string]string
	var breakBefore, breakAfter []string
	var jsonOut, events bool
	c := &cobra.Command{
		Use:   "run --agent FILE|NAME --input TEXT [--session ID] [--meta KEY=VALUE…]",
		Short: "Run an agent turn, streaming its steps",
		Long: `Run one turn of an agent and stream its steps as they commit. --agent is an
agent file (YAML/JSON) or the name of a built-in agent ("analyst"). With
--session the turn continues an existing session (multi-turn). In a terminal,
pending human input and approvals are asked for interactively; otherwise the
command exits with status 3 and prints how to answer.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if agent == "" {
				return usagef("--agent is required")
			}
			e.events = events
			b, err := e.backend(cmd.Context(), agent)
			if err != nil {
				return err
			}
			defer b.Close()
			name := b.AgentName(agent)
			sp := stepwise.StartParams{Agent: name, Input: input, SessionID: session, Breakpoints: breakpointsOf(breakBefore, breakAfter)}
			if len(meta) > 0 {
				if session != "" {
					return usagef("--meta sets the metadata of a new session; it cannot be used with --session")
				}
				sp.Metadata = map[string]any{}
				for k, v := range meta {
					sp.Metadata[k] = v
				}
			}
			r, err := b.StartRun(cmd.Context(), sp)
			if err != nil {
				return err
			}
			if !jsonOut {
				fmt.Fprintf(e.stdout, "session %s  run %s  agent %s\n", r.SessionID, r.ID, name)
			}
			return e.drive(cmd.Context(), b, r.ID, jsonOut)
		},
	}
	c.Flags().StringVar(&agent, "agent", "", "agent file or built-in agent name")
	c.Flags().StringVar(&input, "input", "", "the user message")
	c.Flags().StringVar(&session, "session", "", "continue this session")
	c.Flags().BoolVar(&events, "events", false, "record the events inside steps (provider requests and responses, tool invocations; secrets redacted) of agents whose file does not set observe.events")
	c.Flags().StringToStringVar(&meta, "meta", nil, "metadata of the new session, KEY=VALUE (repeatable); stepwise metrics --split KEY groups by it")
	c.Flags().BoolVar(&jsonOut, "json", false, "print committed steps as JSON lines")
	c.Flags().StringSliceVar(&breakBefore, "break-before", nil, "pause before these steps: a step name, kind (llm, tool, custom), tool name or * (repeatable, comma-separated); go on with stepwise continue")
	c.Flags().StringSliceVar(&breakAfter, "break-after", nil, "pause after these steps (as --break-before)")
	return c
}

func resumeCmd(e *env) *cobra.Command {
	var agent string
	var jsonOut bool
	c := &cobra.Command{
		Use:   "resume RUN",
		Short: "Resume an interrupted run from its last committed step",
		Args:  cobra.ExactArgs(1),
		RunE: e.runWith(&agent, func(cmd *cobra.Command, b backend, args []string) error {
			return e.drive(cmd.Context(), b, args[0], jsonOut)
		}),
	}
	c.Flags().StringVar(&agent, "agent", "", "agent file of the run (built-in agents need none)")
	c.Flags().BoolVar(&jsonOut, "json", false, "print committed steps as JSON lines")
	return c
}

// drive executes a run to its end, answering input interactively when
// possible, and maps the final status to an exit code.
func (e *env) drive(ctx context.Context, b backend, runID string, jsonOut bool) error {
	p := newPrinter(e.stdout, e.interactive && !jsonOut, jsonOut)
	var in *bufio.Reader
	for {
		if err := consume(b.Follow(ctx, runID), p); err != nil {
			return err
		}
		r, err := b.Run(ctx, runID)
		if err != nil {
			return err
		}
		switch r.Status {
		case steptype.RunCompleted:
			return nil
		case steptype.RunWaiting:
			pend, err := b.Pending(ctx, runID)
			if err != nil {
				return err
			}
			if !e.interactive {
				// A hint for a person; with --json stdout holds only JSON
				// lines, so the hint goes to stderr.
				hint := e.stdout
				if jsonOut {
					hint = e.stderr
				}
				for _, pi := range pend {
					if bp := pi.Request.Breakpoint; bp != nil {
						fmt.Fprintf(hint, "paused %s step %q (breakpoint %q), request %s\n  go on with: stepwise continue %s [--step] [--state JSON]%s\n", bp.When, bp.Step, bp.Matched, pi.RequestID, pi.SessionID, e.agentHint)
						continue
					}
					fmt.Fprintf(hint, "pending request %s: %s\n  answer with: stepwise input %s %s 'ANSWER' --resume%s\n", pi.RequestID, pi.Request.Prompt, runID, pi.RequestID, e.agentHint)
				}
				return &exitError{code: ExitWaiting}
			}
			if in == nil {
				in = bufio.NewReader(e.stdin)
			}
			for _, pi := range pend {
				if err := e.prompt(ctx, b, in, pi); err != nil {
					return err
				}
			}
		default:
			msg := "run " + string(r.Status)
			if r.Error != nil {
				msg += ": " + r.Error.Message
			}
			return &exitError{code: ExitFailure, err: fmt.Errorf("%s", msg)}
		}
	}
}

func consume(seq iter.Seq2[*stepwise.Event, error], p *printer) error {
	for ev, err := range seq {
		if err != nil {
			return err
		}
		p.event(ev)
	}
	return nil
}

// prompt asks the terminal user to answer one request, until an answer is
// accepted.
func (e *env) prompt(ctx context.Context, b backend, in *bufio.Reader, pi *stepwise.PendingInput) error {
	for {
		var answer json.RawMessage
		if a := pi.Request.Approval; a != nil {
			fmt.Fprintf(e.stdout, "? approve %s(%s)  [y]es / [n]o / [a]lways: ", a.Name, string(a.Arguments))
			line, err := in.ReadString('\n')
			if err != nil {
				return fmt.Errorf("read answer: %w", err)
			}
			switch strings.ToLower(strings.TrimSpace(line)) {
			case "y", "yes":
				answer = json.RawMessage(`{"approved":true}`)
			case "a", "always":
				answer = json.RawMessage(`{"approved":true,"always":true}`)
			case "n", "no":
				fmt.Fprint(e.stdout, "  reason (optional): ")
				reason, _ := in.ReadString('\n')
				answer, _ = json.Marshal(stepwise.ApprovalAnswer{Approved: false, Message: strings.TrimSpace(reason)})
			default:
				fmt.Fprintln(e.stdout, "  please answer y, n or a")
				continue
			}
		} else if pi.Request.Breakpoint != nil {
			fmt.Fprintf(e.stdout, "? %s\n  [c]ontinue / [s]tep / a JSON object to merge into the state: ", pi.Request.Prompt)
			line, err := in.ReadString('\n')
			if err != nil {
				return fmt.Errorf("read answer: %w", err)
			}
			switch l := strings.TrimSpace(line); strings.ToLower(l) {
			case "", "c", "continue":
				answer = json.RawMessage(`"continue"`)
			case "s", "step":
				answer = json.RawMessage(`"step"`)
			default:
				answer, _ = json.Marshal(stepwise.BreakpointAnswer{Action: stepwise.BreakContinue, State: json.RawMessage(l)})
			}
		} else {
			fmt.Fprintf(e.stdout, "? %s\n> ", pi.Request.Prompt)
			line, err := in.ReadString('\n')
			if err != nil {
				return fmt.Errorf("read answer: %w", err)
			}
			answer = textOrJSON(strings.TrimSpace(line), len(pi.Request.Schema) > 0)
		}
		_, err := b.Answer(ctx, pi.RunID, pi.RequestID, answer)
		if err == nil {
			return nil
		}
		fmt.Fprintf(e.stdout, "  %v\n", err)
	}
}

// textOrJSON reads an answer: JSON when the request has a schema (or the
// text is valid JSON), else a JSON string.
func textOrJSON(s string, preferJSON bool) json.RawMessage {
	if json.Valid([]byte(s)) && (preferJSON || strings.HasPrefix(s, "{") || strings.HasPrefix(s, "[") || strings.HasPrefix(s, `"`)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

func looksLikeFile(s string) bool {
	return strings.ContainsAny(s, "/\\") || strings.HasSuffix(s, ".yaml") || strings.HasSuffix(s, ".yml") || strings.HasSuffix(s, ".json")
}
