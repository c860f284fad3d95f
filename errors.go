package stepwise

import (
	"errors"

	"github.com/stepwise-run/stepwise/internal/runexec"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
)

// Sentinel errors. Store errors (store.ErrNotFound, store.ErrConflict…) are
// returned wrapped and can be tested with errors.Is as well. Those an API
// problem code stands for are package wire's, so that errors.Is matches a
// client's error against them.
var (
	ErrNotFound        = store.ErrNotFound
	ErrConflict        = store.ErrConflict
	ErrUnknownAgent    = wire.ErrUnknownAgent
	ErrUnknownStep     = errors.New("stepwise: unknown step")
	ErrInvalidState    = errors.New("stepwise: state update refused")
	ErrRunFinished     = wire.ErrRunFinished
	ErrRunCancelled    = runexec.ErrRunCancelled
	ErrMaxSteps        = errors.New("stepwise: step budget exhausted")
	ErrStepTimeout     = errors.New("stepwise: step timed out")
	ErrRunTimeout      = errors.New("stepwise: run timed out")
	ErrStepPanic       = runexec.ErrStepPanic
	ErrLeaseLost       = runexec.ErrLeaseLost
	ErrAlreadyAnswered = wire.ErrAlreadyAnswered
	ErrNotWaiting      = wire.ErrNotWaiting
	ErrInvalidAnswer   = wire.ErrInvalidAnswer
	ErrEngineClosed    = wire.ErrEngineClosed
)
