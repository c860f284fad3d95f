// Package sqlrow holds the row encodings the SQL drivers (store/sqlite,
// store/postgres) share: the column lists of the run and observation
// tables and the scanners that turn their rows into steptype and store
// types, and times stored as unix nanoseconds. Each driver keeps its own SQL and queries; both read the
// same columns into the same values through these functions.
package sqlrow

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// Scanner is a row being read: *sql.Row, *sql.Rows, pgx.Row and pgx.Rows.
type Scanner interface{ Scan(dest ...any) error }

// FromNanos reads a time stored as UTC unix nanoseconds; 0 is the zero
// time.
func FromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// EvalCols are the columns eval rows are read with, in the order of ScanEval.
const EvalCols = `id, session_id, run_id, target_kind, target_id, name, source, score, label,
	description, author, details, created_at, updated_at`

// ScanEval reads one row of the columns of EvalCols.
func ScanEval(sc Scanner) (*store.Eval, error) {
	var e store.Eval
	var details []byte
	var created, updated int64
	err := sc.Scan(&e.ID, &e.SessionID, &e.RunID, &e.TargetKind, &e.TargetID, &e.Name, &e.Source, &e.Score,
		&e.Label, &e.Description, &e.Author, &details, &created, &updated)
	if err != nil {
		return nil, err
	}
	e.Details = rules.Raw(details)
	e.CreatedAt, e.UpdatedAt = FromNanos(created), FromNanos(updated)
	return &e, nil
}

// AnnotationCols are the columns annotation rows are read with, in the order of ScanAnnotation.
const AnnotationCols = `step_id, session_id, state, state_summary, goal, goal_summary, action, action_summary, updated_at`

// ScanAnnotation reads one row of the columns of AnnotationCols.
func ScanAnnotation(sc Scanner) (*store.Annotation, error) {
	var a store.Annotation
	var updated int64
	n := &a.Annotations
	if err := sc.Scan(&a.StepID, &a.SessionID, &n.State, &n.StateSummary, &n.Goal, &n.GoalSummary,
		&n.Action, &n.ActionSummary, &updated); err != nil {
		return nil, err
	}
	a.UpdatedAt = FromNanos(updated)
	return &a, nil
}

// DatasetCols are the columns dataset rows are read with, in the order of ScanDataset.
const DatasetCols = `id, name, description, item_count, created_at`

// ScanDataset reads one row of the columns of DatasetCols.
func ScanDataset(sc Scanner) (*store.Dataset, error) {
	var d store.Dataset
	var created int64
	if err := sc.Scan(&d.ID, &d.Name, &d.Description, &d.ItemCount, &created); err != nil {
		return nil, err
	}
	d.CreatedAt = FromNanos(created)
	return &d, nil
}

// ExperimentCols are the columns experiment rows are read with, in the order of ScanExperiment.
const ExperimentCols = `id, name, dataset_id, agent, status, config, summary, error, created_at, updated_at, finished_at`

// ScanExperiment reads one row of the columns of ExperimentCols.
func ScanExperiment(sc Scanner) (*store.Experiment, error) {
	var x store.Experiment
	var config, summary []byte
	var created, updated, finished int64
	if err := sc.Scan(&x.ID, &x.Name, &x.DatasetID, &x.Agent, &x.Status, &config, &summary, &x.Error,
		&created, &updated, &finished); err != nil {
		return nil, err
	}
	x.Config, x.Summary = rules.Raw(config), rules.Raw(summary)
	x.CreatedAt, x.UpdatedAt, x.FinishedAt = FromNanos(created), FromNanos(updated), FromNanos(finished)
	return &x, nil
}

// ExperimentItemCols are the columns experiment item rows are read with, in the order of ScanExperimentItem.
const ExperimentItemCols = `experiment_id, idx, session_id, run_id, status, output, error, scores, duration,
	input_tokens, output_tokens, cost, updated_at`

// ScanExperimentItem reads one row of the columns of ExperimentItemCols.
func ScanExperimentItem(sc Scanner) (*store.ExperimentItem, error) {
	var it store.ExperimentItem
	var scores []byte
	var dur, updated int64
	if err := sc.Scan(&it.ExperimentID, &it.Index, &it.SessionID, &it.RunID, &it.Status, &it.Output, &it.Error,
		&scores, &dur, &it.InputTokens, &it.OutputTokens, &it.Cost, &updated); err != nil {
		return nil, err
	}
	if len(scores) > 0 {
		if err := json.Unmarshal(scores, &it.Scores); err != nil {
			return nil, err
		}
	}
	it.Duration, it.UpdatedAt = time.Duration(dur), FromNanos(updated)
	return &it, nil
}

