package store

import (
	"context"
	"encoding/json"
)

// ContextCheckpoint is a saved state of the model context of a session's
// top-level thread (hop 0) after the step at Sequence: the engine resumes
// building the conversation from it instead of from step 1. It is derived
// data, a pure function of the steps up to Sequence: a checkpoint lives and
// dies with the step it was taken at (StepID), so deleting or replacing that
// step (StepTruncate, SessionDelete, retention) removes it, and `stepwise
// copy` need not carry it (the engine derives it again).
type ContextCheckpoint struct {
	// SessionID is the session that owns the step at Sequence: for a
	// fork's inherited steps, the ancestor they belong to.
	SessionID string
	Sequence  int64
	// StepID is the id of the step at Sequence when the checkpoint was
	// taken.
	StepID string
	// Messages and Tokens are the conversation's message count and
	// estimated tokens up to Sequence, so the engine can pick a checkpoint
	// without decoding State.
	Messages int64
	Tokens   int64
	// State is the engine's encoding of the conversation state.
	State json.RawMessage
}

// ContextCheckpointStore is the part of Store that keeps context
// checkpoints.
type ContextCheckpointStore interface {
	// ContextCheckpointPut saves checkpoints, replacing any at the same
	// session and sequence. A checkpoint whose step (StepID, at SessionID
	// and Sequence) is not stored is skipped silently: it was taken from a
	// read that a truncation has since overtaken.
	ContextCheckpointPut(ctx context.Context, p *ContextCheckpointPutParams) error
	// ContextCheckpointList returns a session's own checkpoints (no
	// lineage: a fork's inherited ones are its ancestors') with a sequence
	// at or before MaxSeq (0: any), newest first.
	ContextCheckpointList(ctx context.Context, p *ContextCheckpointListParams) ([]*ContextCheckpoint, error)
}

// ContextCheckpointPutParams are the parameters of
// ContextCheckpointStore.ContextCheckpointPut.
type ContextCheckpointPutParams struct {
	Checkpoints []*ContextCheckpoint
}

// ContextCheckpointListParams are the parameters of
// ContextCheckpointStore.ContextCheckpointList.
type ContextCheckpointListParams struct {
	SessionID string
	MaxSeq    int64 // 0: no bound
	Limit     int   // 0: all
}
