package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
)

// InlinePayloadLimit is the largest step-event payload kept in the event row;
// larger payloads are stored out of line in the blob table, by content hash,
// and the event carries the hash.
const InlinePayloadLimit = 64 << 10

// ObservationStore is the part of Store that keeps the
// observation data of steps and the evaluation data built on it:
// evals on steps, runs and sessions; annotations (state, goal, action and
// their summaries) set after a step committed; blobs stored once by content
// hash; attachments of steps; the fine-grained events inside steps; datasets
// and experiments.
//
// None of it is ever written into a step row: step rows stay immutable, and
// observation rows live beside them. Deleting a step (truncate, session
// delete) deletes its evals, annotations, attachments and events; deleting
// a session deletes its evals. Blobs are shared by content and removed only
// by BlobPrune once nothing refers to them.
type ObservationStore interface {
	// EvalPut inserts an eval, or replaces the eval with the same ID
	// (keeping its CreatedAt). The target must exist (ErrNotFound); the
	// score must be a finite number in [0, 1] and the source one of the
	// EvalSource constants (ErrInvalid).
	EvalPut(ctx context.Context, p *EvalPutParams) (*Eval, error)
	// EvalGet returns one eval or ErrNotFound.
	EvalGet(ctx context.Context, p *EvalGetParams) (*Eval, error)
	// EvalList returns the evals matching every filter given, oldest first.
	EvalList(ctx context.Context, p *EvalListParams) ([]*Eval, error)
	// EvalDelete deletes one eval, or fails with ErrNotFound.
	EvalDelete(ctx context.Context, p *EvalDeleteParams) error

	// AnnotationPut sets the given annotation fields of a step, keeping the
	// others (upsert), and returns the merged row. The step must exist.
	AnnotationPut(ctx context.Context, p *AnnotationPutParams) (*Annotation, error)
	// AnnotationList returns the annotation rows of the given steps, or of
	// the steps of a session, in step order of insertion.
	AnnotationList(ctx context.Context, p *AnnotationListParams) ([]*Annotation, error)

	// BlobPut stores data once under its SHA-256: putting the same bytes
	// again writes nothing and returns the stored blob (without Data).
	BlobPut(ctx context.Context, p *BlobPutParams) (*Blob, error)
	// BlobGet returns a blob with its Data, or ErrNotFound.
	BlobGet(ctx context.Context, p *BlobGetParams) (*Blob, error)
	// BlobPrune deletes the blobs created before p.Before that no attachment
	// and no step event refers to, and returns how many it deleted.
	BlobPrune(ctx context.Context, p *BlobPruneParams) (int64, error)

	// AttachmentAdd attaches a stored blob to a step. The step and the blob
	// must exist (ErrNotFound); a second attachment with the same ID fails
	// with ErrConflict.
	AttachmentAdd(ctx context.Context, p *AttachmentAddParams) (*Attachment, error)
	// AttachmentGet returns one attachment or ErrNotFound.
	AttachmentGet(ctx context.Context, p *AttachmentGetParams) (*Attachment, error)
	// AttachmentList returns the attachments of a step or of a session,
	// oldest first.
	AttachmentList(ctx context.Context, p *AttachmentListParams) ([]*Attachment, error)

	// StepEventAppend records events inside steps, all or nothing. Each
	// event gets the next Index of its step; a payload larger than
	// InlinePayloadLimit is stored as a blob and the event keeps only its
	// BlobHash and Size.
	StepEventAppend(ctx context.Context, p *StepEventAppendParams) ([]*StepEvent, error)
	// StepEventList returns the events of a step, run or session in the
	// order they were appended (so by Index within a step).
	StepEventList(ctx context.Context, p *StepEventListParams) ([]*StepEvent, error)

	// DatasetCreate inserts a dataset and its items, all or nothing. Names
	// are unique (ErrConflict).
	DatasetCreate(ctx context.Context, p *DatasetCreateParams) (*Dataset, error)
	// DatasetGet returns a dataset by ID or by Name, or ErrNotFound.
	DatasetGet(ctx context.Context, p *DatasetGetParams) (*Dataset, error)
	// DatasetList returns datasets, newest first.
	DatasetList(ctx context.Context, p *DatasetListParams) ([]*Dataset, error)
	// DatasetItemList pages through the items of a dataset in Index order.
	DatasetItemList(ctx context.Context, p *DatasetItemListParams) ([]*DatasetItem, error)

	// ExperimentCreate inserts an experiment over an existing dataset.
	ExperimentCreate(ctx context.Context, p *ExperimentCreateParams) (*Experiment, error)
	// ExperimentGet returns one experiment by ID or by Name, or ErrNotFound.
	ExperimentGet(ctx context.Context, p *ExperimentGetParams) (*Experiment, error)
	// ExperimentList returns experiments, newest first.
	ExperimentList(ctx context.Context, p *ExperimentListParams) ([]*Experiment, error)
	// ExperimentUpdate changes the status, summary and error of an
	// experiment.
	ExperimentUpdate(ctx context.Context, p *ExperimentUpdateParams) (*Experiment, error)
	// ExperimentItemPut inserts or replaces the result of one dataset item
	// in an experiment.
	ExperimentItemPut(ctx context.Context, p *ExperimentItemPutParams) (*ExperimentItem, error)
	// ExperimentItemList returns an experiment's item results in Index order.
	ExperimentItemList(ctx context.Context, p *ExperimentItemListParams) ([]*ExperimentItem, error)
}

