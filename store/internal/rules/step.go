package rules

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// validStepStatus reports whether s is a known step status.
func validStepStatus(s steptype.StepStatus) bool {
	switch s {
	case steptype.StepCompleted, steptype.StepFailed, steptype.StepWaiting, steptype.StepExpired, steptype.StepCancelled:
		return true
	}
	return false
}

// CheckAppend validates the parameters of StepAppend before anything is read.
func CheckAppend(p *store.StepAppendParams) error {
	if p == nil {
		return Invalid("nil append params")
	}
	for i, s := range p.Steps {
		if s == nil {
			return Invalid("step %d is nil", i)
		}
		if s.ID == "" || s.SessionID == "" {
			return Invalid("step %d needs an id and a session id", i)
		}
		if !s.Kind.Valid() {
			return Invalid("step %q has unknown kind %q", s.ID, s.Kind)
		}
		if !validStepStatus(s.Status) {
			return Invalid("step %q has unknown status %q", s.ID, s.Status)
		}
		if s.Sequence < 0 {
			return Invalid("step %q has negative sequence %d", s.ID, s.Sequence)
		}
	}
	for _, r := range p.Runs {
		if err := CheckRunUpdate(r); err != nil {
			return err
		}
	}
	return nil
}

// PlaceStep returns the copy of s to store at sequence next of its session:
// Sequence 0 takes next, any other value must equal it (else ErrConflict). A
// zero CreatedAt becomes now; times are normalized to UTC.
func PlaceStep(s *steptype.Step, next int64, now time.Time) (*steptype.Step, error) {
	if s.Sequence != 0 && s.Sequence != next {
		return nil, Conflict("step %q asks for sequence %d of session %q, next is %d", s.ID, s.Sequence, s.SessionID, next)
	}
	c := *s
	c.Sequence = next
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now
	}
	c.CreatedAt = c.CreatedAt.UTC().Round(0)
	return &c, nil
}

// EncodeStep returns the stored body of a step: its wire JSON.
func EncodeStep(s *steptype.Step) ([]byte, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode step %q: %w", s.ID, err)
	}
	return b, nil
}

// DecodeStep reads a stored body.
func DecodeStep(b []byte) (*steptype.Step, error) {
	s := new(steptype.Step)
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("%w: decode stored step: %v", store.ErrCorrupt, err)
	}
	return s, nil
}

// AddTotals adds (sign +1) or removes (sign -1) a step's metrics to its
// session's totals.
func AddTotals(sess *steptype.Session, s *steptype.Step, sign int64) {
	sess.InputTokens += sign * s.Metrics.InputTokens
	sess.OutputTokens += sign * s.Metrics.OutputTokens
	sess.Cost += float64(sign) * s.Metrics.Cost
}

// CheckList validates StepList parameters; lineage reports whether the read
// follows the session's fork lineage (no RunID and no Status filter).
func CheckList(p *store.StepListParams) (lineage bool, err error) {
	if p == nil {
		return false, Invalid("nil list params")
	}
	if p.SessionID == "" && p.RunID == "" && p.Status == "" {
		return false, Invalid("step list needs a session id, a run id or a status")
	}
	if p.Status != "" && !validStepStatus(p.Status) {
		return false, Invalid("unknown step status %q", p.Status)
	}
	for _, k := range p.Kinds {
		if !k.Valid() {
			return false, Invalid("unknown step kind %q", k)
		}
	}
	if p.StartSeq < 0 || p.EndSeq < 0 || p.Limit < 0 {
		return false, Invalid("negative sequence bound or limit")
	}
	return p.RunID == "" && p.Status == "", nil
}

// MatchKinds reports whether k is in kinds, or kinds is empty.
func MatchKinds(kinds []steptype.Kind, k steptype.Kind) bool {
	if len(kinds) == 0 {
		return true
	}
	for _, x := range kinds {
		if x == k {
			return true
		}
	}
	return false
}

// CheckResolve validates StepResolve parameters.
func CheckResolve(p *store.StepResolveParams) error {
	if p == nil || p.ID == "" {
		return Invalid("resolve needs a step id")
	}
	if p.Status == steptype.StepWaiting || !validStepStatus(p.Status) {
		return Invalid("resolve to status %q: want completed, failed, expired or cancelled", p.Status)
	}
	return validJSON("resolve outputs", p.Outputs)
}

// Resolve checks that s can be resolved by p and applies it: the status, the
// content when not empty, the outputs when not nil.
func Resolve(s *steptype.Step, p *store.StepResolveParams) error {
	if p.RunID != "" && p.RunID != s.RunID {
		return NotFound("step of run "+p.RunID, p.ID)
	}
	if s.Status != steptype.StepWaiting {
		return Conflict("step %q is %s, not waiting", s.ID, s.Status)
	}
	s.Status = p.Status
	if p.Content != "" {
		s.Content = p.Content
	}
	if p.Outputs != nil {
		s.Outputs = Raw(p.Outputs)
	}
	return nil
}
