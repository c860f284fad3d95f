package stepwise

import (
	"context"
	"fmt"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// summaryTotals fills the step and run totals of a summary. A store that
// keeps per-session totals (store.SessionStatsReader) answers for the
// session's own steps and runs in a few rows, and only the steps a fork
// inherits are read; otherwise, or when the totals do not account for
// exactly the session's own steps (a fork's copies being imported), every
// step is read.
func (e *Engine) summaryTotals(ctx context.Context, s *Session, sum *Summary) error {
	if sr, ok := e.store.(store.SessionStatsReader); ok {
		done, err := e.summaryFromStats(ctx, sr, s, sum)
		if err != nil || done {
			return err
		}
		*sum = Summary{SessionID: sum.SessionID, ByKind: map[steptype.Kind]int{}, ByRole: map[steptype.Role]int{}, Runs: map[steptype.RunStatus]int{},
			ParentID: sum.ParentID, ForkSequence: sum.ForkSequence}
	}
	return e.summaryByScan(ctx, s, sum)
}

// summaryFromStats fills sum from the store's totals; done is false when
// they cannot be used.
func (e *Engine) summaryFromStats(ctx context.Context, sr store.SessionStatsReader, s *Session, sum *Summary) (done bool, err error) {
	stats, err := sr.SessionStats(ctx, &store.SessionStatsParams{ID: s.ID})
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
		list := e.store.StepList
		if o, ok := e.store.(store.StepOutliner); ok {
			list = o.StepOutline
		}
		inherited, err := list(ctx, &store.StepListParams{SessionID: s.ID, StartSeq: 1, EndSeq: s.ForkSequence})
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
	first, err := e.store.StepGet(ctx, &store.StepGetParams{SessionID: s.ID, Sequence: 1})
	if err != nil {
		return false, err
	}
	last, err := e.store.StepLast(ctx, &store.StepLastParams{SessionID: s.ID})
	if err != nil {
		return false, err
	}
	sum.SequenceRange = [2]int64{first.Sequence, last.Sequence}
	sum.DurationMS = stepSpan(first, last)
	return true, nil
}

// summaryByScan fills sum from every step and run of the session.
func (e *Engine) summaryByScan(ctx context.Context, s *Session, sum *Summary) error {
	steps, err := e.store.StepList(ctx, &store.StepListParams{SessionID: s.ID})
	if err != nil {
		return err
	}
	addSteps(sum, steps)
	if len(steps) > 0 {
		sum.SequenceRange = [2]int64{steps[0].Sequence, steps[len(steps)-1].Sequence}
		sum.DurationMS = stepSpan(steps[0], steps[len(steps)-1])
	}
	runs, err := e.store.RunList(ctx, &store.RunListParams{SessionID: s.ID})
	if err != nil {
		return err
	}
	for _, r := range runs {
		sum.Runs[r.Status]++
	}
	return nil
}

// addSteps adds steps to the counts and totals of sum.
func addSteps(sum *Summary, steps []*Step) {
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
func stepSpan(first, last *Step) int64 {
	from := first.CreatedAt
	if !first.Metrics.StartedAt.IsZero() {
		from = first.Metrics.StartedAt
	}
	return last.CreatedAt.Sub(from).Milliseconds()
}
