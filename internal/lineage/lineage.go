// Package lineage is what a session's forks make of it: the fork tree of
// a session, and the titles of the sessions derived from another (a fork,
// a retry, a replay), which name their source by its label, never by id.
package lineage

import (
	"context"
	"fmt"
	"strings"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
)

// Forks lists the direct forks of a session.
func Forks(ctx context.Context, st store.Store, sessionID string) ([]*steptype.Session, error) {
	if _, err := st.SessionGet(ctx, &store.SessionGetParams{ID: sessionID}); err != nil {
		return nil, fmt.Errorf("session %q: %w", sessionID, err)
	}
	var out []*steptype.Session
	cursor := ""
	for {
		page, err := st.SessionList(ctx, &store.SessionListParams{ParentID: sessionID, Cursor: cursor, Limit: 1000})
		if err != nil {
			return nil, err
		}
		out = append(out, page.Sessions...)
		if page.Next == "" {
			return out, nil
		}
		cursor = page.Next
	}
}

// Tree returns the fork tree rooted at the root ancestor of a session.
func Tree(ctx context.Context, st store.Store, sessionID string) (*wire.ForkTree, error) {
	s, err := st.SessionGet(ctx, &store.SessionGetParams{ID: sessionID})
	if err != nil {
		return nil, fmt.Errorf("session %q: %w", sessionID, err)
	}
	for s.ParentSessionID != "" {
		if s, err = st.SessionGet(ctx, &store.SessionGetParams{ID: s.ParentSessionID}); err != nil {
			return nil, err
		}
	}
	var build func(s *steptype.Session, depth int) (*wire.ForkTree, error)
	build = func(s *steptype.Session, depth int) (*wire.ForkTree, error) {
		t := &wire.ForkTree{Session: s}
		if depth > 64 {
			return t, nil
		}
		kids, err := Forks(ctx, st, s.ID)
		if err != nil {
			return nil, err
		}
		for _, k := range kids {
			kt, err := build(k, depth+1)
			if err != nil {
				return nil, err
			}
			t.Forks = append(t.Forks, kt)
		}
		return t, nil
	}
	return build(s, 0)
}

// DerivedTitle names a session made from another one by what it is, e.g.
// "retry of Plan a trip from #14": verb, the source's label, and where.
// A title the caller chose wins.
func DerivedTitle(ctx context.Context, st store.Store, chosen, verb string, src *steptype.Session, where string) string {
	if chosen != "" {
		return chosen
	}
	t := verb + " of " + label(ctx, st, src)
	if where != "" {
		t += " " + where
	}
	return t
}

// label is how a session is called in another's title: its
// chosen title, else the start of its first user message in quotes (also
// when its title is the one TitleOf gave it from that message), else
// "<agent> session"; never a raw id.
func label(ctx context.Context, st store.Store, s *steptype.Session) string {
	if s.LastSequence > 0 {
		first, err := st.StepGet(ctx, &store.StepGetParams{SessionID: s.ID, Sequence: 1})
		if err == nil && first.Kind == steptype.KindUser && strings.TrimSpace(first.Content) != "" &&
			(s.Title == "" || s.Title == TitleOf(first.Content)) {
			return fmt.Sprintf("%q", clipLabel(first.Content, 40))
		}
	}
	if s.Title != "" {
		return s.Title
	}
	if s.Agent != "" {
		return s.Agent + " session"
	}
	return "a session"
}

// TitleOf is the title a session gets from its first message when it is
// created without one: the message's start, on one line, at most 60
// characters. It is "" for a blank message.
func TitleOf(message string) string { return clipLabel(message, 60) }

// clipLabel shortens text to n runes on one line.
func clipLabel(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) > n {
		return strings.TrimRight(string(r[:n-1]), " ") + "…"
	}
	return s
}
