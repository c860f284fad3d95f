package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/postgres"
)

// startedRun is a top-level run the workload started, with its stream.
type startedRun struct {
	id, session string
	stream      *streamResult
}

// createSession creates an empty session through a random server.
func createSession(ctx context.Context, p *picker) (string, error) {
	for attempt := 0; attempt < 100; attempt++ {
		s, err := p.await(ctx, 0)
		if err != nil {
			return "", err
		}
		code, body, err := call(ctx, s, "POST", "/v1/sessions", map[string]any{"agent": "chaos", "title": "chaos"})
		if err != nil || code == 503 {
			// The server died (a session it created is left empty), or
			// its database is restarting or paused.
			backoff(ctx, code)
			continue
		}
		var sess struct {
			ID string `json:"id"`
		}
		if code != 201 || json.Unmarshal(body, &sess) != nil {
			return "", fmt.Errorf("create session: %d %s", code, body)
		}
		return sess.ID, nil
	}
	return "", fmt.Errorf("create session: no server answered")
}

// startRun starts a run in the session through a random server. When a
// server dies before it answers, the run may or may not exist: the retry
// finds it among the session's runs (a second start would be refused,
// session_busy, since one run at most is unfinished).
func startRun(ctx context.Context, p *picker, session, input string) (*startedRun, error) {
	for attempt := 0; attempt < 100; attempt++ {
		s, err := p.await(ctx, 0)
		if err != nil {
			return nil, err
		}
		if attempt > 0 {
			code, body, err := call(ctx, s, "GET", "/v1/sessions/"+session+"/runs", nil)
			if err != nil || code == 503 {
				backoff(ctx, code)
				continue
			}
			var rs struct {
				Runs []steptype.Run `json:"runs"`
			}
			if code != 200 || json.Unmarshal(body, &rs) != nil {
				return nil, fmt.Errorf("list runs: %d %s", code, body)
			}
			for _, r := range rs.Runs {
				if r.Input == input && r.ParentRunID == "" {
					return &startedRun{id: r.ID, session: session}, nil
				}
			}
		}
		code, body, err := call(ctx, s, "POST", "/v1/runs", map[string]any{"agent": "chaos", "input": input, "session_id": session})
		if err != nil || code == 503 || code == 409 && attempt > 0 {
			// The server died or its database failed (the start may have
			// committed all the same), or an earlier attempt whose server
			// died while committing created the run after all: look again.
			backoff(ctx, code)
			continue
		}
		var out struct {
			Run steptype.Run `json:"run"`
		}
		if code != 201 || json.Unmarshal(body, &out) != nil {
			return nil, fmt.Errorf("start run: %d %s", code, body)
		}
		return &startedRun{id: out.Run.ID, session: session}, nil
	}
	return nil, fmt.Errorf("start run: no server answered")
}

// backoff waits a little before a retry after a 503 (the database is
// restarting or paused); after a dead server's transport error the retry
// goes at once to another server.
func backoff(ctx context.Context, code int) {
	if code != 503 {
		return
	}
	select {
	case <-time.After(100 * time.Millisecond): // a retry's backoff, not synchronisation
	case <-ctx.Done():
	}
}

// chaosFigures are the measured figures, printed at the end.
type chaosFigures struct {
	seed                            uint64
	kills, inFlight                 int
	chaos, total                    time.Duration
	samples, busy                   int64
	topRuns, childRuns, sessions    int
	steps, toolResults              int
	executions, exactlyOnce, reExec int
	reExecOutage                    int
	reconnects, approvals           int
	streams, streamsFinished        int
	answersNotStreamed              int
	dbRestarts, dbPauses            int
	dbPaused                        time.Duration
}

func (f *chaosFigures) report() map[string]any {
	return map[string]any{
		"seed": f.seed, "kills": f.kills, "kills_while_runs_in_flight": f.inFlight,
		"kill_phase": f.chaos.Round(time.Millisecond).String(), "duration": f.total.Round(time.Millisecond).String(),
		"runs_completed": f.topRuns, "sub_agent_runs_completed": f.childRuns, "sessions": f.sessions, "steps": f.steps,
		"tool_results_committed": f.toolResults, "side_effect_executions": f.executions,
		"executed_exactly_once": f.exactlyOnce, "re_executed_after_a_kill_before_commit (at least once, docs/guarantees.md)": f.reExec,
		"of_which_cut_by_a_database_outage (at least once, docs/guarantees.md)": f.reExecOutage,
		"run_streams": f.streams, "run_streams_ended_with_run_finished": f.streamsFinished, "stream_reconnects": f.reconnects,
		"approvals_answered_on_another_server":                  f.approvals,
		"invariant_samples (sessions with two unfinished runs)": fmt.Sprintf("%d (%d)", f.samples, f.busy),
		"database_restarts":                                     f.dbRestarts, "database_pauses": f.dbPauses, "database_paused": f.dbPaused.Round(time.Millisecond).String(),
	}
}

