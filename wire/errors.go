package wire

import (
	"errors"

	"github.com/stepwise-run/stepwise/store"
)

// The errors a problem code of the API stands for; the root package
// stepwise names the same values, so errors.Is matches a client's error
// against either.
var (
	ErrNotFound        = store.ErrNotFound
	ErrConflict        = store.ErrConflict
	ErrInvalid         = store.ErrInvalid
	ErrStorageFull     = store.ErrStorageFull
	ErrUnavailable     = store.ErrUnavailable
	ErrUnknownAgent    = errors.New("stepwise: unknown agent")
	ErrRunFinished     = errors.New("stepwise: run already finished")
	ErrAlreadyAnswered = errors.New("stepwise: input request already answered")
	ErrNotWaiting      = errors.New("stepwise: run is not waiting for input")
	ErrInvalidAnswer   = errors.New("stepwise: invalid answer")
	ErrEngineClosed    = errors.New("stepwise: engine closed")
)
