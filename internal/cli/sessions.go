package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/client"
)

func init() { register(sessionsCmd); register(stepsCmd) }

func sessionsCmd(e *env) *cobra.Command {
	var q client.SessionQuery
	var jsonOut bool
	c := &cobra.Command{
		Use:   "sessions",
		Short: "List sessions, most recent activity first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := e.reader(cmd)
			if err != nil {
				return err
			}
			defer b.Close()
			page, err := b.Sessions(cmd.Context(), q)
			if err != nil {
				return err
			}
			if jsonOut {
				return json.NewEncoder(e.stdout).Encode(page)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SESSION\tAGENT\tSTEPS\tTOKENS\tCOST\tUPDATED\tTITLE")
			for _, s := range page.Sessions {
				fork := ""
				if s.ParentSessionID != "" {
					fork = fmt.Sprintf(" (fork of %s@%s)", s.ParentSessionID, forkPlace(cmd.Context(), b, s))
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t$%.6f\t%s\t%s%s\n", s.ID, s.Agent, s.LastSequence, s.InputTokens+s.OutputTokens, s.Cost, s.UpdatedAt.Local().Format(time.DateTime), s.Title, fork)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if page.Next != "" {
				fmt.Fprintf(e.stdout, "more: stepwise sessions --cursor %s\n", page.Next)
			}
			return nil
		},
	}
	c.Flags().StringVar(&q.Agent, "agent", "", "only sessions of this agent")
	c.Flags().StringVar(&q.Query, "q", "", "search id, title or agent")
	c.Flags().StringVar(&q.Cursor, "cursor", "", "page cursor")
	c.Flags().IntVar(&q.Limit, "limit", 50, "page size")
	c.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return c
}

func stepsCmd(e *env) *cobra.Command {
	var from, to int64
	var jsonOut bool
	c := &cobra.Command{
		Use:   "steps SESSION [--from N] [--to M]",
		Short: "Print the steps of a session",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if from < 0 || to < 0 || (to > 0 && from > to) {
				return usagef("invalid range --from %d --to %d", from, to)
			}
			b, err := e.reader(cmd)
			if err != nil {
				return err
			}
			defer b.Close()
			steps, err := b.Steps(cmd.Context(), args[0], from, to)
			if err != nil {
				return fmt.Errorf("session %q: %w", args[0], err)
			}
			return printSteps(e, steps, jsonOut)
		},
	}
	c.Flags().Int64Var(&from, "from", 0, "first sequence")
	c.Flags().Int64Var(&to, "to", 0, "last sequence")
	c.Flags().BoolVar(&jsonOut, "json", false, "print the steps as JSON lines (wire format v1)")
	return c
}

func printSteps(e *env, steps []*stepwise.Step, jsonOut bool) error {
	for _, s := range steps {
		if jsonOut {
			b, err := json.Marshal(s)
			if err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, string(b))
			continue
		}
		fmt.Fprintln(e.stdout, stepLine(s))
		if line := summaryLine(s); line != "" {
			fmt.Fprintln(e.stdout, line)
		}
	}
	return nil
}

// summaryLine is the model-written summaries of a step's state, goal and
// action (observe.summaries), indented under its line; "" without any.
func summaryLine(s *stepwise.Step) string {
	a := s.Annotations
	var parts []string
	for _, f := range [][2]string{{"state", a.StateSummary}, {"goal", a.GoalSummary}, {"action", a.ActionSummary}} {
		if f[1] != "" {
			parts = append(parts, f[0]+": "+f[1])
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Repeat("  ", s.Hop) + "      ↳ " + strings.Join(parts, " · ")
}

// reader opens a backend for read-only commands: the server, or the
// database read-only (so it works while another process writes it).
func (e *env) reader(cmd *cobra.Command) (backend, error) {
	if e.server != "" {
		return e.backend(cmd.Context(), "")
	}
	st, err := openStore(cmd.Context(), e.db, true)
	if err != nil {
		return nil, err
	}
	eng, err := stepwise.New(stepwise.Config{Store: st})
	if err != nil {
		st.Close()
		return nil, err
	}
	return local{&runtime{eng: eng, st: st}}, nil
}