// checkChaos reads the database after the chaos and checks every promise.
func checkChaos(t *testing.T, ctx context.Context, dsn string, fl *fleet, rec *recorder, started []*startedRun, outages []outage) *chaosFigures {
	t.Helper()
	fig := &chaosFigures{}
	st, err := postgres.Open(ctx, postgres.Config{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())

	// Runs: every one completed; one child run per sub-agent call.
	rows, _ := conn.Query(ctx, `SELECT id, parent_run_id, parent_step_id, status FROM runs`)
	type runRow struct{ id, parent, parentStep, status string }
	runs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (runRow, error) {
		var x runRow
		return x, r.Scan(&x.id, &x.parent, &x.parentStep, &x.status)
	})
	if err != nil {
		t.Fatal(err)
	}
	children := map[string]int{}
	for _, r := range runs {
		if r.status != string(steptype.RunCompleted) {
			t.Errorf("run %s (parent %q) is %s", r.id, r.parent, r.status)
		}
		if r.parent == "" {
			fig.topRuns++
		} else {
			fig.childRuns++
			children[r.parentStep]++
		}
	}
	for step, n := range children {
		if n != 1 {
			t.Errorf("sub-agent call %s has %d child runs", step, n)
		}
	}
	if fig.topRuns != len(started) {
		t.Errorf("%d top-level runs in the database, %d started", fig.topRuns, len(started))
	}

	// Sessions: gap-free sequences, no duplicated step, the same story in
	// every session.
	rows, _ = conn.Query(ctx, `SELECT id FROM sessions`)
	sids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	committed := map[string]string{} // idempotency key → incarnation whose result committed
	byRun := map[string][]*steptype.Step{}
	stories := map[string]int{}
	for _, sid := range sids {
		steps, err := st.StepList(ctx, &store.StepListParams{SessionID: sid})
		if err != nil {
			t.Fatal(err)
		}
		if len(steps) == 0 {
			continue // a session whose creating server died before it answered
		}
		fig.sessions++
		seen := map[string]bool{}
		calls := map[string]*steptype.Step{}
		for i, s := range steps {
			fig.steps++
			if s.Sequence != int64(i+1) {
				t.Errorf("session %s: step %d has sequence %d", sid, i+1, s.Sequence)
			}
			if seen[s.ID] {
				t.Errorf("session %s: step %s twice", sid, s.ID)
			}
			seen[s.ID] = true
			byRun[s.RunID] = append(byRun[s.RunID], s)
			if s.Kind == steptype.KindTool || s.Kind == steptype.KindAgent {
				k := s.RunID + "/" + s.ToolCallID
				if prev := calls[k]; prev != nil {
					t.Errorf("session %s: tool call %s has two results:\n%s\n%s\nwhat the servers said of run %s:\n%s",
						sid, k, stepLine(prev), stepLine(s), s.RunID, fl.logOf(s.RunID))
				}
				calls[k] = s
			}
			if s.Kind == steptype.KindTool && strings.HasPrefix(s.Content, "recorded key=") {
				fig.toolResults++
				var key, tag string
				fmt.Sscanf(s.Content, "recorded key=%s server=%s", &key, &tag)
				if _, dup := committed[key]; dup {
					t.Errorf("idempotency key %s committed twice", key)
				}
				committed[key] = tag
			}
		}
		stories[story(steps)]++
	}
	if len(stories) != 1 {
		for s, n := range stories {
			t.Errorf("%d sessions have the story:\n%s", n, s)
		}
	}

	// Side effects: each committed result comes from one execution; any
	// other execution of the same call was made by a server killed before
	// it could commit (at least once, as docs/guarantees.md promises), and
	// nothing executed without its result committing.
	execs, total := rec.snapshot()
	fig.executions = total
	for key, tag := range committed {
		ex := execs[key]
		i := slices.IndexFunc(ex, func(e execution) bool { return e.Server == tag })
		if i < 0 {
			t.Errorf("key %s: result committed by %s, which never executed it (%v)", key, tag, ex)
			continue
		}
		if len(ex) == 1 {
			fig.exactlyOnce++
			continue
		}
		fig.reExec++
		cut := false
		for j, e := range ex {
			switch {
			case j == i || fl.wasKilled(e.Server):
			case duringOutage(outages, e.At, fl.lease):
				cut = true
			default:
				t.Errorf("key %s executed %d times: by %s at %s, which was not killed and saw no database outage (result committed by %s at %s)",
					key, len(ex), e.Server, e.At.Format("15:04:05.000"), tag, ex[i].At.Format("15:04:05.000"))
			}
		}
		if cut {
			fig.reExecOutage++
		}
	}
	for key, ex := range execs {
		if _, ok := committed[key]; !ok {
			t.Errorf("key %s executed %d times (%v) but no result committed", key, len(ex), ex)
		}
	}

	// Streams: every one ended with run_finished, delivered each committed
	// step of its run once per status, in order.
	for _, r := range started {
		fig.streams++
		s := r.stream
		if s.Finished {
			fig.streamsFinished++
		} else {
			t.Errorf("run %s: stream did not end with run_finished (%d reconnects)", r.id, s.Reconnects)
		}
		fig.reconnects += s.Reconnects
		fig.approvals += s.Approvals
		if s.SameServer > 0 {
			t.Errorf("run %s: approval answered through its executing server", r.id)
		}
		for _, d := range s.Dups {
			t.Errorf("run %s: step %s delivered twice; stream:\n%s", r.id, d, s.trace())
		}
		for _, d := range s.Disorder {
			t.Errorf("run %s: %s", r.id, d)
		}
		for _, step := range byRun[r.id] {
			if s.Steps[step.ID+"/"+string(step.Status)] > 0 {
				continue
			}
			if step.Kind == steptype.KindInput && s.Steps[step.ID+"/"+string(steptype.StepWaiting)] > 0 {
				// The request was delivered; its answer, an update of a
				// step already delivered, reaches only the streams of the
				// instance that took it (docs/guarantees.md).
				fig.answersNotStreamed++
				continue
			}
			t.Errorf("run %s: step %d (%s %s) never delivered on its stream; stream:\n%s", r.id, step.Sequence, step.Kind, step.Status, s.trace())
		}
	}
	return fig
}

