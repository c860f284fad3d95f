package postgres

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
	"github.com/stepwise-run/stepwise/store/internal/sqlrow"
)

// The observation data (migration 00010) mirrors store/sqlite's tables:
// rows beside the immutable steps, gone with them by ON DELETE CASCADE.
// Lists follow the seq identity column, the insertion order.

// queryAll runs a read on the pool and scans every row; no rows is an
// empty, non-nil slice.
func queryAll[T any](s *Store, ctx context.Context, scan func(sqlrow.Scanner) (*T, error), q string, args ...any) ([]*T, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	out := []*T{}
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
func queryOne[T any](s *Store, ctx context.Context, what, id string, scan func(sqlrow.Scanner) (*T, error), q string, args ...any) (*T, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	v, err := scan(s.pool.QueryRow(ctx, q, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, rules.NotFound(what, id)
	}
	return v, mapErr(err)
}

// stepOwner returns the session and run of a stored step and locks its
// row (lock: "FOR KEY SHARE" against a concurrent delete, "FOR NO KEY
// UPDATE" to serialize writers of the step's own rows).
func stepOwner(ctx context.Context, tx *wtx, id, lock string) (sessionID, runID string, err error) {
	if id == "" {
		return "", "", rules.Invalid("step id is required")
	}
	err = tx.QueryRow(ctx, `SELECT session_id, run_id FROM steps WHERE id = $1 `+lock, id).Scan(&sessionID, &runID)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", rules.NotFound("step", id)
	}
	return sessionID, runID, err
}

// where builds a conjunction of the non-empty filters, with $n
// placeholders.
type where struct {
	conds []string
	args  []any
}

func (w *where) arg(v any) string {
	w.args = append(w.args, v)
	return "$" + strconv.Itoa(len(w.args))
}

func (w *where) eq(col, v string) {
	if v != "" {
		w.conds = append(w.conds, col+" = "+w.arg(v))
	}
}

func (w *where) in(col string, vs []string) {
	if len(vs) > 0 {
		w.conds = append(w.conds, col+" = ANY("+w.arg(vs)+")")
	}
}

func (w *where) sql() string {
	if len(w.conds) == 0 {
		return "true"
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
	return inTx(s, ctx, func(tx *wtx) (*store.Eval, error) {
		var stepID *string
		var err error
		switch e.TargetKind {
		case store.TargetStep:
			e.SessionID, e.RunID, err = stepOwner(ctx, tx, e.TargetID, "FOR KEY SHARE")
			stepID = &e.TargetID
		case store.TargetRun:
			e.RunID = e.TargetID
			err = tx.QueryRow(ctx, `SELECT session_id FROM runs WHERE id = $1 FOR KEY SHARE`, e.TargetID).Scan(&e.SessionID)
			if errors.Is(err, pgx.ErrNoRows) {
				err = rules.NotFound("run", e.TargetID)
			}
		case store.TargetSession:
			e.SessionID, e.RunID = e.TargetID, ""
			_, err = lockSession(ctx, tx, e.TargetID, "FOR KEY SHARE")
		}
		if err != nil {
			return nil, err
		}
		var created int64
		err = tx.QueryRow(ctx, `INSERT INTO evals (`+sqlrow.EvalCols+`, step_id)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
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
	return queryOne(s, ctx, "eval", p.ID, sqlrow.ScanEval, `SELECT `+sqlrow.EvalCols+` FROM evals WHERE id = $1`, p.ID)
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
	return queryAll(s, ctx, sqlrow.ScanEval, `SELECT `+sqlrow.EvalCols+` FROM evals WHERE `+w.sql()+` ORDER BY seq`+limitSQL(p.Limit), w.args...)
}

// EvalDelete implements store.ObservationStore.
func (s *Store) EvalDelete(ctx context.Context, p *store.EvalDeleteParams) error {
	if p == nil || p.ID == "" {
		return rules.Invalid("eval id is required")
	}
	if err := s.usable(); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM evals WHERE id = $1`, p.ID)
	if err != nil {
		return mapErr(err)
	}
	if tag.RowsAffected() == 0 {
		return rules.NotFound("eval", p.ID)
	}
	return nil
}

// AnnotationPut implements store.ObservationStore. The step row is locked
// FOR NO KEY UPDATE, so concurrent puts on one step merge one after the
// other.
func (s *Store) AnnotationPut(ctx context.Context, p *store.AnnotationPutParams) (*store.Annotation, error) {
	if p == nil {
		return nil, rules.Invalid("nil annotation params")
	}
	now := rules.Now(p.Now)
	return inTx(s, ctx, func(tx *wtx) (*store.Annotation, error) {
		sessionID, _, err := stepOwner(ctx, tx, p.StepID, "FOR NO KEY UPDATE")
		if err != nil {
			return nil, err
		}
		a, err := sqlrow.ScanAnnotation(tx.QueryRow(ctx, `SELECT `+sqlrow.AnnotationCols+` FROM step_annotations WHERE step_id = $1`, p.StepID))
		if errors.Is(err, pgx.ErrNoRows) {
			a, err = &store.Annotation{StepID: p.StepID, SessionID: sessionID}, nil
		}
		if err != nil {
			return nil, err
		}
		p.Apply(&a.Annotations)
		a.UpdatedAt = now
		n := &a.Annotations
		_, err = tx.Exec(ctx, `INSERT INTO step_annotations (`+sqlrow.AnnotationCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
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
	return queryAll(s, ctx, sqlrow.ScanAnnotation, `SELECT `+sqlrow.AnnotationCols+` FROM step_annotations WHERE `+w.sql()+` ORDER BY seq`, w.args...)
}

// conflictOn reports whether err is a unique violation of constraint (a
// name prefix, e.g. "attachments_pkey").
func conflictOn(err error, constraint string) bool {
	pe := pgError(err)
	return pe != nil && pe.Code == codeUniqueViolation && strings.HasPrefix(pe.ConstraintName, constraint)
}
