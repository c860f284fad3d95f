package worker

import (
	"errors"
	"fmt"
)

// Errors of the service; package server maps each to its problem code
// (docs/workers.md).
var (
	// ErrInvalidRequest: a malformed request (an empty worker id, a
	// bound out of range). 400 invalid_parameter.
	ErrInvalidRequest = errors.New("stepwise: invalid worker request")
	// ErrTaskNotFound: no task of that id. 404 task_not_found.
	ErrTaskNotFound = errors.New("stepwise: task not found")
	// ErrLeaseLost: the token is not the task's current one. 409 lease_lost.
	ErrLeaseLost = errors.New("stepwise: task lease lost")
	// ErrTaskFinished: the task already has its outcome. 409 task_finished.
	ErrTaskFinished = errors.New("stepwise: task already finished")
	// ErrInvalidResult: a result the step or tool cannot take. 422
	// invalid_result.
	ErrInvalidResult = errors.New("stepwise: invalid task result")
	// ErrInvalidDefinition: an agent definition that does not build. 422
	// invalid_definition.
	ErrInvalidDefinition = errors.New("stepwise: invalid agent definition")
	// ErrNotServed: a poll names an agent no worker registered on this
	// server. 404 agent_not_served.
	ErrNotServed = errors.New("stepwise: agent not served by workers here")
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidRequest, fmt.Sprintf(format, args...))
}

func badResult(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidResult, fmt.Sprintf(format, args...))
}
