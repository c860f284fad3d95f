package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
	"github.com/stepwise-run/stepwise/store/internal/sqlrow"
)

// queryAll runs a read on the reader pool and scans every row.
func queryAll[T any](s *Store, ctx context.Context, scan func(scanner) (*T, error), q string, args ...any) ([]*T, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var out []*T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, mapErr(err)
		}
		out = append(out, v)
	}
	return out, mapErr(rows.Err())
}

// queryOne reads one row, mapping no rows to ErrNotFound for what/id.
func queryOne[T any](s *Store, ctx context.Context, what, id string, scan func(scanner) (*T, error), q string, args ...any) (*T, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	v, err := scan(s.rdb.QueryRowContext(ctx, q, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, rules.NotFound(what, id)
	}
	return v, mapErr(err)
}

// stepOwner returns the session and run of a stored step, in the writer tx.
func (tx *wtx) stepOwner(id string) (sessionID, runID string, err error) {
	if id == "" {
		return "", "", rules.Invalid("step id is required")
	}
	err = tx.conn().QueryRowContext(bg, `SELECT session_id, run_id FROM steps WHERE id = ?`, id).Scan(&sessionID, &runID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", rules.NotFound("step", id)
	}
	return sessionID, runID, err
}

// where builds a conjunction of the non-empty filters.
type where struct {
	conds []string
	args  []any
}

func (w *where) eq(col, v string) {
	if v != "" {
		w.conds, w.args = append(w.conds, col+" = ?"), append(w.args, v)
	}
}

func (w *where) in(col string, vs []string) {
	if len(vs) == 0 {
		return
	}
	w.conds = append(w.conds, col+" IN ("+strings.TrimSuffix(strings.Repeat("?, ", len(vs)), ", ")+")")
	for _, v := range vs {
		w.args = append(w.args, v)
	}
}

func (w *where) sql() string {
	if len(w.conds) == 0 {
		return "1 = 1"
	}
	return strings.Join(w.conds, " AND ")
}

func limitSQL(n int) string {
	if n <= 0 {
		return ""
	}
	return " LIMIT " + strconv.Itoa(n)
}

// EvalPut implements store.ObservationStore.
func (s *Store) EvalPut(ctx context.Context, p *store.EvalPutParams) (*store.Eval, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	e := *p.Eval
	e.Details = rules.Raw(p.Eval.Details)
	now := rules.Now(p.Now)
	return write(s, ctx, func(tx *wtx) (*store.Eval, error) {
		var stepID any
		var err error
		switch e.TargetKind {
		case store.TargetStep:
			e.SessionID, e.RunID, err = tx.stepOwner(e.TargetID)
			stepID = e.TargetID
		case store.TargetRun:
			e.RunID = e.TargetID
			err = tx.conn().QueryRowContext(bg, `SELECT session_id FROM runs WHERE id = ?`, e.TargetID).Scan(&e.SessionID)
			if errors.Is(err, sql.ErrNoRows) {
				err = rules.NotFound("run", e.TargetID)
			}
		case store.TargetSession:
			e.SessionID, e.RunID = e.TargetID, ""
			_, err = tx.session(e.TargetID)
		}
		if err != nil {
			return nil, err
		}
		var created int64
		err = tx.conn().QueryRowContext(bg, `INSERT INTO evals (`+sqlrow.EvalCols+`, step_id)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET session_id = excluded.session_id, run_id = excluded.run_id,
				target_kind = excluded.target_kind, target_id = excluded.target_id, name = excluded.name,
				source = excluded.source, score = excluded.score, label = excluded.label,
				description = excluded.description, author = excluded.author, details = excluded.details,
				updated_at = excluded.updated_at, step_id = excluded.step_id
			RETURNING created_at`,
			e.ID, e.SessionID, e.RunID, string(e.TargetKind), e.TargetID, e.Name, string(e.Source), e.Score,
			e.Label, e.Description, e.Author, blob(e.Details), nanos(now), nanos(now), stepID).Scan(&created)
		if err != nil {
			return nil, err
		}
		e.CreatedAt, e.UpdatedAt = fromNanos(created), now
		return &e, nil
	})
}

// EvalGet implements store.ObservationStore.
func (s *Store) EvalGet(ctx context.Context, p *store.EvalGetParams) (*store.Eval, error) {
	if p == nil || p.ID == "" {
		return nil, rules.Invalid("eval id is required")
	}
	return queryOne(s, ctx, "eval", p.ID, sqlrow.ScanEval, `SELECT `+sqlrow.EvalCols+` FROM evals WHERE id = ?`, p.ID)
}

// EvalList implements store.ObservationStore.
func (s *Store) EvalList(ctx context.Context, p *store.EvalListParams) ([]*store.Eval, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var w where
	w.eq("target_kind", string(p.TargetKind))
	w.eq("target_id", p.TargetID)
	w.eq("session_id", p.SessionID)
	w.eq("run_id", p.RunID)
	w.eq("source", string(p.Source))
	w.eq("name", p.Name)
	return queryAll(s, ctx, sqlrow.ScanEval, `SELECT `+sqlrow.EvalCols+` FROM evals WHERE `+w.sql()+` ORDER BY rowid`+limitSQL(p.Limit), w.args...)
}

// EvalDelete implements store.ObservationStore.
func (s *Store) EvalDelete(ctx context.Context, p *store.EvalDeleteParams) error {
	if p == nil || p.ID == "" {
		return rules.Invalid("eval id is required")
	}
	_, err := write(s, ctx, func(tx *wtx) (struct{}, error) {
		res, err := tx.conn().ExecContext(bg, `DELETE FROM evals WHERE id = ?`, p.ID)
		if err != nil {
			return struct{}{}, err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return struct{}{}, errors.Join(err, rules.NotFound("eval", p.ID))
		}
		return struct{}{}, nil
	})
	return err
}

// AnnotationPut implements store.ObservationStore.
func (s *Store) AnnotationPut(ctx context.Context, p *store.AnnotationPutParams) (*store.Annotation, error) {
	if p == nil {
		return nil, rules.Invalid("nil annotation params")
	}
	now := rules.Now(p.Now)
	return write(s, ctx, func(tx *wtx) (*store.Annotation, error) {
		sessionID, _, err := tx.stepOwner(p.StepID)
		if err != nil {
			return nil, err
		}
		a, err := sqlrow.ScanAnnotation(tx.conn().QueryRowContext(bg, `SELECT `+sqlrow.AnnotationCols+` FROM step_annotations WHERE step_id = ?`, p.StepID))
		if errors.Is(err, sql.ErrNoRows) {
			a, err = &store.Annotation{StepID: p.StepID, SessionID: sessionID}, nil
		}
		if err != nil {
			return nil, err
		}
		p.Apply(&a.Annotations)
		a.UpdatedAt = now
		n := &a.Annotations
		_, err = tx.conn().ExecContext(bg, `INSERT INTO step_annotations (`+sqlrow.AnnotationCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (step_id) DO UPDATE SET state = excluded.state, state_summary = excluded.state_summary,
				goal = excluded.goal, goal_summary = excluded.goal_summary, action = excluded.action,
				action_summary = excluded.action_summary, updated_at = excluded.updated_at`,
			a.StepID, a.SessionID, n.State, n.StateSummary, n.Goal, n.GoalSummary, n.Action, n.ActionSummary, nanos(now))
		return a, err
	})
}

// AnnotationList implements store.ObservationStore.
func (s *Store) AnnotationList(ctx context.Context, p *store.AnnotationListParams) ([]*store.Annotation, error) {
	if p == nil || (len(p.StepIDs) == 0 && p.SessionID == "") {
		return nil, rules.Invalid("annotation list needs step ids or a session id")
	}
	var w where
	w.eq("session_id", p.SessionID)
	w.in("step_id", p.StepIDs)
	return queryAll(s, ctx, sqlrow.ScanAnnotation, `SELECT `+sqlrow.AnnotationCols+` FROM step_annotations WHERE `+w.sql()+` ORDER BY rowid`, w.args...)
}
