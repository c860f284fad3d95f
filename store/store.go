// Package store defines the seam between the Stepwise engine and its storage:
// one Store interface with noun-first methods taking params structs, the
// shared error sentinels every driver maps its native errors to, and the
// capability methods (Capabilities) through which dialect differences are
// declared.
//
// Drivers live in subpackages named after what they wrap: store/memory,
// store/sqlite, store/postgres. store/storetest is the conformance suite every
// driver runs in plain go test.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
)

// Shared sentinels. Drivers wrap them (fmt.Errorf("...: %w", ErrNotFound)) so
// callers test with errors.Is.
var (
	// ErrNotFound: the session, run or step does not exist.
	ErrNotFound = errors.New("stepwise: not found")
	// ErrConflict: the write contradicts what is stored (a sequence already
	// taken, a status that moved on, a lease held by another owner, a fork that
	// depends on steps being deleted).
	ErrConflict = errors.New("stepwise: conflict")
	// ErrInvalid: the parameters are malformed (fork at 0, empty ids…).
	ErrInvalid = errors.New("stepwise: invalid argument")
	// ErrLocked: the database is held by another process or is busy beyond
	// the driver's timeout.
	ErrLocked = errors.New("stepwise: database locked")
	// ErrCorrupt: the database file is not a readable Stepwise database.
	ErrCorrupt = errors.New("stepwise: database corrupt or not a stepwise database")
	// ErrStorageFull: the write needs room the storage does not have (a
	// full disk, SQLITE_FULL, PostgreSQL's disk_full). Nothing of the
	// write was stored; it can succeed once room is made.
	ErrStorageFull = errors.New("stepwise: storage full")
	// ErrUnavailable: the database cannot be reached or did not answer in
	// time (connection refused or lost, server shutting down, a store
	// deadline passed). A write that fails so may or may not have
	// committed; reads can be tried again.
	ErrUnavailable = errors.New("stepwise: storage unavailable")
	// ErrSessionBusy: the session already has an unfinished top-level run
	// (queued, running or waiting). It wraps ErrConflict.
	ErrSessionBusy = fmt.Errorf("%w: session has an unfinished run", ErrConflict)
)