// EvalTarget is what an eval judges.
type EvalTarget string

// Eval targets.
const (
	TargetStep    EvalTarget = "step"
	TargetRun     EvalTarget = "run"
	TargetSession EvalTarget = "session"
)

// EvalSource says who produced an eval.
type EvalSource string

// Eval sources.
const (
	SourceUser      EvalSource = "user"      // a person or the program's own logic
	SourceLLMJudge  EvalSource = "llm-judge" // a model grading against a rubric
	SourceHeuristic EvalSource = "heuristic" // a built-in or code evaluator
)

// Eval is one evaluation of a step, run or session.
type Eval struct {
	ID         string     `json:"id"`
	TargetKind EvalTarget `json:"target_kind"`
	TargetID   string     `json:"target_id"`
	// SessionID and RunID locate the target; set by the store. RunID is
	// empty for session targets and for steps that belong to no run.
	SessionID string `json:"session_id"`
	RunID     string `json:"run_id,omitempty"`
	// Name is what was evaluated ("helpfulness", "loop", "exact_match").
	Name   string     `json:"name"`
	Source EvalSource `json:"source"`
	// Score is in [0, 1]; 1 is best.
	Score       float64         `json:"score"`
	Label       string          `json:"label,omitempty"`
	Description string          `json:"description,omitempty"`
	Author      string          `json:"author,omitempty"`
	Details     json.RawMessage `json:"details,omitempty"` // evaluator specific, e.g. rubric criteria
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
}

// EvalPutParams are the parameters of ObservationStore.EvalPut.
type EvalPutParams struct {
	Eval *Eval // ID, TargetKind, TargetID, Name, Source required
	Now  time.Time
}

// EvalGetParams are the parameters of ObservationStore.EvalGet.
type EvalGetParams struct{ ID string }

// EvalDeleteParams are the parameters of ObservationStore.EvalDelete.
type EvalDeleteParams struct{ ID string }

// EvalListParams filter evals; at least one of TargetID, SessionID or RunID
// is required. RunID matches the run's evals and those of its steps.
type EvalListParams struct {
	TargetKind EvalTarget
	TargetID   string
	SessionID  string
	RunID      string
	Source     EvalSource
	Name       string
	Limit      int // 0 means no limit
}

// Annotation is the annotation row of a step: state, goal and action set
// after the step committed, and their model-written summaries. A field left
// empty here does not hide the value recorded in the step itself; see
// Overlay.
type Annotation struct {
	StepID      string               `json:"step_id"`
	SessionID   string               `json:"session_id"`
	Annotations steptype.Annotations `json:"annotations"`
	UpdatedAt   time.Time            `json:"updated_at"`
}

// Overlay returns base with every non-empty field of a applied over it.
func (a *Annotation) Overlay(base steptype.Annotations) steptype.Annotations {
	if a == nil {
		return base
	}
	o := a.Annotations
	for _, f := range []struct {
		dst *string
		src string
	}{
		{&base.State, o.State}, {&base.StateSummary, o.StateSummary}, {&base.Goal, o.Goal},
		{&base.GoalSummary, o.GoalSummary}, {&base.Action, o.Action}, {&base.ActionSummary, o.ActionSummary},
	} {
		if f.src != "" {
			*f.dst = f.src
		}
	}
	return base
}

