package cli

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/store"
)

func init() { register(sessionsCmd); register(stepsCmd) }

func sessionsCmd(e *env) *cobra.Command {
	var agent, query, cursor string
	var limit int
	var jsonOut bool
	c := &cobra.Command{
		Use:   "sessions",
		Short: "List sessions, most recent activity first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := openStore(cmd.Context(), e.db, true)
			if err != nil {
				return err
			}
			defer st.Close()
			page, err := st.SessionList(cmd.Context(), &store.SessionListParams{Agent: agent, Query: query, Cursor: cursor, Limit: limit})
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
					fork = fmt.Sprintf(" (fork of %s@%d)", s.ParentSessionID, s.ForkSequence)
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
	c.Flags().StringVar(&agent, "agent", "", "only sessions of this agent")
	c.Flags().StringVar(&query, "q", "", "search id, title or agent")
	c.Flags().StringVar(&cursor, "cursor", "", "page cursor")
	c.Flags().IntVar(&limit, "limit", 50, "page size")
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
			st, err := openStore(cmd.Context(), e.db, true)
			if err != nil {
				return err
			}
			defer st.Close()
			if _, err := st.SessionGet(cmd.Context(), &store.SessionGetParams{ID: args[0]}); err != nil {
				return fmt.Errorf("session %q: %w", args[0], err)
			}
			steps, err := st.StepList(cmd.Context(), &store.StepListParams{SessionID: args[0], StartSeq: from, EndSeq: to})
			if err != nil {
				return err
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
	}
	return nil
}
