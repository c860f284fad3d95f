package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// longSession stores one session of at least n steps starting at at. The
// session row carries its totals and last sequence, so the turns are made
// twice from the same random state: once to sum them, once to import
// them in chunks of longChunk steps (memory stays flat whatever n is).
func (f *filler) longSession(ctx context.Context, n int, at time.Time) error {
	sess := &steptype.Session{ID: f.id(at), Agent: AgentName(0), Title: LongSessionTitle, CreatedAt: at, Metadata: []byte(`{"env":"prod"}`)}
	saved := *f.src
	ts := &turnState{t: at}
	for ts.seq < int64(n) {
		_, steps := f.turn(sess, ts, false)
		for _, s := range steps {
			sess.InputTokens += s.Metrics.InputTokens
			sess.OutputTokens += s.Metrics.OutputTokens
			sess.Cost += s.Metrics.Cost
		}
	}
	sess.LastSequence, sess.UpdatedAt = ts.seq, ts.t
	*f.src = saved
	if err := f.st.SessionImport(ctx, &store.SessionImportParams{Session: sess}); err != nil {
		return fmt.Errorf("long session: %w", err)
	}
	ts = &turnState{t: at}
	var runs []*steptype.Run
	var steps []*steptype.Step
	flush := func() error {
		if len(steps) == 0 {
			return nil
		}
		if err := f.st.RunImport(ctx, &store.RunImportParams{Runs: runs}); err != nil {
			return fmt.Errorf("long session runs: %w", err)
		}
		if err := f.st.StepImport(ctx, &store.StepImportParams{Steps: steps}); err != nil {
			return fmt.Errorf("long session steps: %w", err)
		}
		f.res.Runs += len(runs)
		f.res.Steps += len(steps)
		runs, steps = runs[:0], steps[:0]
		if f.c.Progress != nil {
			f.c.Progress(f.res.Steps)
		}
		return ctx.Err()
	}
	for ts.seq < sess.LastSequence {
		run, rs := f.turn(sess, ts, false)
		if run.Status == steptype.RunFailed {
			f.res.Failed++
		}
		runs, steps = append(runs, run), append(steps, rs...)
		if len(steps) >= longChunk {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if ts.seq != sess.LastSequence || ts.t != sess.UpdatedAt {
		return fmt.Errorf("stepwise: bench fill: long session replay diverged at %d", ts.seq)
	}
	f.res.Sessions++
	f.res.LongSessionID = sess.ID
	return nil
}

// CPUTime is the process's user+system CPU time so far (zero where it is
// not measured): bench queries reports it per call beside wall time.
func CPUTime() time.Duration { return cpuTime() }