// outage is a while the database did not answer (paused) or was down
// (restarted).
type outage struct{ from, to time.Time }

// duringOutage reports whether an execution at t may have been cut by an
// outage: a server whose lease renewals stall stops its executions, a
// restart fails their commits, and the run resumes, on any server, from
// its last commit (at least once, as docs/guarantees.md says). The window
// runs from a lease before the outage (the execution's result was still
// to commit when it began) to a second after it.
func duringOutage(outages []outage, t time.Time, lease time.Duration) bool {
	for _, o := range outages {
		if !t.Before(o.from.Add(-lease)) && !t.After(o.to.Add(time.Second)) {
			return true
		}
	}
	return false
}

// story is the comparable content of a session: per run, its steps' kinds,
// names, roles, tools, statuses and model text, each batch of parallel
// results sorted (they commit in completion order).
func story(steps []*steptype.Step) string {
	runs := map[string][]string{}
	var order []string
	for _, s := range steps {
		if _, ok := runs[s.RunID]; !ok {
			order = append(order, s.RunID)
		}
		line := fmt.Sprintf("%s|%s|%s|%s|%s", s.Kind, s.Name, s.Role, s.ToolName, s.Status)
		if s.Kind != steptype.KindTool && s.Kind != steptype.KindUser {
			line += fmt.Sprintf("|%q", s.Content)
		}
		runs[s.RunID] = append(runs[s.RunID], line)
	}
	var out []string
	for _, id := range order {
		lines := runs[id]
		for i := 0; i < len(lines); {
			j := i
			for j < len(lines) && (strings.HasPrefix(lines[j], "tool|") || strings.HasPrefix(lines[j], "agent|")) {
				j++
			}
			if j > i {
				slices.Sort(lines[i:j])
				i = j
			} else {
				i++
			}
		}
		out = append(out, strings.Join(lines, "\n"))
	}
	slices.Sort(out)
	return strings.Join(out, "\n--\n")
}

// stepLine describes a step for a failure message.
func stepLine(s *steptype.Step) string {
	return fmt.Sprintf("  step %s seq %d parent %s created %s: %.120s", s.ID, s.Sequence, s.ParentID, s.CreatedAt.Format("15:04:05.000000"), s.Content)
}
