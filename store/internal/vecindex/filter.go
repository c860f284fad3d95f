package vecindex

import (
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// Filter is the compiled filter set of a VectorSearch.
type Filter struct {
	sessions map[string]bool // nil: any session
	runs     map[string]bool // excluded runs
	kinds    map[steptype.Kind]bool
	after    int64 // inclusive, 0: open
	before   int64 // exclusive, 0: open
	skip     map[string]bool
}

// NewFilter compiles the filters of p. agentSessions are the ids of the
// sessions of p.Agent, resolved by the driver (ignored when p.Agent is
// empty). It returns nil when nothing is filtered, and ok=false when no
// step can match (an agent without sessions, sessions outside the agent).
func NewFilter(p *store.VectorSearchParams, agentSessions []string) (f *Filter, ok bool) {
	f = &Filter{}
	set := false
	if p.Agent != "" {
		f.sessions = make(map[string]bool, len(agentSessions))
		for _, id := range agentSessions {
			f.sessions[id] = true
		}
		set = true
	}
	if len(p.SessionIDs) > 0 {
		want := make(map[string]bool, len(p.SessionIDs))
		for _, id := range p.SessionIDs {
			if f.sessions == nil || f.sessions[id] {
				want[id] = true
			}
		}
		f.sessions = want
		set = true
	}
	if f.sessions != nil && len(f.sessions) == 0 {
		return nil, false
	}
	if len(p.ExcludeRunIDs) > 0 {
		f.runs = make(map[string]bool, len(p.ExcludeRunIDs))
		for _, id := range p.ExcludeRunIDs {
			f.runs[id] = true
		}
		set = true
	}
	if len(p.Kinds) > 0 {
		f.kinds = make(map[steptype.Kind]bool, len(p.Kinds))
		for _, k := range p.Kinds {
			f.kinds[k] = true
		}
		set = true
	}
	if !p.After.IsZero() {
		f.after, set = p.After.UnixNano(), true
	}
	if !p.Before.IsZero() {
		f.before, set = p.Before.UnixNano(), true
	}
	if !set {
		return nil, true
	}
	return f, true
}

// Skip returns f also rejecting the given step ids (rows found deleted
// after the index was read). f may be nil.
func (f *Filter) Skip(ids map[string]bool) *Filter {
	if len(ids) == 0 {
		return f
	}
	var g Filter
	if f != nil {
		g = *f
	}
	g.skip = ids
	return &g
}

// Match reports whether e passes the filters.
func (f *Filter) Match(e *Entry) bool {
	if f.sessions != nil && !f.sessions[e.SessionID] {
		return false
	}
	if f.kinds != nil && !f.kinds[e.Kind] {
		return false
	}
	if f.after != 0 && e.Created < f.after {
		return false
	}
	if f.before != 0 && e.Created >= f.before {
		return false
	}
	if f.runs != nil && f.runs[e.RunID] {
		return false
	}
	return f.skip == nil || !f.skip[e.StepID]
}
