package retention

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// planned is what a prune will do: forks to materialise, then sessions to
// delete, forks before their parents.
type planned struct {
	del         []*steptype.Session
	materialize []*steptype.Session
	kept        []*Session
}

type planner struct {
	st       store.Store
	p        *Params
	all      map[string]*steptype.Session
	children map[string][]string
	busy     map[string]bool // sessions with an unfinished run, as checked
}

func plan(ctx context.Context, st store.Store, p *Params) (*planned, error) {
	pl := &planner{st: st, p: p, all: map[string]*steptype.Session{}, children: map[string][]string{}, busy: map[string]bool{}}
	if err := pl.load(ctx); err != nil {
		return nil, err
	}
	cands, err := pl.select_(ctx)
	if err != nil {
		return nil, err
	}
	out := &planned{}
	del := map[string]bool{}
	for _, s := range cands {
		busy, err := pl.unfinished(ctx, s.ID)
		if err != nil {
			return nil, err
		}
		if busy {
			out.kept = append(out.kept, reason(s, "it has an unfinished run"))
			continue
		}
		del[s.ID] = true
	}
	// A session goes only if each of its forks goes too, or may be
	// materialised (kept, and no run of it unfinished). Dropping one
	// session from the set can protect its own parent: repeat until
	// nothing changes.
	for changed := true; changed; {
		changed = false
		for _, s := range cands {
			if !del[s.ID] {
				continue
			}
			for _, f := range pl.children[s.ID] {
				if del[f] {
					continue
				}
				ok := false
				if p.MaterializeForks {
					busy, err := pl.unfinished(ctx, f)
					if err != nil {
						return nil, err
					}
					ok = !busy
				}
				if !ok {
					why := "kept fork " + f + " reads through it (--materialize-forks lets it go)"
					if p.MaterializeForks {
						why = "kept fork " + f + " reads through it and has an unfinished run"
					}
					out.kept = append(out.kept, reason(s, why))
					delete(del, s.ID)
					changed = true
					break
				}
			}
		}
	}
	for _, s := range cands {
		if del[s.ID] {
			out.del = append(out.del, s)
			for _, f := range pl.children[s.ID] {
				if !del[f] {
					out.materialize = append(out.materialize, pl.all[f])
				}
			}
		}
	}
	// Forks first: a session is deleted once none of its forks is left.
	slices.SortStableFunc(out.del, func(a, b *steptype.Session) int { return cmp.Compare(pl.depth(b), pl.depth(a)) })
	return out, nil
}

func reason(s *steptype.Session, why string) *Session {
	i := info(s)
	i.Reason = why
	return i
}

// load reads every session (without metadata) and the fork tree, in id
// order: a stable order however sessions change activity meanwhile.
func (pl *planner) load(ctx context.Context) error {
	after := ""
	for {
		page, err := pl.st.SessionExport(ctx, &store.SessionExportParams{AfterID: after, Limit: 1000})
		if err != nil {
			return fmt.Errorf("list sessions: %w", err)
		}
		if len(page) == 0 {
			return nil
		}
		for _, s := range page {
			s.Metadata = nil
			pl.all[s.ID] = s
			if s.ParentSessionID != "" {
				pl.children[s.ParentSessionID] = append(pl.children[s.ParentSessionID], s.ID)
			}
		}
		after = page[len(page)-1].ID
	}
}

// select_ returns the sessions the age, count, agent and status filters
// select, oldest activity first.
func (pl *planner) select_(ctx context.Context) ([]*steptype.Session, error) {
	p := pl.p
	byAgent := map[string][]*steptype.Session{}
	for _, s := range pl.all {
		byAgent[s.Agent] = append(byAgent[s.Agent], s)
	}
	if p.Agent != "" && len(byAgent[p.Agent]) == 0 {
		names := make([]string, 0, len(byAgent))
		for a := range byAgent {
			names = append(names, fmt.Sprintf("%q", a))
		}
		slices.Sort(names)
		return nil, fmt.Errorf("%w: unknown agent %q: no session has it (agents with sessions: %s)",
			store.ErrNotFound, p.Agent, strings.Join(names, ", "))
	}
	cutoff := p.Now.Add(-p.OlderThan)
	if p.Now.IsZero() {
		cutoff = timeNow().Add(-p.OlderThan)
	}
	var out []*steptype.Session
	for agent, list := range byAgent {
		if p.Agent != "" && agent != p.Agent {
			continue
		}
		slices.SortFunc(list, func(a, b *steptype.Session) int {
			if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
				return c
			}
			return strings.Compare(b.ID, a.ID)
		})
		for i, s := range list {
			if i < p.KeepPerAgent || (p.OlderThan > 0 && !s.UpdatedAt.Before(cutoff)) {
				continue
			}
			ok, err := pl.status(ctx, s.ID)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, s)
			}
		}
	}
	slices.SortFunc(out, func(a, b *steptype.Session) int {
		if c := a.UpdatedAt.Compare(b.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// status reports whether a session passes the status filter: its latest
// run ended in one of the statuses asked for.
func (pl *planner) status(ctx context.Context, id string) (bool, error) {
	if len(pl.p.Statuses) == 0 {
		return true, nil
	}
	runs, err := pl.st.RunList(ctx, &store.RunListParams{SessionID: id, Limit: 1})
	if err != nil || len(runs) == 0 {
		return false, err
	}
	return slices.Contains(pl.p.Statuses, runs[0].Status), nil
}

func (pl *planner) unfinished(ctx context.Context, id string) (bool, error) {
	if b, ok := pl.busy[id]; ok {
		return b, nil
	}
	b, err := unfinished(ctx, pl.st, id)
	pl.busy[id] = b
	return b, err
}

// depth is the length of a session's fork lineage.
func (pl *planner) depth(s *steptype.Session) int {
	d := 0
	for s != nil && s.ParentSessionID != "" && d < 1<<20 {
		d++
		s = pl.all[s.ParentSessionID]
	}
	return d
}