// AttachmentCols are the columns attachment rows are read with, in the order of ScanAttachment.
const AttachmentCols = `id, step_id, session_id, run_id, name, kind, content_type, size, blob_hash, created_at`

// ScanAttachment reads one row of the columns of AttachmentCols.
func ScanAttachment(sc Scanner) (*store.Attachment, error) {
	var a store.Attachment
	var created int64
	if err := sc.Scan(&a.ID, &a.StepID, &a.SessionID, &a.RunID, &a.Name, &a.Kind, &a.ContentType, &a.Size,
		&a.BlobHash, &created); err != nil {
		return nil, err
	}
	a.CreatedAt = FromNanos(created)
	return &a, nil
}

// EventCols are the columns step event rows are read with, in the order of ScanEvent.
const EventCols = `id, step_id, session_id, run_id, idx, type, name, attempt, started_at, duration, error,
	payload, blob_hash, size, created_at`

// ScanEvent reads one row of the columns of EventCols.
func ScanEvent(sc Scanner) (*store.StepEvent, error) {
	var e store.StepEvent
	var payload []byte
	var hash *string
	var started, dur, created int64
	if err := sc.Scan(&e.ID, &e.StepID, &e.SessionID, &e.RunID, &e.Index, &e.Type, &e.Name, &e.Attempt,
		&started, &dur, &e.Error, &payload, &hash, &e.Size, &created); err != nil {
		return nil, err
	}
	if hash != nil {
		e.BlobHash = *hash
	}
	e.Payload = rules.Raw(payload)
	e.StartedAt, e.Duration, e.CreatedAt = FromNanos(started), time.Duration(dur), FromNanos(created)
	return &e, nil
}

// BlobCols are the columns blob rows are read with, in the order of
// ScanBlob.
const BlobCols = `hash, size, content_type, data, created_at`

// ScanBlob reads one row of the columns of BlobCols.
func ScanBlob(sc Scanner) (*store.Blob, error) {
	var b store.Blob
	var created int64
	if err := sc.Scan(&b.Hash, &b.Size, &b.ContentType, &b.Data, &created); err != nil {
		return nil, err
	}
	b.CreatedAt = FromNanos(created)
	return &b, nil
}

// DatasetItemCols are the columns dataset item rows are read with, in the
// order of ScanDatasetItem.
const DatasetItemCols = `dataset_id, idx, input, expected, metadata`

// ScanDatasetItem reads one row of the columns of DatasetItemCols.
func ScanDatasetItem(sc Scanner) (*store.DatasetItem, error) {
	var it store.DatasetItem
	var meta []byte
	if err := sc.Scan(&it.DatasetID, &it.Index, &it.Input, &it.Expected, &meta); err != nil {
		return nil, err
	}
	it.Metadata = rules.Raw(meta)
	return &it, nil
}

// RunCols are the columns run rows are written and read with, in the
// order of ScanRun.
const RunCols = `id, session_id, agent, parent_run_id, parent_step_id, hop, status, cursor, state,
	input, output, error, step_count, options, lease_owner, lease_expires, created_at, updated_at, finished_at`

// ScanRun reads one row of the columns of RunCols.
func ScanRun(sc Scanner) (*steptype.Run, error) {
	var r steptype.Run
	var state, errb, opts []byte
	var lease, created, updated, finished int64
	err := sc.Scan(&r.ID, &r.SessionID, &r.Agent, &r.ParentRunID, &r.ParentStepID, &r.Hop, &r.Status, &r.Cursor,
		&state, &r.Input, &r.Output, &errb, &r.StepCount, &opts, &r.LeaseOwner, &lease, &created, &updated, &finished)
	if err != nil {
		return nil, err
	}
	r.State, r.Options = rules.Raw(state), rules.Raw(opts)
	if len(errb) > 0 {
		r.Error = new(steptype.StepError)
		if err := json.Unmarshal(errb, r.Error); err != nil {
			return nil, fmt.Errorf("%w: run %q error column: %v", store.ErrCorrupt, r.ID, err)
		}
	}
	r.LeaseExpires, r.CreatedAt, r.UpdatedAt, r.FinishedAt = FromNanos(lease), FromNanos(created), FromNanos(updated), FromNanos(finished)
	return &r, nil
}
