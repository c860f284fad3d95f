package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
	"github.com/stepwise-run/stepwise/store/internal/sqlrow"
)

// DatasetCreate implements store.ObservationStore. The items go in with
// COPY, in the dataset's transaction.
func (s *Store) DatasetCreate(ctx context.Context, p *store.DatasetCreateParams) (*store.Dataset, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	d := *p.Dataset
	d.ItemCount, d.CreatedAt = int64(len(p.Items)), rules.Now(p.Now)
	return inTx(s, ctx, func(tx *wtx) (*store.Dataset, error) {
		_, err := tx.Exec(ctx, `INSERT INTO datasets (`+sqlrow.DatasetCols+`) VALUES ($1, $2, $3, $4, $5)`,
			d.ID, d.Name, d.Description, d.ItemCount, nanos(d.CreatedAt))
		if pgCode(err) == codeUniqueViolation {
			return nil, rules.Conflict("dataset %q (%s) already exists", d.Name, d.ID)
		}
		if err != nil {
			return nil, err
		}
		rows := make([][]any, len(p.Items))
		for i, it := range p.Items {
			rows[i] = []any{d.ID, int64(i), it.Input, it.Expected, blob(it.Metadata)}
		}
		_, err = tx.conn.CopyFrom(ctx, pgx.Identifier{"dataset_items"},
			[]string{"dataset_id", "idx", "input", "expected", "metadata"}, pgx.CopyFromRows(rows))
		return &d, err
	})
}

// DatasetGet implements store.ObservationStore.
func (s *Store) DatasetGet(ctx context.Context, p *store.DatasetGetParams) (*store.Dataset, error) {
	if p == nil || (p.ID == "" && p.Name == "") {
		return nil, rules.Invalid("dataset id or name is required")
	}
	if p.ID != "" {
		return queryOne(s, ctx, "dataset", p.ID, sqlrow.ScanDataset, `SELECT `+sqlrow.DatasetCols+` FROM datasets WHERE id = $1`, p.ID)
	}
	return queryOne(s, ctx, "dataset", p.Name, sqlrow.ScanDataset, `SELECT `+sqlrow.DatasetCols+` FROM datasets WHERE name = $1`, p.Name)
}

// DatasetList implements store.ObservationStore.
func (s *Store) DatasetList(ctx context.Context, p *store.DatasetListParams) ([]*store.Dataset, error) {
	limit := 0
	if p != nil {
		limit = p.Limit
	}
	return queryAll(s, ctx, sqlrow.ScanDataset, `SELECT `+sqlrow.DatasetCols+` FROM datasets ORDER BY seq DESC`+limitSQL(limit))
}

// DatasetItemList implements store.ObservationStore.
func (s *Store) DatasetItemList(ctx context.Context, p *store.DatasetItemListParams) ([]*store.DatasetItem, error) {
	if p == nil || p.DatasetID == "" {
		return nil, rules.Invalid("dataset id is required")
	}
	if _, err := s.DatasetGet(ctx, &store.DatasetGetParams{ID: p.DatasetID}); err != nil {
		return nil, err
	}
	return queryAll(s, ctx, sqlrow.ScanDatasetItem, `SELECT `+sqlrow.DatasetItemCols+` FROM dataset_items WHERE dataset_id = $1 AND idx >= $2
		ORDER BY idx`+limitSQL(p.Limit), p.DatasetID, max(p.Offset, 0))
}

