package cli

import (
	"context"
	"fmt"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/internal/demo"
	"github.com/stepwise-run/stepwise/steptype"
)

// serveDemo adds the rest of the demo data — a fork of the finished
// session and a run waiting for a tool approval — and serves the dashboard
// until interrupted.
func (e *env) serveDemo(ctx context.Context, rt *runtime, sessionID, addr string) error {
	eng := rt.eng
	edit := "What is the combined population of Madrid and Rome?"
	fork, err := eng.Fork(ctx, stepwise.ForkParams{SessionID: sessionID, At: 1, Edit: &edit, Title: "demo: edited question (fork)"})
	if err != nil {
		return fmt.Errorf("demo fork: %w", err)
	}
	fork2, err := eng.Fork(ctx, stepwise.ForkParams{SessionID: sessionID, At: 9, Title: "demo: fork after the sum"})
	if err != nil {
		return fmt.Errorf("demo fork: %w", err)
	}
	r, err := eng.StartRun(ctx, stepwise.StartParams{Agent: "operator", Input: demo.OperatorInput, Title: "demo: waiting for approval"})
	if err != nil {
		return err
	}
	run, err := eng.Wait(ctx, eng.Execute(ctx, r.ID))
	if err != nil {
		return err
	}
	if run.Status != steptype.RunWaiting {
		return fmt.Errorf("demo: operator run is %s, want waiting", run.Status)
	}
	fmt.Fprintf(e.stdout, "\nDemo data: finished session %s, forks %s and %s, run %s waiting for approval.\n", sessionID, fork.ID, fork2.ID, r.ID)
	fmt.Fprintf(e.stdout, "Open http://%s/ — press Ctrl-C to stop.\n", addr)
	return e.listen(ctx, rt, addr, nil)
}