// Store is the storage of sessions, steps and runs and of the data beside
// them (observations, vectors, checkpoints), and the whole contract of a
// driver: the engine, the server, evals and the CLI take it and call what
// they use, checked by the compiler. Every method is safe for
// concurrent use. Reads of a session read through its fork lineage: a fork at
// K of session P shows P's steps 1..K (with P's session id on them) followed
// by its own.
type Store interface {
	// SessionCreate inserts a new, empty session.
	SessionCreate(ctx context.Context, p *SessionCreateParams) (*steptype.Session, error)
	// SessionGet returns one session or ErrNotFound.
	SessionGet(ctx context.Context, p *SessionGetParams) (*steptype.Session, error)
	// SessionList pages through sessions, newest activity first.
	SessionList(ctx context.Context, p *SessionListParams) (*SessionPage, error)
	// SessionFork creates a session whose first p.Sequence steps are the
	// parent's, in O(1): nothing is copied. Fails with ErrInvalid when
	// Sequence is < 1 or beyond the parent's last sequence.
	SessionFork(ctx context.Context, p *SessionForkParams) (*steptype.Session, error)
	// SessionDelete deletes a session, its steps and its runs. Fails with
	// ErrConflict while another session is a fork of it.
	SessionDelete(ctx context.Context, p *SessionDeleteParams) error
	// SessionUpdate changes a session's metadata (a top-level merge, see
	// SessionUpdateParams) and title, sets its UpdatedAt, and returns it;
	// ErrNotFound for an unknown session, ErrInvalid for a patch that is
	// not a JSON object (nothing is changed).
	SessionUpdate(ctx context.Context, p *SessionUpdateParams) (*steptype.Session, error)

	// StepAppend commits steps, and optionally run updates, in one
	// transaction. Steps with Sequence 0 get the next sequence of their
	// session; a non-zero Sequence must equal that next sequence (else
	// ErrConflict). A step whose ID is already stored is not written again:
	// the stored row is returned in its place (idempotent append).
	StepAppend(ctx context.Context, p *StepAppendParams) ([]*steptype.Step, error)
	// StepList returns steps in sequence order.
	StepList(ctx context.Context, p *StepListParams) ([]*steptype.Step, error)
	// StepGet returns one step by id, or by session and sequence (lineage
	// aware), or ErrNotFound.
	StepGet(ctx context.Context, p *StepGetParams) (*steptype.Step, error)
	// StepLast returns the step with the highest sequence visible in a
	// session, or ErrNotFound when it has none.
	StepLast(ctx context.Context, p *StepLastParams) (*steptype.Step, error)
	// StepCount counts the steps visible in a session (lineage included).
	StepCount(ctx context.Context, p *StepCountParams) (int64, error)
	// StepTruncate deletes a session's own steps with sequence >= StartSeq
	// and returns how many were deleted. Fails with ErrConflict while a fork
	// of the session was made at a sequence >= StartSeq, and with ErrInvalid
	// when StartSeq is inside the inherited (parent) part of the lineage.
	StepTruncate(ctx context.Context, p *StepTruncateParams) (int64, error)
	// StepResolve moves a waiting step (a pending input request) to a final
	// status with its answer, in one transaction with its run: exactly one of
	// concurrent resolutions wins, the others get ErrConflict.
	StepResolve(ctx context.Context, p *StepResolveParams) (*steptype.Step, error)
	// StepExpiring returns waiting input steps whose request expires (see
	// InputExpiry) at or before p.Before, soonest first, from an index on
	// the expiry time.
	StepExpiring(ctx context.Context, p *StepExpiringParams) ([]*steptype.Step, error)

	// RunCreate inserts a run.
	RunCreate(ctx context.Context, p *RunCreateParams) (*steptype.Run, error)
	// RunGet returns one run or ErrNotFound.
	RunGet(ctx context.Context, p *RunGetParams) (*steptype.Run, error)
	// RunList returns runs matching the filters, newest first.
	RunList(ctx context.Context, p *RunListParams) ([]*steptype.Run, error)
	// RunClaim leases runnable runs to an owner: queued runs, and running
	// runs whose lease expired. Claimed runs have status running.
	RunClaim(ctx context.Context, p *RunClaimParams) ([]*steptype.Run, error)
	// RunUpdate changes a run, checking its lease owner and expected status
	// when given (ErrConflict if they do not match). A run entering a
	// terminal status closes its waiting steps in the same transaction.
	RunUpdate(ctx context.Context, p *RunUpdateParams) (*steptype.Run, error)
	// RunLeaseRenew extends, in one statement, the leases of the runs in
	// p.IDs that are still running and leased to p.Owner to the database's
	// now plus p.Lease, and returns the ids it renewed.
	RunLeaseRenew(ctx context.Context, p *RunLeaseRenewParams) ([]string, error)

	// The rest of the contract is grouped by area, each group an interface
	// of its own (documented method by method in its file) so that code
	// needing one area can say so in its signature. Every driver
	// implements every group: the compiler checks it, and store/storetest
	// checks the behaviour.

	// RunCounter counts an agent's runs by status (count.go).
	RunCounter
	// LatestRunReader finds the newest top-level run of many sessions
	// (count.go).
	LatestRunReader
	// StepOutliner reads steps without their bulky members (outline.go).
	StepOutliner
	// SessionStatsReader reads a session's totals (stats.go).
	SessionStatsReader
	// ContextCheckpointStore keeps the engine's context checkpoints
	// (checkpoint.go).
	ContextCheckpointStore
	// ObservationStore keeps evals, annotations, blobs, attachments, step
	// events, datasets and experiments (observe.go).
	ObservationStore
	// TaskStore keeps the tasks of worker processes (task.go).
	TaskStore
	// VectorStore keeps step embeddings for similarity search (vector.go).
	VectorStore
	// MetricsStore aggregates runs, steps and evals into time series
	// (metrics.go).
	MetricsStore
	// Importer writes rows verbatim, Exporter and VectorExporter list
	// them in a stable order (import.go): stepwise copy and retention.
	Importer
	Exporter
	VectorExporter

	// Capabilities (capability.go) declare what a driver can or cannot
	// do: they are methods of Store, so a store that wraps another by
	// embedding forwards them and one that does not must implement them:
	// a capability cannot be dropped silently.
	Capabilities

	// Close releases the store's resources.
	Close() error
}