// lockExperiment reads an experiment row with a row lock.
func lockExperiment(ctx context.Context, tx *wtx, id, lock string) (*store.Experiment, error) {
	x, err := sqlrow.ScanExperiment(tx.QueryRow(ctx, `SELECT `+sqlrow.ExperimentCols+` FROM experiments WHERE id = $1 `+lock, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, rules.NotFound("experiment", id)
	}
	return x, err
}

// ExperimentCreate implements store.ObservationStore.
func (s *Store) ExperimentCreate(ctx context.Context, p *store.ExperimentCreateParams) (*store.Experiment, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	x := *p.Experiment
	x.Config, x.Summary = rules.Raw(p.Experiment.Config), rules.Raw(p.Experiment.Summary)
	if x.Status == "" {
		x.Status = store.ExperimentRunning
	}
	now := rules.Now(p.Now)
	x.CreatedAt, x.UpdatedAt, x.FinishedAt = now, now, time.Time{}
	if x.Status.Terminal() {
		x.FinishedAt = now
	}
	return inTx(s, ctx, func(tx *wtx) (*store.Experiment, error) {
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM datasets WHERE id = $1 FOR KEY SHARE`, x.DatasetID).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, rules.NotFound("dataset", x.DatasetID)
		}
		if err != nil {
			return nil, err
		}
		_, err = tx.Exec(ctx, `INSERT INTO experiments (`+sqlrow.ExperimentCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
			x.ID, x.Name, x.DatasetID, x.Agent, string(x.Status), blob(x.Config), blob(x.Summary), x.Error,
			nanos(now), nanos(now), nanos(x.FinishedAt))
		if pgCode(err) == codeUniqueViolation {
			return nil, rules.Conflict("experiment %q (%s) already exists", x.Name, x.ID)
		}
		return &x, err
	})
}

// ExperimentGet implements store.ObservationStore.
func (s *Store) ExperimentGet(ctx context.Context, p *store.ExperimentGetParams) (*store.Experiment, error) {
	if p == nil || (p.ID == "" && p.Name == "") {
		return nil, rules.Invalid("experiment id or name is required")
	}
	if p.ID != "" {
		return queryOne(s, ctx, "experiment", p.ID, sqlrow.ScanExperiment, `SELECT `+sqlrow.ExperimentCols+` FROM experiments WHERE id = $1`, p.ID)
	}
	return queryOne(s, ctx, "experiment", p.Name, sqlrow.ScanExperiment, `SELECT `+sqlrow.ExperimentCols+` FROM experiments WHERE name = $1`, p.Name)
}

// ExperimentList implements store.ObservationStore.
func (s *Store) ExperimentList(ctx context.Context, p *store.ExperimentListParams) ([]*store.Experiment, error) {
	if p == nil {
		p = &store.ExperimentListParams{}
	}
	var w where
	w.eq("dataset_id", p.DatasetID)
	return queryAll(s, ctx, sqlrow.ScanExperiment, `SELECT `+sqlrow.ExperimentCols+` FROM experiments WHERE `+w.sql()+
		` ORDER BY seq DESC`+limitSQL(p.Limit), w.args...)
}

// ExperimentUpdate implements store.ObservationStore.
func (s *Store) ExperimentUpdate(ctx context.Context, p *store.ExperimentUpdateParams) (*store.Experiment, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	now := rules.Now(p.Now)
	return inTx(s, ctx, func(tx *wtx) (*store.Experiment, error) {
		x, err := lockExperiment(ctx, tx, p.ID, "FOR NO KEY UPDATE")
		if err != nil {
			return nil, err
		}
		if p.Status != nil {
			x.Status = *p.Status
			if x.Status.Terminal() {
				x.FinishedAt = now
			}
		}
		if p.Summary != nil {
			x.Summary = rules.Raw(p.Summary)
		}
		if p.Error != nil {
			x.Error = *p.Error
		}
		x.UpdatedAt = now
		_, err = tx.Exec(ctx, `UPDATE experiments SET status = $1, summary = $2, error = $3, updated_at = $4,
			finished_at = $5 WHERE id = $6`, string(x.Status), blob(x.Summary), x.Error, nanos(now), nanos(x.FinishedAt), x.ID)
		return x, err
	})
}

// ExperimentItemPut implements store.ObservationStore.
func (s *Store) ExperimentItemPut(ctx context.Context, p *store.ExperimentItemPutParams) (*store.ExperimentItem, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	it := *p.Item
	it.Scores = maps.Clone(p.Item.Scores)
	it.UpdatedAt = rules.Now(p.Now)
	var scores []byte
	if len(it.Scores) > 0 {
		var err error
		if scores, err = json.Marshal(it.Scores); err != nil {
			return nil, err
		}
	}
	return inTx(s, ctx, func(tx *wtx) (*store.ExperimentItem, error) {
		if _, err := lockExperiment(ctx, tx, it.ExperimentID, "FOR KEY SHARE"); err != nil {
			return nil, err
		}
		_, err := tx.Exec(ctx, `INSERT INTO experiment_items (`+sqlrow.ExperimentItemCols+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
			ON CONFLICT (experiment_id, idx) DO UPDATE SET session_id = excluded.session_id, run_id = excluded.run_id,
				status = excluded.status, output = excluded.output, error = excluded.error, scores = excluded.scores,
				duration = excluded.duration, input_tokens = excluded.input_tokens,
				output_tokens = excluded.output_tokens, cost = excluded.cost, updated_at = excluded.updated_at`,
			it.ExperimentID, it.Index, it.SessionID, it.RunID, it.Status, it.Output, it.Error, blob(scores),
			int64(it.Duration), it.InputTokens, it.OutputTokens, it.Cost, nanos(it.UpdatedAt))
		return &it, err
	})
}

// ExperimentItemList implements store.ObservationStore.
func (s *Store) ExperimentItemList(ctx context.Context, p *store.ExperimentItemListParams) ([]*store.ExperimentItem, error) {
	if p == nil || p.ExperimentID == "" {
		return nil, rules.Invalid("experiment id is required")
	}
	if _, err := s.ExperimentGet(ctx, &store.ExperimentGetParams{ID: p.ExperimentID}); err != nil {
		return nil, err
	}
	return queryAll(s, ctx, sqlrow.ScanExperimentItem, `SELECT `+sqlrow.ExperimentItemCols+` FROM experiment_items
		WHERE experiment_id = $1 ORDER BY idx`, p.ExperimentID)
}
