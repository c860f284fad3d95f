package rules

import (
	"bytes"
	"encoding/json"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// CheckSessionImport validates an imported session and returns it with its
// times normalized to UTC.
func CheckSessionImport(p *store.SessionImportParams) (*steptype.Session, error) {
	if p == nil || p.Session == nil || p.Session.ID == "" {
		return nil, Invalid("imported session needs an id")
	}
	s := CloneSession(p.Session)
	switch {
	case s.ForkSequence < 0 || s.LastSequence < s.ForkSequence:
		return nil, Invalid("imported session %q: fork sequence %d, last sequence %d", s.ID, s.ForkSequence, s.LastSequence)
	case (s.ParentSessionID == "") != (s.ForkSequence == 0):
		return nil, Invalid("imported session %q: a fork needs a parent and a fork sequence", s.ID)
	case s.CreatedAt.IsZero():
		return nil, Invalid("imported session %q has no creation time", s.ID)
	}
	if err := validJSON("session metadata", s.Metadata); err != nil {
		return nil, err
	}
	s.CreatedAt, s.UpdatedAt = utc(s.CreatedAt), utc(s.UpdatedAt)
	return s, nil
}

// CheckRunImport validates imported runs and returns normalized copies.
func CheckRunImport(p *store.RunImportParams) ([]*steptype.Run, error) {
	if p == nil {
		return nil, Invalid("nil run import params")
	}
	out := make([]*steptype.Run, 0, len(p.Runs))
	for i, r := range p.Runs {
		if r == nil || r.ID == "" || r.SessionID == "" || r.Agent == "" {
			return nil, Invalid("imported run %d needs an id, a session id and an agent", i)
		}
		if !r.Status.Valid() {
			return nil, Invalid("imported run %q has unknown status %q", r.ID, r.Status)
		}
		c := CloneRun(r)
		c.LeaseExpires, c.CreatedAt, c.UpdatedAt, c.FinishedAt = utc(c.LeaseExpires), utc(c.CreatedAt), utc(c.UpdatedAt), utc(c.FinishedAt)
		out = append(out, c)
	}
	return out, nil
}

// ImportedStep is a step to import with its stored body.
type ImportedStep struct {
	Step *steptype.Step
	Body []byte
}

// CheckStepImport validates imported steps and encodes their bodies.
func CheckStepImport(p *store.StepImportParams) ([]ImportedStep, error) {
	if p == nil {
		return nil, Invalid("nil step import params")
	}
	out := make([]ImportedStep, 0, len(p.Steps))
	for i, s := range p.Steps {
		if s == nil || s.ID == "" || s.SessionID == "" || s.Sequence < 1 {
			return nil, Invalid("imported step %d needs an id, a session id and a sequence", i)
		}
		if !s.Kind.Valid() || !validStepStatus(s.Status) {
			return nil, Invalid("imported step %q has kind %q, status %q", s.ID, s.Kind, s.Status)
		}
		c := *s
		c.CreatedAt = utc(c.CreatedAt)
		body, err := EncodeStep(&c)
		if err != nil {
			return nil, err
		}
		out = append(out, ImportedStep{Step: &c, Body: body})
	}
	return out, nil
}

// SameSession reports whether two session rows hold the same data.
func SameSession(a, b *steptype.Session) bool { return sameJSON(a, b) }

// SameRun reports whether two run rows hold the same data.
func SameRun(a, b *steptype.Run) bool { return sameJSON(a, b) }

func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// ImportConflict is the error of a row stored already with other content.
func ImportConflict(what, id string) error {
	return Conflict("%s %q is stored already with different data", what, id)
}

// Detach applies a SessionDetach to a fork row.
func Detach(s *steptype.Session, p *store.SessionDetachParams) {
	s.ParentSessionID, s.ForkSequence = "", 0
	s.InputTokens += p.InputTokens
	s.OutputTokens += p.OutputTokens
	s.Cost += p.Cost
}

// ExportLimit returns the page size of an export: def for 0, at most 1000.
func ExportLimit(limit, def int) (int, error) {
	switch {
	case limit < 0:
		return 0, Invalid("negative export limit %d", limit)
	case limit == 0:
		return def, nil
	case limit > 1000:
		return 1000, nil
	}
	return limit, nil
}