// SessionCreateParams are the parameters of Store.SessionCreate.
type SessionCreateParams struct {
	ID       string // required, e.g. a UUIDv7
	Agent    string
	Title    string
	Metadata json.RawMessage
	Now      time.Time // zero means time.Now()
}

// SessionGetParams are the parameters of Store.SessionGet.
type SessionGetParams struct {
	ID string
}

// SessionListParams are the parameters of Store.SessionList.
type SessionListParams struct {
	Agent    string // only sessions of this agent
	ParentID string // only direct forks of this session
	Query    string // substring of id, title or agent
	// Metadata keeps the sessions whose metadata (a JSON object) has each
	// key with an equal value; values are strings, numbers, booleans or
	// null (else ErrInvalid).
	Metadata map[string]any
	Cursor   string // opaque, from SessionPage.Next
	Limit    int    // default 50, max 1000
}

// SessionPage is one page of sessions.
type SessionPage struct {
	Sessions []*steptype.Session
	Next     string // cursor of the next page, empty at the end
}

// SessionForkParams are the parameters of Store.SessionFork.
type SessionForkParams struct {
	ID       string // id of the new session, required
	ParentID string
	Sequence int64 // the fork keeps the parent's steps 1..Sequence
	Title    string
	// Metadata is the fork's metadata; nil inherits the parent's, so that
	// forks, retries and replays fall under the parent's values in analytics
	// split by a metadata key.
	Metadata json.RawMessage
	Now      time.Time
}

// SessionUpdateParams are the parameters of Store.SessionUpdate.
type SessionUpdateParams struct {
	ID string // required
	// Metadata, when set, is a JSON object merged into the session's
	// metadata at the top level: each key replaces the session's, a null
	// value removes it.
	Metadata json.RawMessage
	// Title, when set, replaces the title.
	Title *string
	Now   time.Time // zero means time.Now()
}

// SessionDeleteParams are the parameters of Store.SessionDelete.
type SessionDeleteParams struct {
	ID string
}

// StepAppendParams are the parameters of Store.StepAppend.
type StepAppendParams struct {
	Steps []*steptype.Step
	// Runs are applied in the same transaction as Steps. If one fails (lease
	// lost, unexpected status) nothing of the call is written.
	Runs []*RunUpdateParams
	// InPlace hands the steps over: on success the store may return a
	// given step itself, with what it placed set on it (Sequence, CreatedAt
	// and the normalization every stored step gets, so it equals what
	// StepGet reads back), instead of a fresh copy. It is for a caller that
	// built the steps for this call and reads only what is returned (when
	// every step is returned itself, the result may be the given slice). The
	// store never keeps a given step or any of its memory either way; a
	// step already stored under its id is returned as a copy of the stored
	// row, and a driver may ignore InPlace (returning copies). On error the
	// given steps are left unchanged.
	InPlace bool
}

// StepListParams are the parameters of Store.StepList. SessionID is required
// unless RunID or Status is given; in that case no lineage is followed.
type StepListParams struct {
	SessionID string
	StartSeq  int64 // inclusive; 0 means from the start
	EndSeq    int64 // inclusive; 0 means to the end
	RunID     string
	Status    steptype.StepStatus // only steps in this status
	Kinds     []steptype.Kind
	Limit     int // 0 means no limit
	Desc      bool
}

// StepGetParams are the parameters of Store.StepGet: ID, or SessionID and
// Sequence.
type StepGetParams struct {
	ID        string
	SessionID string
	Sequence  int64
}

// StepLastParams are the parameters of Store.StepLast.
type StepLastParams struct {
	SessionID string
}

// StepCountParams are the parameters of Store.StepCount.
type StepCountParams struct {
	SessionID string
}

