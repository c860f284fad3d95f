package rules

import (
	"slices"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// NewRun validates p and returns the run to insert: status defaults to
// queued, times to now.
func NewRun(p *store.RunCreateParams) (*steptype.Run, error) {
	if p == nil || p.Run == nil {
		return nil, Invalid("nil run")
	}
	r := CloneRun(p.Run)
	if r.ID == "" || r.SessionID == "" || r.Agent == "" {
		return nil, Invalid("run needs an id, a session id and an agent")
	}
	if p.Session != nil && p.Session.ID != r.SessionID {
		return nil, Invalid("run of session %q created with session %q", r.SessionID, p.Session.ID)
	}
	if r.Status == "" {
		r.Status = steptype.RunQueued
	}
	if !r.Status.Valid() {
		return nil, Invalid("unknown run status %q", r.Status)
	}
	if err := validJSON("run state", r.State); err != nil {
		return nil, err
	}
	if err := validJSON("run options", r.Options); err != nil {
		return nil, err
	}
	r.CreatedAt = Now(r.CreatedAt)
	if r.UpdatedAt.IsZero() {
		r.UpdatedAt = r.CreatedAt
	}
	r.UpdatedAt = r.UpdatedAt.UTC().Round(0)
	r.LeaseExpires = utc(r.LeaseExpires)
	r.FinishedAt = utc(r.FinishedAt)
	return r, nil
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Round(0)
}

// CloneRun returns a deep copy of r.
func CloneRun(r *steptype.Run) *steptype.Run {
	c := *r
	c.State = Raw(r.State)
	c.Options = Raw(r.Options)
	if r.Error != nil {
		e := *r.Error
		c.Error = &e
	}
	return &c
}

// CloneSession returns a deep copy of s.
func CloneSession(s *steptype.Session) *steptype.Session {
	c := *s
	c.Metadata = Raw(s.Metadata)
	return &c
}

// CheckRunUpdate validates p before anything is read.
func CheckRunUpdate(p *store.RunUpdateParams) error {
	if p == nil || p.ID == "" {
		return Invalid("run update needs a run id")
	}
	if p.Status != nil && !p.Status.Valid() {
		return Invalid("unknown run status %q", *p.Status)
	}
	for _, s := range p.ExpectStatus {
		if !s.Valid() {
			return Invalid("unknown expected run status %q", s)
		}
	}
	if err := validJSON("run state", p.State); err != nil {
		return err
	}
	return validJSON("run options", p.Options)
}

// UpdateRun checks the fences of p against r (lease owner, expected status)
// and applies p to r in place. Entering a terminal status sets FinishedAt.
// dbNow is the database's clock, from which p.LeaseFor counts.
func UpdateRun(r *steptype.Run, p *store.RunUpdateParams, dbNow time.Time) error {
	if p.Owner != "" && r.LeaseOwner != p.Owner {
		return Conflict("run %q is leased to %q, not %q", r.ID, r.LeaseOwner, p.Owner)
	}
	if len(p.ExpectStatus) > 0 && !slices.Contains(p.ExpectStatus, r.Status) {
		return Conflict("run %q is %s, expected one of %v", r.ID, r.Status, p.ExpectStatus)
	}
	now := Now(p.Now)
	if p.Status != nil {
		r.Status = *p.Status
		if r.Status.Terminal() && r.FinishedAt.IsZero() {
			r.FinishedAt = now
		}
	}
	if p.Cursor != nil {
		r.Cursor = *p.Cursor
	}
	if p.State != nil {
		r.State = Raw(p.State)
	}
	if p.Output != nil {
		r.Output = *p.Output
	}
	if p.ClearError {
		r.Error = nil
	}
	if p.Error != nil {
		e := *p.Error
		r.Error = &e
	}
	if p.Options != nil {
		r.Options = Raw(p.Options)
	}
	r.StepCount += p.StepDelta
	if p.LeaseExpires != nil {
		r.LeaseExpires = utc(*p.LeaseExpires)
	}
	if p.LeaseFor > 0 {
		r.LeaseExpires = utc(dbNow.Add(p.LeaseFor))
	}
	if p.ClearLease {
		r.LeaseOwner = ""
		r.LeaseExpires = time.Time{}
	}
	r.UpdatedAt = now
	return nil
}

// CheckClaim validates p and returns the claim limit and time.
func CheckClaim(p *store.RunClaimParams) (limit int, now time.Time, err error) {
	if p == nil || p.Owner == "" || p.Lease <= 0 {
		return 0, time.Time{}, Invalid("claim needs an owner and a positive lease")
	}
	if p.Limit < 0 {
		return 0, time.Time{}, Invalid("negative claim limit %d", p.Limit)
	}
	limit = p.Limit
	if limit == 0 {
		limit = 1
	}
	return limit, Now(p.Now), nil
}

// Claimable reports whether r can be claimed at now by p: it is queued, or
// running with an expired lease, and of one of p.Agents when given.
func Claimable(r *steptype.Run, p *store.RunClaimParams, now time.Time) bool {
	if len(p.Agents) > 0 && !slices.Contains(p.Agents, r.Agent) {
		return false
	}
	return r.Status == steptype.RunQueued ||
		(r.Status == steptype.RunRunning && !now.Before(r.LeaseExpires))
}

// Claim leases r to p.Owner until now+p.Lease and sets it running.
func Claim(r *steptype.Run, p *store.RunClaimParams, now time.Time) {
	r.Status = steptype.RunRunning
	r.LeaseOwner = p.Owner
	r.LeaseExpires = now.Add(p.Lease)
	r.UpdatedAt = now
}

// Requeue sets a waiting run whose input was answered back to queued and
// releases its lease; it reports whether r changed.
func Requeue(r *steptype.Run, now time.Time) bool {
	if r.Status != steptype.RunWaiting {
		return false
	}
	r.Status = steptype.RunQueued
	r.LeaseOwner = ""
	r.LeaseExpires = time.Time{}
	r.UpdatedAt = now
	return true
}

// CheckRunList validates RunList parameters.
func CheckRunList(p *store.RunListParams) error {
	if p == nil {
		return Invalid("nil run list params")
	}
	if p.Limit < 0 {
		return Invalid("negative run list limit %d", p.Limit)
	}
	for _, s := range p.Statuses {
		if !s.Valid() {
			return Invalid("unknown run status %q", s)
		}
	}
	return nil
}

// Counted returns u with its StepDelta less the steps of the same append
// that belong to u's run and were not inserted (their id was stored
// already): an idempotent re-append never counts a step twice. u itself is
// not modified.
func Counted(u *store.RunUpdateParams, steps []*steptype.Step, inserted func(i int) bool) *store.RunUpdateParams {
	if u.StepDelta <= 0 {
		return u
	}
	dups := int64(0)
	for i, s := range steps {
		if s.RunID == u.ID && !inserted(i) {
			dups++
		}
	}
	if dups == 0 {
		return u
	}
	c := *u
	c.StepDelta = max(u.StepDelta-dups, 0)
	return &c
}

// CheckRunLatest validates the parameters of LatestRunReader.RunLatest.
func CheckRunLatest(p *store.RunLatestParams) error {
	if p == nil {
		return Invalid("nil run latest params")
	}
	if len(p.SessionIDs) > store.MaxRunLatest {
		return Invalid("run latest: %d sessions, at most %d", len(p.SessionIDs), store.MaxRunLatest)
	}
	return nil
}

// CheckRunCount validates the parameters of RunCount: an agent is required.
func CheckRunCount(p *store.RunCountParams) error {
	if p == nil || p.Agent == "" {
		return Invalid("run count: agent is required")
	}
	return nil
}
