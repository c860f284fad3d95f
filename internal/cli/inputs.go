package cli

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func init() { register(inputsCmd); register(inputCmd) }

func inputsCmd(e *env) *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:   "inputs [RUN]",
		Short: "List pending human-input requests and approvals",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := e.reader(cmd)
			if err != nil {
				return err
			}
			defer b.Close()
			run := ""
			if len(args) == 1 {
				run = args[0]
			}
			pend, err := b.Pending(cmd.Context(), run)
			if err != nil {
				return err
			}
			if jsonOut {
				return json.NewEncoder(e.stdout).Encode(pend)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "RUN\tREQUEST\tKIND\tPROMPT")
			for _, p := range pend {
				kind := "input"
				if p.Request.Approval != nil {
					kind = "approval"
				} else if p.Request.Breakpoint != nil {
					kind = "breakpoint"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.RunID, p.RequestID, kind, clip(p.Request.Prompt, 80))
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return c
}

func inputCmd(e *env) *cobra.Command {
	var resume bool
	var agent string
	c := &cobra.Command{
		Use:   "input RUN REQUEST_ID ANSWER",
		Short: "Answer a pending request (text, JSON, or an approval like '{\"approved\":true}')",
		Args:  cobra.ExactArgs(3),
		RunE: e.runWith(&agent, func(cmd *cobra.Command, b backend, args []string) error {
			s, err := b.Answer(cmd.Context(), args[0], args[1], textOrJSON(args[2], false))
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "answered %s: %s\n", s.ID, clip(s.Content, 80))
			if !resume {
				if e.server == "" {
					fmt.Fprintf(e.stdout, "resume with: stepwise resume %s%s\n", args[0], e.agentHint)
				}
				return nil
			}
			pend, err := b.Pending(cmd.Context(), args[0])
			if err != nil || len(pend) > 0 {
				return err
			}
			return e.drive(cmd.Context(), b, args[0], false)
		}),
	}
	c.Flags().BoolVar(&resume, "resume", false, "resume (or, with --server, follow) the run here once nothing is pending")
	c.Flags().StringVar(&agent, "agent", "", "agent file of the run, to resume it (built-in agents need none)")
	return c
}
