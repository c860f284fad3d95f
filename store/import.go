package store

import (
	"context"
	"errors"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
)

// ErrNewerSchema: the database was migrated by a newer stepwise than the
// one opening it.
var ErrNewerSchema = errors.New("stepwise: database schema is newer than this stepwise")

// Importer is the part of Store that accepts rows verbatim:
// with the ids, sequences, totals and timestamps they had in another
// store. stepwise copy writes through it, and retention uses it to
// materialise a fork before its parent is deleted.
//
// Every method is idempotent: a row stored already with the same content
// is success and writes nothing, so an interrupted import can simply run
// again. A row stored under the same id (or, for steps, the same session
// and sequence) with different content fails with ErrConflict and nothing
// of the call is written.
type Importer interface {
	// SessionImport inserts a session row as given: parent, fork
	// sequence, last sequence, totals, metadata and timestamps. The parent
	// must be stored (ErrNotFound).
	SessionImport(ctx context.Context, p *SessionImportParams) error
	// RunImport inserts runs as given, all or nothing. Their sessions must
	// be stored (ErrNotFound).
	RunImport(ctx context.Context, p *RunImportParams) error
	// StepImport inserts steps as given (id, session, sequence, status,
	// timestamps), all or nothing, without touching the sessions' last
	// sequence or totals: SessionImport wrote those. A step of a fork at a
	// sequence up to its fork sequence is stored but not read until
	// SessionDetach cuts the lineage.
	StepImport(ctx context.Context, p *StepImportParams) error
	// SessionDetach cuts the lineage of a fork that holds its own copies
	// of steps 1..ForkSequence (ErrConflict when one is missing): the
	// session gets no parent and fork sequence 0, and the given totals of
	// the copied steps are added to its own. A session without parent is
	// left alone.
	SessionDetach(ctx context.Context, p *SessionDetachParams) error
}

// SessionImportParams are the parameters of Importer.SessionImport.
type SessionImportParams struct {
	Session *steptype.Session
}

// RunImportParams are the parameters of Importer.RunImport.
type RunImportParams struct {
	Runs []*steptype.Run
}

// StepImportParams are the parameters of Importer.StepImport.
type StepImportParams struct {
	Steps []*steptype.Step // ID, SessionID, Sequence > 0 required
}

// SessionDetachParams are the parameters of Importer.SessionDetach.
type SessionDetachParams struct {
	ID string
	// Totals of the steps copied into the session, added to its own.
	InputTokens, OutputTokens int64
	Cost                      float64
}

// Exporter is the part of Store that lists every session in
// a stable order, for copies and retention that must visit each session
// exactly once however sessions change activity meanwhile.
type Exporter interface {
	// SessionExport pages through all sessions in id order.
	SessionExport(ctx context.Context, p *SessionExportParams) ([]*steptype.Session, error)
}

// SessionExportParams are the parameters of Exporter.SessionExport.
type SessionExportParams struct {
	AfterID string // sessions whose id sorts after it; "" from the start
	Limit   int    // page size; default 100, max 1000
}

// VectorExporter is the part of Store that lists the stored vectors of a
// session, for copies.
type VectorExporter interface {
	// VectorExport pages through the vectors of the steps stored in a
	// session (not those it inherits), by step id then embedder.
	VectorExport(ctx context.Context, p *VectorExportParams) ([]*ExportedVector, error)
}

// VectorExportParams are the parameters of VectorExporter.VectorExport.
type VectorExportParams struct {
	SessionID string // required
	// AfterStepID and AfterEmbedder continue after the last vector of the
	// previous page.
	AfterStepID, AfterEmbedder string
	Limit                      int // page size; default 100, max 1000
}

// ExportedVector is one stored step vector.
type ExportedVector struct {
	Embedder  string
	StepID    string
	Vector    []float32
	CreatedAt time.Time
}
