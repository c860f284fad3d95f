// Package sessionsum computes the totals of a session's summary: steps by
// kind and role, runs by status, tokens, cost and span, from the store's
// per-session totals, or from a scan of the steps when they do not account
// for the session's own steps.
package sessionsum

import (
	"context"
	"fmt"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
)

// Totals fills the step and run totals of a summary. The store's
// per-session totals (store.SessionStatsReader) answer for the session's
// own steps and runs in a few rows, and only the steps a fork inherits are
// read; when the totals do not account for exactly the session's own
// steps (a fork's copies being imported), every step is read.
func Totals(ctx context.Context, db store.Store, s *steptype.Session, sum *wire.Summary) error {
	done, err := fromStats(ctx, db, s, sum)
	if err != nil || done {
		return err
	}
	*sum = wire.Summary{SessionID: sum.SessionID, ByKind: map[steptype.Kind]int{}, ByRole: map[steptype.Role]int{}, Runs: map[steptype.RunStatus]int{},
		ParentID: sum.ParentID, ForkSequence: sum.ForkSequence}
	return byScan(ctx, db, s, sum)
}

// fromStats fills sum from the store's totals; done is false when
// they cannot be used.
func fromStats(ctx context.Context, db store.Store, s *steptype.Session, sum *wire.Summary) (done bool, err error) {
	stats, err := db.SessionStats(ctx, &store.SessionStatsParams{ID: s.ID})
	if err != nil {
		return false, fmt.Errorf("session %q totals: %w", s.ID, err)
	}
	var own int64
	for _, st := range stats.Steps {
		own += st.Steps
		sum.ByKind[st.Kind] += int(st.Steps)
		if st.Role != "" {
			sum.ByRole[st.Role] += int(st.Steps)
		}
		if st.Kind == steptype.KindError {
			sum.Errors += int(st.Steps)
		}
		sum.InputTokens += st.InputTokens
		sum.OutputTokens += st.OutputTokens
		sum.CachedTokens += st.CachedTokens
		sum.Cost += st.Cost
	}
	if own != s.LastSequence-s.ForkSequence {
		return false, nil
	}
	sum.TotalSteps = own
	if s.ForkSequence > 0 {
		// The inherited steps: read, without their content.
		inherited, err := db.StepOutline(ctx, &store.StepListParams{SessionID: s.ID, StartSeq: 1, EndSeq: s.ForkSequence})
		if err != nil {
			return false, err
		}
		addSteps(sum, inherited)
	}
	for st, n := range stats.Runs {
		sum.Runs[st] += n
	}
	if s.LastSequence == 0 {
		return true, nil
	}
	first, err := db.StepGet(ctx, &store.StepGetParams{SessionID: s.ID, Sequence: 1})
	if err != nil {
		return false, err
	}
	last, err := db.StepLast(ctx, &store.StepLastParams{SessionID: s.ID})
	if err != nil {
		return false, err
	}
	sum.SequenceRange = [2]int64{first.Sequence, last.Sequence}
	sum.DurationMS = stepSpan(first, last)
	return true, nil
}

// byScan fills sum from every step and run of the session.
func byScan(ctx context.Context, db store.Store, s *steptype.Session, sum *wire.Summary) error {
	steps, err := db.StepList(ctx, &store.StepListParams{SessionID: s.ID})
	if err != nil {
		return err
	}
	addSteps(sum, steps)
	if len(steps) > 0 {
		sum.SequenceRange = [2]int64{steps[0].Sequence, steps[len(steps)-1].Sequence}
		sum.DurationMS = stepSpan(steps[0], steps[len(steps)-1])
	}
	runs, err := db.RunList(ctx, &store.RunListParams{SessionID: s.ID})
	if err != nil {
		return err
	}
	for _, r := range runs {
		sum.Runs[r.Status]++
	}
	return nil
}

// addSteps adds steps to the counts and totals of sum.
func addSteps(sum *wire.Summary, steps []*steptype.Step) {
	for _, st := range steps {
		sum.TotalSteps++
		sum.ByKind[st.Kind]++
		if st.Role != "" {
			sum.ByRole[st.Role]++
		}
		if st.Kind == steptype.KindError {
			sum.Errors++
		}
		m := st.Metrics
		sum.InputTokens += m.InputTokens
		sum.OutputTokens += m.OutputTokens
		sum.CachedTokens += m.CachedTokens
		sum.Cost += m.Cost
	}
}

// stepSpan is the time from the start of first to the commit of last, in
// milliseconds.
func stepSpan(first, last *steptype.Step) int64 {
	from := first.CreatedAt
	if !first.Metrics.StartedAt.IsZero() {
		from = first.Metrics.StartedAt
	}
	return last.CreatedAt.Sub(from).Milliseconds()
}
