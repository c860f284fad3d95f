package stepwise

import (
	"context"
	"fmt"
	"strings"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// derivedTitle names a session made from another one by what it is, e.g.
// "retry of Plan a trip from #14": verb, the source's label, and where.
// A title the caller chose wins.
func (e *Engine) derivedTitle(ctx context.Context, chosen, verb string, src *Session, where string) string {
	if chosen != "" {
		return chosen
	}
	t := verb + " of " + e.sessionLabel(ctx, src)
	if where != "" {
		t += " " + where
	}
	return t
}

// sessionLabel is how a session is called in another's title: its title,
// else the start of its first user message, else "<agent> session"; never
// a raw id.
func (e *Engine) sessionLabel(ctx context.Context, s *Session) string {
	if s.Title != "" {
		return s.Title
	}
	if s.LastSequence > 0 {
		first, err := e.store.StepGet(ctx, &store.StepGetParams{SessionID: s.ID, Sequence: 1})
		if err == nil && first.Kind == steptype.KindUser && strings.TrimSpace(first.Content) != "" {
			return fmt.Sprintf("%q", clipLabel(first.Content, 40))
		}
	}
	if s.Agent != "" {
		return s.Agent + " session"
	}
	return "a session"
}

// clipLabel shortens text to n runes on one line.
func clipLabel(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
