// Package transfer copies a Stepwise database from one store driver to
// another, intact: sessions with their fork lineage (parents before
// forks), runs (unfinished ones stay resumable, their leases cleared),
// steps with their ids and sequences, observation data, blobs, datasets,
// experiments and step vectors.
//
// A copy streams each session's steps in pages, so memory stays bounded
// however large the database. It is idempotent: the destination accepts a
// row it already holds with the same content, so an interrupted copy runs
// again and continues, and a Checkpoint lets it skip the sessions it
// finished. A destination that holds different data under the same ids is
// refused. After each session is copied, it is read back from the
// destination and its counts and content hash compared.
package transfer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// Errors of a copy.
var (
	// ErrVerify: a copied session reads back different from its source.
	ErrVerify = errors.New("stepwise: copy verification failed")
)

// Options tune a copy.
type Options struct {
	// PageSize is how many steps are read and written per transaction;
	// default 500.
	PageSize int
	// Checkpoint records progress; nil copies everything (idempotently).
	Checkpoint Checkpoint
	// Progress, when set, is called after every page and session.
	Progress func(Progress)
	// Verified, when set, is called with the verification of every
	// session copied.
	Verified func(*SessionReport)
}

// Progress is the state of a running copy.
type Progress struct {
	Sessions, SessionsTotal int64
	Steps, StepsTotal       int64 // own steps of the sessions (a fork's inherited steps are its parent's)
	Session                 string
	Started                 time.Time
}

// SessionReport is the verification of one copied session: what was read
// from the source and what reads back from the destination.
type SessionReport struct {
	ID          string
	Source, Dst Digest
	OK          bool
}

// Report is the result of a copy.
type Report struct {
	Sessions     int64 // copied and verified by this call
	Skipped      int64 // done by an earlier, interrupted call (checkpoint)
	Steps        int64
	Datasets     int64
	Experiments  int64
	ResumedAfter string // the checkpoint's last session, when resuming
	Elapsed      time.Duration
}

// Copy copies every session of from into to. See the package doc.
func Copy(ctx context.Context, from, to store.Store, opts Options) (*Report, error) {
	return newCopier(from, to, opts).run(ctx)
}

type copier struct {
	from, to store.Store
	opts     Options
	prog     Progress
	rep      Report
	early    map[string]bool // sessions copied ahead of their turn (parents of forks)
}

func newCopier(from, to store.Store, opts Options) *copier {
	if opts.PageSize <= 0 {
		opts.PageSize = 500
	}
	return &copier{from: from, to: to, opts: opts, early: map[string]bool{}}
}

func (c *copier) run(ctx context.Context) (*Report, error) {
	c.prog.Started = time.Now()
	after := ""
	if c.opts.Checkpoint != nil {
		var err error
		if after, err = c.opts.Checkpoint.Load(); err != nil {
			return nil, err
		}
		c.rep.ResumedAfter = after
	}
	if err := c.count(ctx, after); err != nil {
		return nil, err
	}
	for {
		page, err := c.from.SessionExport(ctx, &store.SessionExportParams{AfterID: after, Limit: 200})
		if err != nil {
			return nil, fmt.Errorf("read sessions: %w", err)
		}
		if len(page) == 0 {
			break
		}
		for _, s := range page {
			if !c.early[s.ID] {
				if err := c.session(ctx, s, 0); err != nil {
					return nil, err
				}
			}
			delete(c.early, s.ID)
			after = s.ID
			if c.opts.Checkpoint != nil {
				if err := c.opts.Checkpoint.Save(after, false); err != nil {
					return nil, err
				}
			}
		}
	}
	if err := c.datasets(ctx); err != nil {
		return nil, err
	}
	if c.opts.Checkpoint != nil {
		if err := c.opts.Checkpoint.Save(after, true); err != nil {
			return nil, err
		}
	}
	c.rep.Elapsed = time.Since(c.prog.Started)
	return &c.rep, nil
}