// AnnotationPutParams are the parameters of ObservationStore.AnnotationPut.
// Nil fields are left as stored; a pointer to "" clears the field.
type AnnotationPutParams struct {
	StepID                                   string
	State, Goal, Action                      *string
	StateSummary, GoalSummary, ActionSummary *string
	Now                                      time.Time
}

// Apply sets the fields of p on a.
func (p *AnnotationPutParams) Apply(a *steptype.Annotations) {
	for _, f := range []struct {
		dst *string
		src *string
	}{
		{&a.State, p.State}, {&a.Goal, p.Goal}, {&a.Action, p.Action},
		{&a.StateSummary, p.StateSummary}, {&a.GoalSummary, p.GoalSummary}, {&a.ActionSummary, p.ActionSummary},
	} {
		if f.src != nil {
			*f.dst = *f.src
		}
	}
}

// AnnotationListParams select annotation rows: of StepIDs, or of a session.
type AnnotationListParams struct {
	StepIDs   []string
	SessionID string
}

// Blob is stored content, addressed by the lowercase hex SHA-256 of Data.
type Blob struct {
	Hash        string    `json:"hash"`
	Size        int64     `json:"size"`
	ContentType string    `json:"content_type"`
	Data        []byte    `json:"-"` // set by BlobGet only
	CreatedAt   time.Time `json:"created_at"`
}

// BlobHash returns the address of data: its lowercase hex SHA-256.
func BlobHash(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}

// BlobPutParams are the parameters of ObservationStore.BlobPut.
type BlobPutParams struct {
	Data        []byte // required, not empty
	ContentType string // required
	Now         time.Time
}

// BlobGetParams are the parameters of ObservationStore.BlobGet.
type BlobGetParams struct{ Hash string }

// BlobPruneParams are the parameters of ObservationStore.BlobPrune.
type BlobPruneParams struct {
	// Before protects blobs put since then, whose attachment or event may
	// not be written yet. Required.
	Before time.Time
}

// Attachment links a blob (a screenshot, an image, a file) to a step.
type Attachment struct {
	ID          string    `json:"id"`
	StepID      string    `json:"step_id"`
	SessionID   string    `json:"session_id"` // set by the store
	RunID       string    `json:"run_id,omitempty"`
	Name        string    `json:"name"`
	Kind        string    `json:"kind"` // "screenshot", "image", "file"
	ContentType string    `json:"content_type"`
	Size        int64     `json:"size"`
	BlobHash    string    `json:"blob_hash"`
	CreatedAt   time.Time `json:"created_at"`
}

// AttachmentAddParams are the parameters of ObservationStore.AttachmentAdd.
// ContentType and Size are taken from the blob.
type AttachmentAddParams struct {
	Attachment *Attachment // ID, StepID, Name, Kind, BlobHash required
	Now        time.Time
}

// AttachmentGetParams are the parameters of ObservationStore.AttachmentGet.
type AttachmentGetParams struct{ ID string }

// AttachmentListParams select the attachments of a step or of a session.
type AttachmentListParams struct {
	StepID    string
	SessionID string
}

// StepEvent is a fine-grained event inside a step: a provider request or
// response, a tool invocation, an HTTP exchange, a sub-call.
type StepEvent struct {
	ID        string `json:"id"`
	StepID    string `json:"step_id"`
	SessionID string `json:"session_id"` // set by the store
	RunID     string `json:"run_id,omitempty"`
	Index     int64  `json:"index"` // order inside the step, from 0; set by the store
	Type      string `json:"type"`
	Name      string `json:"name,omitempty"`
	Attempt   int    `json:"attempt,omitempty"`
	// StartedAt and Duration time the event.
	StartedAt time.Time     `json:"started_at,omitzero"`
	Duration  time.Duration `json:"duration,omitempty"`
	Error     string        `json:"error,omitempty"`
	// Payload is the event's JSON when inline; nil when it is stored out of
	// line under BlobHash. Size is its length either way.
	Payload   json.RawMessage `json:"payload,omitempty"`
	BlobHash  string          `json:"blob_hash,omitempty"`
	Size      int64           `json:"size"`
	CreatedAt time.Time       `json:"created_at"`
}

// StepEventAppendParams are the parameters of
// ObservationStore.StepEventAppend.
type StepEventAppendParams struct {
	Events []*StepEvent // ID, StepID, Type required; Payload valid JSON or empty
	Now    time.Time
}

// StepEventListParams select events: of a step, a run or a session.
type StepEventListParams struct {
	StepID    string
	RunID     string
	SessionID string
	Types     []string
	Limit     int
}
