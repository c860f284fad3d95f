package tool

import (
	"errors"

	"github.com/stepwise-run/stepwise/steptype"
)

// ErrInvalidArguments is matched (with errors.Is) by every [*ArgumentError].
var ErrInvalidArguments = errors.New("stepwise: invalid tool arguments")

// ErrInvalidSchema reports a tool parameter schema that cannot be used for
// validation.
var ErrInvalidSchema = errors.New("stepwise: invalid tool schema")

// Transient marks err as transient: the engine retries the call with backoff
// (up to its retry limit) instead of showing the error to the model at once.
// The returned error wraps err (errors.Is and errors.As see through it) and
// reports its class with an ErrorClass method, which llm.Classify honours.
// Transient(nil) is nil.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &classifiedError{err: err, class: steptype.ErrorTransient}
}

// Permanent marks err as permanent: retrying cannot help, so the engine shows
// it to the model as an error result at once. Use it to stop the default
// classification from retrying an error that looks transient (a timeout the
// tool already retried, say). Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &classifiedError{err: err, class: steptype.ErrorPermanent}
}

// classifiedError is an error with an explicit retry class.
type classifiedError struct {
	err   error
	class steptype.ErrorClass
}

// Error returns the marked error's message unchanged.
func (e *classifiedError) Error() string { return e.err.Error() }

// Unwrap returns the marked error.
func (e *classifiedError) Unwrap() error { return e.err }

// ErrorClass reports the class the error was marked with.
func (e *classifiedError) ErrorClass() steptype.ErrorClass { return e.class }
