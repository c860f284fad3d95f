package stepwise

import (
	"crypto/sha256"
	"github.com/stepwise-run/stepwise/internal/convo"
	"strconv"
)

// toolsRound is the bookkeeping of one tools step's calls.
type toolsRound struct {
	x           *execution
	remaining   int  // calls without a final outcome yet
	moved       bool // a commit moved the cursor on
	parked      bool
	deferCursor bool     // a call may park: the cursor moves at the end
	children    []string // child runs this run parks on
	approvals   []*Step  // input steps committed with the park
	firstErr    error
}

// handle commits what a call produced; it runs on the step's goroutine only.
func (r *toolsRound) handle(o *outcome) bool {
	if r.firstErr != nil {
		return false // drain
	}
	x := r.x
	var err error
	switch {
	case o.child != "":
		r.remaining--
		r.parked = true
		r.children = append(r.children, o.child)
	case o.park:
		// Committed at the end with the status change, in one
		// transaction, so an answer can never arrive before the run
		// is waiting.
		r.remaining--
		r.approvals = append(r.approvals, o.step)
		x.waiting[o.step.ToolCallID] = true
	case o.final:
		r.remaining--
		last := r.remaining == 0 && !r.deferCursor && len(r.approvals) == 0 && !x.anyWaiting()
		err = x.commitToolStep(o.step, o.completed, last)
		r.moved = r.moved || last
	default:
		err = x.commit([]*Step{o.step}, runUpdate{})
	}
	if err != nil {
		r.firstErr = err
	}
	return r.firstErr == nil
}

// idemSeed is what a tools step's idempotency keys derive from: the run and
// the sequence of the assistant message whose calls it executes.
type idemSeed struct {
	runID string
	seq   int64
	set   bool
}

// key is the idempotency key of call id: the hex of the first 16 bytes of
// sha256("<run id>:<sequence>:<call id>"), or of sha256(":<call id>")
// without an assistant message.
func (b idemSeed) key(callID string) string {
	var kb [128]byte
	k := kb[:0]
	if b.set {
		k = strconv.AppendInt(append(append(k, b.runID...), ':'), b.seq, 10)
	}
	k = append(append(k, ':'), callID...)
	return convo.Hex16(sha256.Sum256(k))
}
