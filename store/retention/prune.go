// Package retention deletes old sessions from a Stepwise store without
// breaking forks: a session that a kept fork still reads through its
// lineage is kept (or, when asked, the fork is materialised first: it gets
// its own copies of the steps it inherits and its lineage is cut), and a
// session with an unfinished run is never touched.
//
// Deletion is batched: a session's steps go a few hundred per transaction,
// newest first, through Store.StepTruncate, then the empty session with its
// runs through Store.SessionDelete; blobs nothing refers to any more go
// last. No transaction holds a lock for long, so running agents keep
// writing on SQLite and PostgreSQL alike while a large prune runs.
package retention

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// Params select what to prune. At least one of OlderThan and KeepPerAgent
// is required; given both, a session must satisfy both to go (it is older
// and not among its agent's KeepPerAgent newest).
type Params struct {
	// OlderThan selects sessions whose last activity is older than this.
	OlderThan time.Duration
	// KeepPerAgent selects all but the KeepPerAgent most recently active
	// sessions of each agent.
	KeepPerAgent int
	// Agent restricts pruning to the sessions of one agent; an agent that
	// no session has is an error.
	Agent string
	// Statuses restrict pruning to sessions whose latest run ended in one
	// of these statuses.
	Statuses []steptype.RunStatus
	// DryRun plans without deleting anything.
	DryRun bool
	// MaterializeForks lets a session go although a kept fork reads
	// through it: the fork is materialised first.
	MaterializeForks bool
	// BatchSize is how many steps one transaction deletes or copies;
	// default 200.
	BatchSize int
	// Now is the time ages are measured from; zero means time.Now().
	Now time.Time
}

// Validate checks p before anything is read.
func (p *Params) Validate() error {
	switch {
	case p.OlderThan < 0:
		return fmt.Errorf("%w: negative age %s: want a duration like 720h", store.ErrInvalid, p.OlderThan)
	case p.KeepPerAgent < 0:
		return fmt.Errorf("%w: negative keep count %d", store.ErrInvalid, p.KeepPerAgent)
	case p.OlderThan == 0 && p.KeepPerAgent == 0:
		return fmt.Errorf("%w: nothing selects sessions: give an age (older than) or a count to keep per agent", store.ErrInvalid)
	case p.BatchSize < 0:
		return fmt.Errorf("%w: negative batch size %d", store.ErrInvalid, p.BatchSize)
	}
	for _, s := range p.Statuses {
		if !s.Valid() {
			return fmt.Errorf("%w: unknown run status %q", store.ErrInvalid, s)
		}
		if !s.Terminal() {
			return fmt.Errorf("%w: run status %q is unfinished: sessions with unfinished runs are never pruned", store.ErrInvalid, s)
		}
	}
	return nil
}

// Session is one session of a plan.
type Session struct {
	ID        string    `json:"id"`
	Agent     string    `json:"agent"`
	Steps     int64     `json:"steps"` // own steps
	UpdatedAt time.Time `json:"updated_at"`
	// Reason says why a selected session is kept.
	Reason string `json:"reason,omitempty"`
}

// Result is what a prune deleted (or, on a dry run, would delete).
type Result struct {
	Deleted      []*Session `json:"deleted"`
	Kept         []*Session `json:"kept"`         // selected but kept, with the reason
	Materialized []*Session `json:"materialized"` // forks given their own steps first
	Steps        int64      `json:"steps"`        // steps deleted
	Copied       int64      `json:"copied"`       // steps copied into materialised forks
	Blobs        int64      `json:"blobs"`        // blobs deleted
	DryRun       bool       `json:"dry_run"`
}

// Prune deletes the sessions p selects. See the package doc.
func Prune(ctx context.Context, st store.Store, p Params) (*Result, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if p.BatchSize == 0 {
		p.BatchSize = 200
	}
	started := time.Now()
	pl, err := plan(ctx, st, &p)
	if err != nil {
		return nil, err
	}
	res := &Result{Kept: pl.kept, DryRun: p.DryRun}
	for _, f := range pl.materialize {
		res.Materialized = append(res.Materialized, info(f))
	}
	for _, s := range pl.del {
		res.Deleted = append(res.Deleted, info(s))
	}
	if p.DryRun {
		for _, s := range pl.del {
			res.Steps += s.LastSequence - s.ForkSequence
		}
		return res, nil
	}
	for _, f := range pl.materialize {
		n, err := Materialize(ctx, st, f.ID, p.BatchSize)
		res.Copied += n
		if err != nil {
			return res, fmt.Errorf("materialise fork %s: %w", f.ID, err)
		}
	}
	res.Deleted = res.Deleted[:0]
	for _, s := range pl.del {
		n, err := deleteSession(ctx, st, s, p.BatchSize)
		res.Steps += n
		switch {
		case errors.Is(err, store.ErrNotFound):
			// Deleted meanwhile (another instance pruning): gone all the same.
		case errors.Is(err, store.ErrConflict):
			// A fork or a run appeared since the plan: the session stays.
			res.Kept = append(res.Kept, reason(s, err.Error()))
			continue
		case err != nil:
			return res, fmt.Errorf("delete session %s: %w", s.ID, err)
		}
		res.Deleted = append(res.Deleted, info(s))
	}
	if len(pl.del) > 0 {
		n, err := st.BlobPrune(ctx, &store.BlobPruneParams{Before: started})
		res.Blobs = n
		if err != nil {
			return res, fmt.Errorf("prune blobs: %w", err)
		}
	}
	return res, nil
}

func info(s *steptype.Session) *Session {
	return &Session{ID: s.ID, Agent: s.Agent, Steps: s.LastSequence - s.ForkSequence, UpdatedAt: s.UpdatedAt}
}

// deleteSession deletes a session's own steps a batch at a time, newest
// first, then the session with its runs. It returns the steps deleted.
func deleteSession(ctx context.Context, st store.Store, s *steptype.Session, batch int) (int64, error) {
	var total int64
	cur, err := st.SessionGet(ctx, &store.SessionGetParams{ID: s.ID})
	if err != nil {
		return 0, err
	}
	if busy, err := unfinished(ctx, st, s.ID); err != nil || busy {
		if busy {
			err = fmt.Errorf("%w: a run started in it meanwhile", store.ErrConflict)
		}
		return 0, err
	}
	for last := cur.LastSequence; last > cur.ForkSequence; {
		start := max(cur.ForkSequence+1, last-int64(batch)+1)
		n, err := st.StepTruncate(ctx, &store.StepTruncateParams{SessionID: s.ID, StartSeq: start, KeepActivity: true})
		total += n
		if err != nil {
			return total, err
		}
		last = start - 1
	}
	return total, st.SessionDelete(ctx, &store.SessionDeleteParams{ID: s.ID})
}

// unfinished reports whether a session has a queued, running or waiting
// run.
func unfinished(ctx context.Context, st store.Store, id string) (bool, error) {
	runs, err := st.RunList(ctx, &store.RunListParams{SessionID: id, Limit: 1,
		Statuses: []steptype.RunStatus{steptype.RunQueued, steptype.RunRunning, steptype.RunWaiting}})
	return len(runs) > 0, err
}
