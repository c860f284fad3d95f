// Package rules holds the storage semantics every Stepwise store driver
// shares: parameter validation, defaults, how a run update is applied, how a
// fork lineage is cut into segments, and the session-list cursor. Drivers
// keep their own storage and SQL; they call these functions so that memory,
// SQLite and PostgreSQL agree by construction, and store/storetest checks it.
package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// ErrClosed is returned by every method of a closed store.
var ErrClosed = errors.New("stepwise: store closed")

// Session list limits.
const (
	DefaultSessionLimit = 50
	MaxSessionLimit     = 1000
)

// Now returns t, or the current time when t is zero, in UTC without a
// monotonic reading, so every driver stores and returns the same instant.
func Now(t time.Time) time.Time {
	if t.IsZero() {
		t = time.Now()
	}
	return t.UTC().Round(0)
}

// Invalid returns an error wrapping store.ErrInvalid.
func Invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", store.ErrInvalid, fmt.Sprintf(format, args...))
}

// NotFound returns an error wrapping store.ErrNotFound.
func NotFound(what, id string) error {
	return fmt.Errorf("%w: %s %q", store.ErrNotFound, what, id)
}

// Conflict returns an error wrapping store.ErrConflict.
func Conflict(format string, args ...any) error {
	return fmt.Errorf("%w: %s", store.ErrConflict, fmt.Sprintf(format, args...))
}

func validJSON(field string, b json.RawMessage) error {
	if len(b) > 0 && !json.Valid(b) {
		return Invalid("%s is not valid JSON", field)
	}
	return nil
}

// Raw returns a copy of b, or nil when b is empty.
func Raw(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return append(json.RawMessage(nil), b...)
}

// NewSession validates p and returns the session to insert.
func NewSession(p *store.SessionCreateParams) (*steptype.Session, error) {
	if p == nil || p.ID == "" {
		return nil, Invalid("session id is required")
	}
	if err := validJSON("session metadata", p.Metadata); err != nil {
		return nil, err
	}
	now := Now(p.Now)
	return &steptype.Session{
		ID: p.ID, Agent: p.Agent, Title: p.Title, Metadata: Raw(p.Metadata),
		CreatedAt: now, UpdatedAt: now,
	}, nil
}

// NewFork validates p against the parent session and returns the fork to
// insert: it inherits the parent's agent, and its metadata unless p has its
// own, and sees its steps 1..p.Sequence.
func NewFork(p *store.SessionForkParams, parent *steptype.Session) (*steptype.Session, error) {
	if p.Sequence < 1 || p.Sequence > parent.LastSequence {
		return nil, Invalid("fork sequence %d outside 1..%d of session %q", p.Sequence, parent.LastSequence, parent.ID)
	}
	if err := validJSON("fork metadata", p.Metadata); err != nil {
		return nil, err
	}
	meta := parent.Metadata
	if p.Metadata != nil {
		meta = p.Metadata
	}
	now := Now(p.Now)
	return &steptype.Session{
		ID: p.ID, Agent: parent.Agent, Title: p.Title, Metadata: Raw(meta),
		ParentSessionID: parent.ID, ForkSequence: p.Sequence, LastSequence: p.Sequence,
		CreatedAt: now, UpdatedAt: now,
	}, nil
}

// CheckFork validates the parameters of SessionFork that need no stored data.
func CheckFork(p *store.SessionForkParams) error {
	if p == nil || p.ID == "" || p.ParentID == "" {
		return Invalid("fork needs an id and a parent id")
	}
	if p.Sequence < 1 {
		return Invalid("fork sequence %d < 1", p.Sequence)
	}
	return nil
}

// CheckTruncate validates a truncation of s from p.StartSeq. Forks lists the
// fork sequences of the direct forks of s.
func CheckTruncate(p *store.StepTruncateParams, s *steptype.Session, forks []int64) error {
	if p.StartSeq < 1 {
		return Invalid("truncate start sequence %d < 1", p.StartSeq)
	}
	if p.StartSeq <= s.ForkSequence {
		return Invalid("truncate start sequence %d is inside the part of session %q inherited from %q (1..%d)",
			p.StartSeq, s.ID, s.ParentSessionID, s.ForkSequence)
	}
	for _, k := range forks {
		if k >= p.StartSeq {
			return Conflict("session %q has a fork at sequence %d >= %d", s.ID, k, p.StartSeq)
		}
	}
	return nil
}
