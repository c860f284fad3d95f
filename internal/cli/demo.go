package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/internal/demo"
)

func init() { register(demoCmd) }

func demoCmd(e *env) *cobra.Command {
	var noServe, fast bool
	var addr string
	c := &cobra.Command{
		Use:   "demo",
		Short: "Run the built-in demo agent and open the dashboard",
		Long: `Run the built-in "analyst" demo agent on the scripted model (no network, no
configuration): a custom triage step with a decision, three tool calls in
parallel, a rate-limit error that is retried, a sub-agent and a review step.
Every step is committed to the database (--db, default ./.stepwise/stepwise.db)
as it happens. Then the dashboard is served on --addr until interrupted;
--no-serve exits after the run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			rt, err := e.open(ctx, "")
			if err != nil {
				return err
			}
			defer rt.Close()
			eng := rt.eng
			if fast {
				a, err := demo.Agents(demo.Options{Fast: true})
				if err != nil {
					return err
				}
				op, err := demo.Operator(demo.Options{Fast: true})
				if err != nil {
					return err
				}
				if err := eng.Register(a); err != nil {
					return err
				}
				if err := eng.Register(op); err != nil {
					return err
				}
			}
			fmt.Fprintf(e.stdout, "Stepwise demo — database %s\n", e.db)
			r, err := eng.StartRun(ctx, stepwise.StartParams{Agent: "analyst", Input: demo.Input, Title: "demo: population question"})
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "session %s  run %s\n\n", r.SessionID, r.ID)
			if err := e.drive(ctx, local{rt}, r.ID, false); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "\nInspect it: stepwise steps %s   ·   stepwise trace %s\n", r.SessionID, r.SessionID)
			if noServe {
				return nil
			}
			return e.serveDemo(ctx, rt, r.SessionID, addr)
		},
	}
	c.Flags().BoolVar(&noServe, "no-serve", false, "exit after the run instead of serving the dashboard")
	c.Flags().BoolVar(&fast, "fast", false, "no simulated model latency")
	c.Flags().StringVar(&addr, "addr", "127.0.0.1:7700", "dashboard address")
	return c
}