// StepTruncateParams are the parameters of Store.StepTruncate.
type StepTruncateParams struct {
	SessionID string
	StartSeq  int64
	// KeepActivity leaves the session's activity time (UpdatedAt) as it
	// was: retention deletes an old session's steps in batches, and an
	// interrupted prune must not make the session look recently active.
	KeepActivity bool
}

// StepResolveParams are the parameters of Store.StepResolve.
type StepResolveParams struct {
	ID      string
	RunID   string // must match the step's run, else ErrNotFound
	Status  steptype.StepStatus
	Content string
	Outputs json.RawMessage
	Now     time.Time
	// QueueRun sets the run to queued (clearing its lease) when, after this
	// resolution, none of its steps is waiting any more and it is waiting.
	QueueRun bool
	// FailRun, when set, fails the step's run (if it is waiting) with this
	// error in the same transaction: the other waiting steps of the run
	// close with it. Used by input expiry.
	FailRun *steptype.StepError
}

// StepExpiringParams are the parameters of Store.StepExpiring.
type StepExpiringParams struct {
	Before time.Time // required
	Limit  int       // 0: no limit
}

// InputExpiry returns when the request of a waiting input step expires:
// the "expires_at" member (RFC 3339) of its Inputs, or the zero time.
func InputExpiry(s *steptype.Step) time.Time {
	if s.Kind != steptype.KindInput || s.Status != steptype.StepWaiting || len(s.Inputs) == 0 {
		return time.Time{}
	}
	var req struct {
		ExpiresAt time.Time `json:"expires_at"`
	}
	if json.Unmarshal(s.Inputs, &req) != nil {
		return time.Time{}
	}
	return req.ExpiresAt.UTC()
}

// RunCreateParams are the parameters of Store.RunCreate.
type RunCreateParams struct {
	Run *steptype.Run // ID, SessionID, Agent required; Status defaults to queued
	// LeaseFor, with Run.LeaseOwner set, leases the new run until the
	// database's now plus LeaseFor (Run.LeaseExpires is then ignored).
	LeaseFor time.Duration
	// Session, when set, creates the run's session (its ID must be
	// Run.SessionID) in the same transaction, first: both are written or
	// neither. A session that exists already fails with ErrConflict.
	Session *SessionCreateParams
}

// RunGetParams are the parameters of Store.RunGet.
type RunGetParams struct {
	ID string
}

// RunListParams are the parameters of Store.RunList.
type RunListParams struct {
	SessionID   string
	ParentRunID string
	Agent       string
	Statuses    []steptype.RunStatus
	Limit       int
}

// RunClaimParams are the parameters of Store.RunClaim.
type RunClaimParams struct {
	Owner string        // lease owner, required
	Lease time.Duration // lease length, required
	ID    string        // claim only this run
	Limit int           // max runs to claim; default 1
	// Agents, when set, restricts the claim to runs of these agents: an
	// instance claims only what it can execute.
	Agents []string
	// Now overrides the database's clock (tests, and the takeover of a
	// dead process's lease on an exclusive store); zero means database time.
	Now time.Time
}

// RunLeaseRenewParams are the parameters of Store.RunLeaseRenew.
type RunLeaseRenewParams struct {
	Owner string        // lease owner, required
	IDs   []string      // runs to renew
	Lease time.Duration // new lease length from the database's now, required
}

// RunUpdateParams change one run. Nil pointers leave a field unchanged.
type RunUpdateParams struct {
	ID           string
	Owner        string               // when set, the run's lease owner must equal it
	ExpectStatus []steptype.RunStatus // when set, the current status must be one of them
	Status       *steptype.RunStatus
	Cursor       *string
	State        json.RawMessage // new state snapshot; nil leaves it
	Output       *string
	Error        *steptype.StepError
	Options      json.RawMessage
	StepDelta    int64      // added to StepCount; in StepAppend, steps of this run that were stored already (an idempotent re-append) are not counted again
	LeaseExpires *time.Time // extend the lease
	// LeaseFor, when positive, sets the lease to expire at the database's
	// now plus LeaseFor (it wins over LeaseExpires).
	LeaseFor   time.Duration
	ClearLease bool // release the lease
	ClearError bool // remove the run's error (before Error is applied)
	Now        time.Time
}
