package store

import (
	"context"
	"errors"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
)

// Vector sentinels. Drivers wrap them with the embedder and the sizes
// involved, so callers test with errors.Is and users read what went wrong.
var (
	// ErrDimensionMismatch: a vector's length differs from the dimension
	// already stored for its embedder (or from the other vectors of the
	// call). Vectors of one embedder all have one dimension.
	ErrDimensionMismatch = errors.New("stepwise: vector dimension mismatch")
	// ErrNoVectors: a search names an embedder that has no stored vectors
	// (nothing was embedded yet, or it was embedded by another embedder).
	ErrNoVectors = errors.New("stepwise: no step vectors for this embedder")
)

// VectorStore is the part of Store that keeps step
// embeddings for similarity search (the step memory of package recall).
//
// Vectors live beside the steps, never in them: a step row is immutable, and
// one step may carry one vector per embedder. Every vector is tagged with the
// name of the embedder that produced it; the first vector of an embedder
// fixes its dimension, and a search only ever compares vectors of the
// embedder it names, so switching embedders never mixes vector spaces.
// Deleting a step (truncate, session delete, retention) deletes its vectors.
type VectorStore interface {
	// VectorUpsert stores one vector per step for an embedder, replacing a
	// vector the step already has for it. All or nothing: it fails with
	// ErrDimensionMismatch when a vector's length differs from the
	// embedder's dimension, ErrNotFound when a step does not exist (unless
	// SkipMissing), ErrInvalid for an empty embedder name, an empty, zero,
	// NaN or infinite vector. It returns how many vectors were written.
	VectorUpsert(ctx context.Context, p *VectorUpsertParams) (int, error)
	// VectorSearch returns the K stored steps most similar to p.Vector by
	// cosine similarity, best first, among the vectors of p.Embedder that
	// pass the filters. It fails with ErrNoVectors when the embedder has no
	// vector at all, ErrDimensionMismatch when len(p.Vector) differs from
	// its dimension, and ErrInvalid for K < 1 or a negative MaxDistance.
	// Finding nothing that passes the filters is an empty result, not an
	// error.
	VectorSearch(ctx context.Context, p *VectorSearchParams) ([]*VectorHit, error)
	// VectorMissing pages through stored steps that have no vector of
	// p.Embedder, in step id order, for backfills. Waiting steps (input
	// requests not answered yet) are never returned: they change when
	// answered.
	VectorMissing(ctx context.Context, p *VectorMissingParams) ([]*steptype.Step, error)
	// VectorCount reports, per embedder, its dimension and how many step
	// vectors it has; empty p.Embedder means every embedder, ordered by name.
	VectorCount(ctx context.Context, p *VectorCountParams) ([]*VectorTotal, error)
	// SupportsVectorIndex reports whether VectorSearch is served by an
	// approximate index inside the database rather than by an exact scan
	// of an in-process copy of the vectors. Every driver shipped today
	// (memory, SQLite, PostgreSQL) scans exactly and reports false: search
	// costs O(N·dim) per query over the embedder's N vectors. With an
	// index, results could be approximate and the filters applied after
	// the index scan, so a caller wanting exactly K filtered hits would
	// ask for more and cut.
	SupportsVectorIndex() bool
}

// StepVector is the vector of one step.
type StepVector struct {
	StepID string
	Vector []float32
}

// VectorUpsertParams are the parameters of VectorStore.VectorUpsert.
type VectorUpsertParams struct {
	// Embedder names the vector space, e.g. "lexical-v1:256" or
	// "openai:text-embedding-3-small". Required.
	Embedder string
	// Vectors to store; all of one length, the embedder's dimension.
	Vectors []StepVector
	// SkipMissing skips vectors whose step no longer exists (deleted while
	// it was being embedded) instead of failing the call.
	SkipMissing bool
	// Now stamps the rows; zero means time.Now().
	Now time.Time
}

// VectorSearchParams are the parameters of VectorStore.VectorSearch. The
// filters combine with AND; empty filters match everything.
type VectorSearchParams struct {
	// Embedder whose vectors are searched. Required.
	Embedder string
	// Vector is the query, of the embedder's dimension. It need not be
	// normalized.
	Vector []float32
	// K is how many hits to return at most; 1..MaxVectorK.
	K int
	// MaxDistance keeps only hits whose cosine distance (1 − cosine
	// similarity, in [0, 2]) is at most this. 0 means no limit.
	MaxDistance float64
	// Agent keeps steps of sessions whose agent is this one (a sub-agent's
	// steps belong to the session of the root agent that called it).
	Agent string
	// SessionIDs keeps steps stored in these sessions. A fork's inherited
	// steps are stored in its parent: list the parent to include them.
	SessionIDs []string
	// ExcludeRunIDs drops steps of these runs (e.g. the run searching).
	ExcludeRunIDs []string
	// Kinds keeps steps of these kinds.
	Kinds []steptype.Kind
	// After and Before keep steps committed at or after After and strictly
	// before Before; zero values are open ends.
	After, Before time.Time
}

// MaxVectorK bounds VectorSearchParams.K.
const MaxVectorK = 1000

// VectorHit is one search result.
type VectorHit struct {
	Step *steptype.Step
	// Distance is the cosine distance, 1 − cosine similarity: 0 for the
	// same direction, 1 for orthogonal, 2 for opposite.
	Distance float64
}

// VectorMissingParams are the parameters of VectorStore.VectorMissing.
type VectorMissingParams struct {
	// Embedder whose vectors are looked for. Required.
	Embedder string
	// Kinds keeps steps of these kinds; empty means every kind.
	Kinds []steptype.Kind
	// AfterID returns steps whose id sorts after it; "" starts at the
	// beginning. Pass the last id of a page to get the next.
	AfterID string
	// Limit is the page size; default 100, max 1000.
	Limit int
}

// VectorCountParams are the parameters of VectorStore.VectorCount.
type VectorCountParams struct {
	// Embedder restricts the count to one embedder; "" counts every one.
	Embedder string
}

// VectorTotal is what VectorCount reports for one embedder.
type VectorTotal struct {
	Embedder string `json:"embedder"`
	Dim      int    `json:"dim"`
	Count    int64  `json:"count"`
}
