package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// streamWait bounds, in simulated time, how long streams may take to end
// once every run completed.
const streamWait = time.Minute

// check verifies the invariants once every run completed.
func (w *world) check(ctx context.Context) error {
	ids := map[string]bool{}
	for i, sid := range w.sessions {
		steps, err := w.inner.StepList(ctx, &store.StepListParams{SessionID: sid})
		if err != nil {
			return fmt.Errorf("steps of session %d: %w", i, err)
		}
		sess, err := w.inner.SessionGet(ctx, &store.SessionGetParams{ID: sid})
		if err != nil {
			return fmt.Errorf("session %d: %w", i, err)
		}
		results := map[string]int{}
		for k, s := range steps {
			if s.Sequence != int64(k+1) {
				return fmt.Errorf("session %d: step %d has sequence %d: a gap or a duplicate", i, k+1, s.Sequence)
			}
			if ids[s.ID] {
				return fmt.Errorf("step %s committed twice", s.ID)
			}
			ids[s.ID] = true
			if s.Kind == steptype.KindTool && s.Status == steptype.StepCompleted {
				if results[s.ToolCallID+" "+s.RunID]++; results[s.ToolCallID+" "+s.RunID] > 1 {
					return fmt.Errorf("session %d: tool call %s has two committed results", i, s.ToolCallID)
				}
			}
		}
		if int64(len(steps)) != sess.LastSequence {
			return fmt.Errorf("session %d: %d steps, last sequence %d", i, len(steps), sess.LastSequence)
		}
		if w.cfg.Want != nil {
			got, err := transcript(w.inner, sid)
			if err != nil {
				return err
			}
			if got != w.cfg.Want[i] {
				return fmt.Errorf("session %d: transcript differs from the reference run's:\n%s\nwant:\n%s", i, got, w.cfg.Want[i])
			}
		}
	}
	return w.checkStreams(ctx)
}

// checkStreams waits for every stream to end, then requires that each
// delivered every committed step of its run exactly once, in sequence
// order. An answered request may be delivered again, updated; and, the one
// known duplicate, counted in Result.AnswerRepeats: a stream that read the
// request already answered from the store, then reconnected with that
// step's position to the engine that took the answer, gets the answer's
// event again (a position does not say which version of the step the
// client has).
func (w *world) checkStreams(ctx context.Context) error {
	deadline := time.Now().Add(streamWait)
	for {
		w.mu.Lock()
		open := 0
		for _, rs := range w.streams {
			if !rs.done {
				open++
			}
		}
		w.mu.Unlock()
		if open == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d streams did not end %v after their runs completed", open, streamWait)
		}
		if !sleep(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, rs := range w.streams {
		steps, err := w.inner.StepList(ctx, &store.StepListParams{RunID: rs.runID})
		if err != nil {
			return err
		}
		var want, got []string
		seen := map[string]bool{}
		for _, s := range steps {
			want = append(want, s.ID)
		}
		for _, e := range rs.got {
			if seen[e] {
				if strings.HasSuffix(e, " "+string(steptype.StepCompleted)+" "+string(steptype.KindInput)) {
					w.answerRepeats++
					continue
				}
				return fmt.Errorf("session %d turn %d: the stream delivered %s twice", rs.session, rs.turn, e)
			}
			seen[e] = true
			id, _, _ := strings.Cut(e, " ")
			if len(got) == 0 || got[len(got)-1] != id {
				got = append(got, id) // an update follows its request at once, or not at all
			}
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			return fmt.Errorf("session %d turn %d: the stream delivered %v, the run committed %v", rs.session, rs.turn, got, want)
		}
	}
	return nil
}

// transcript is a session's log without ids or times: what an
// uninterrupted run must equal. The results of parallel calls commit in
// the order the calls finish, which timing decides: a group of
// consecutive tool results is listed by call id.
func transcript(st store.Store, sid string) (string, error) {
	steps, err := st.StepList(context.Background(), &store.StepListParams{SessionID: sid})
	if err != nil {
		return "", err
	}
	var lines []string
	group := 0 // where the current group of tool results starts
	for i, s := range steps {
		var b strings.Builder
		fmt.Fprintf(&b, "%s/%s %s %s", s.Kind, s.Name, s.Role, s.Status)
		for _, c := range s.ToolCalls {
			fmt.Fprintf(&b, " call %s %s%s", c.ID, c.Name, c.Arguments)
		}
		if s.ToolCallID != "" {
			fmt.Fprintf(&b, " for %s %s", s.ToolCallID, s.ToolName)
		}
		fmt.Fprintf(&b, " %q %s", s.Content, s.Outputs)
		lines = append(lines, b.String())
		if s.Kind != steptype.KindTool || i == 0 || steps[i-1].Kind != steptype.KindTool || steps[i-1].RunID != s.RunID {
			group = i
		}
		slices.Sort(lines[group:])
	}
	var b strings.Builder
	for i, l := range lines {
		fmt.Fprintf(&b, "%d %s\n", i+1, l)
	}
	return b.String(), nil
}
