package rules

import (
	"fmt"
	"slices"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// unfinished are the statuses of a run that has not finished.
var unfinished = []steptype.RunStatus{steptype.RunQueued, steptype.RunRunning, steptype.RunWaiting}

// UnfinishedTop reports whether r counts against "at most one unfinished
// top-level run per session": hop 0 and not finished. The SQL drivers
// enforce the same predicate with a partial unique index.
func UnfinishedTop(r *steptype.Run) bool {
	return r.Hop == 0 && slices.Contains(unfinished, r.Status)
}

// SessionBusy is the error of a write that would give a session a second
// unfinished top-level run.
func SessionBusy(sessionID string) error {
	return fmt.Errorf("%w: session %q; answer, resume or cancel its run first", store.ErrSessionBusy, sessionID)
}

// Finishing reports whether an update moved a run from an unfinished
// status into a terminal one: its waiting steps must close with it.
func Finishing(old, r *steptype.Run) bool {
	return !old.Status.Terminal() && r.Status.Terminal()
}

// CloseWaiting closes a waiting step of run r, which has just finished:
// the request can no longer be answered, so it is cancelled with the run's
// reason.
func CloseWaiting(s *steptype.Step, r *steptype.Run) {
	s.Status = steptype.StepCancelled
	msg := "run " + string(r.Status)
	if r.Error != nil && r.Error.Message != "" {
		msg += ": " + r.Error.Message
	}
	s.Error = &steptype.StepError{Message: msg, Class: steptype.ErrorPermanent, Code: "run_" + string(r.Status)}
}

// Unfinished is the error of a truncation refused because run of the
// session has not finished.
func Unfinished(sessionID string, r *steptype.Run) error {
	return Conflict("session %q has an unfinished run %s (%s); cancel it or wait for it first", sessionID, r.ID, r.Status)
}

// FailWaiting fails a waiting run with serr (input expiry); it reports
// whether r changed.
func FailWaiting(r *steptype.Run, serr *steptype.StepError, now time.Time) bool {
	if r.Status != steptype.RunWaiting {
		return false
	}
	e := *serr
	r.Status, r.Error = steptype.RunFailed, &e
	r.LeaseOwner, r.LeaseExpires = "", time.Time{}
	r.UpdatedAt, r.FinishedAt = now, now
	return true
}

// CheckRenew validates RunLeaseRenew parameters.
func CheckRenew(p *store.RunLeaseRenewParams) error {
	if p == nil || p.Owner == "" || p.Lease <= 0 {
		return Invalid("lease renewal needs an owner and a positive lease")
	}
	return nil
}

// CheckExpiring validates StepExpiring parameters.
func CheckExpiring(p *store.StepExpiringParams) error {
	if p == nil || p.Before.IsZero() || p.Limit < 0 {
		return Invalid("expiring steps need a time and a non-negative limit")
	}
	return nil
}

// ExpiryNanos is the indexed expiry of a step: unix nanoseconds, 0 when it
// has none.
func ExpiryNanos(s *steptype.Step) int64 {
	t := store.InputExpiry(s)
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}
