package stepwise

import (
	"errors"

	"github.com/stepwise-run/stepwise/store"
)

// Sentinel errors. Store errors (store.ErrNotFound, store.ErrConflict…) are
// returned wrapped and can be tested with errors.Is as well.
var (
	ErrNotFound        = store.ErrNotFound
	ErrConflict        = store.ErrConflict
	ErrUnknownAgent    = errors.New("stepwise: unknown agent")
	ErrUnknownStep     = errors.New("stepwise: unknown step")
	ErrInvalidState    = errors.New("stepwise: state update refused")
	ErrRunFinished     = errors.New("stepwise: run already finished")
	ErrRunCancelled    = errors.New("stepwise: run cancelled")
	ErrMaxSteps        = errors.New("stepwise: step budget exhausted")
	ErrStepTimeout     = errors.New("stepwise: step timed out")
	ErrRunTimeout      = errors.New("stepwise: run timed out")
	ErrStepPanic       = errors.New("stepwise: step panicked")
	ErrLeaseLost       = errors.New("stepwise: run lease lost to another owner")
	ErrAlreadyAnswered = errors.New("stepwise: input request already answered")
	ErrNotWaiting      = errors.New("stepwise: run is not waiting for input")
	ErrInvalidAnswer   = errors.New("stepwise: invalid answer")
	ErrEngineClosed    = errors.New("stepwise: engine closed")
)