// count totals the sessions and own steps still to copy, for progress,
// and refuses, before anything is written, a destination that holds a
// session under a source session's id with a different row (walking both
// stores in id order side by side).
func (c *copier) count(ctx context.Context, after string) error {
	dst := &cursor{exp: c.to}
	cur := ""
	for {
		page, err := c.from.SessionExport(ctx, &store.SessionExportParams{AfterID: cur, Limit: 1000})
		if err != nil {
			return fmt.Errorf("read sessions: %w", err)
		}
		if len(page) == 0 {
			return nil
		}
		for _, s := range page {
			old, err := dst.find(ctx, s.ID)
			if err != nil {
				return fmt.Errorf("read destination sessions: %w", err)
			}
			if old != nil && !sameJSON(old, s) {
				return conflict("session", s.ID)
			}
			if s.ID <= after {
				c.rep.Skipped++
				continue
			}
			c.prog.SessionsTotal++
			c.prog.StepsTotal += s.LastSequence - s.ForkSequence
		}
		cur = page[len(page)-1].ID
	}
}

// cursor walks a store's sessions in id order, to find those of ids asked
// for in increasing order without one query each.
type cursor struct {
	exp  store.Exporter
	page []*steptype.Session
	last string // id of the last session fetched
	done bool
}

// find returns the session id, or nil when the store has none.
func (k *cursor) find(ctx context.Context, id string) (*steptype.Session, error) {
	for {
		for len(k.page) > 0 && k.page[0].ID < id {
			k.page = k.page[1:]
		}
		switch {
		case len(k.page) > 0 && k.page[0].ID == id:
			return k.page[0], nil
		case len(k.page) > 0 || k.done:
			return nil, nil
		}
		page, err := k.exp.SessionExport(ctx, &store.SessionExportParams{AfterID: k.last, Limit: 1000})
		if err != nil {
			return nil, err
		}
		k.done = len(page) < 1000
		k.page = page
		if len(page) > 0 {
			k.last = page[len(page)-1].ID
		}
	}
}

func (c *copier) progress(sessionID string) {
	if c.opts.Progress != nil {
		p := c.prog
		p.Session = sessionID
		c.opts.Progress(p)
	}
}

// session copies one session, its parent first when the destination lacks
// it, and verifies it.
func (c *copier) session(ctx context.Context, s *steptype.Session, depth int) error {
	if s.ParentSessionID != "" {
		if err := c.parent(ctx, s.ParentSessionID, depth); err != nil {
			return err
		}
	}
	src, err := c.write(ctx, s)
	if err != nil {
		return fmt.Errorf("copy session %s: %w", s.ID, err)
	}
	dst, err := digest(ctx, c.to, s)
	if err != nil {
		return fmt.Errorf("verify session %s: %w", s.ID, err)
	}
	rep := &SessionReport{ID: s.ID, Source: *src, Dst: *dst, OK: src.Equal(dst)}
	if c.opts.Verified != nil {
		c.opts.Verified(rep)
	}
	if !rep.OK {
		return fmt.Errorf("%w: session %s: source %s, destination %s", ErrVerify, s.ID, src, dst)
	}
	c.rep.Sessions++
	c.rep.Steps += src.Steps
	c.prog.Sessions++
	c.progress(s.ID)
	return nil
}

// parent copies the parent of a fork ahead of its turn unless the
// destination holds it already.
func (c *copier) parent(ctx context.Context, id string, depth int) error {
	if c.early[id] {
		return nil
	}
	if _, err := c.to.SessionGet(ctx, &store.SessionGetParams{ID: id}); err == nil {
		return nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("read destination session %s: %w", id, err)
	}
	if depth > 10000 {
		return fmt.Errorf("%w: fork lineage of %s is deeper than 10000", store.ErrCorrupt, id)
	}
	p, err := c.from.SessionGet(ctx, &store.SessionGetParams{ID: id})
	if err != nil {
		return fmt.Errorf("read parent session %s: %w", id, err)
	}
	if err := c.session(ctx, p, depth+1); err != nil {
		return err
	}
	c.early[id] = true
	return nil
}
