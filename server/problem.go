package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
	"github.com/stepwise-run/stepwise/worker"
)

// ProblemTypePrefix prefixes the type URI of every problem; see
// wire.ProblemTypePrefix.
const ProblemTypePrefix = wire.ProblemTypePrefix

// Problem codes; see package wire, where they are defined once for the
// server and the client. They are stable: clients branch on them.
const (
	CodeNotFound         = wire.CodeNotFound
	CodeUnknownAgent     = wire.CodeUnknownAgent
	CodeConflict         = wire.CodeConflict
	CodeSessionBusy      = wire.CodeSessionBusy
	CodeAlreadyAnswered  = wire.CodeAlreadyAnswered
	CodeRunFinished      = wire.CodeRunFinished
	CodeNotWaiting       = wire.CodeNotWaiting
	CodeInvalidArgument  = wire.CodeInvalidArgument
	CodeInvalidAnswer    = wire.CodeInvalidAnswer
	CodeInvalidJSON      = wire.CodeInvalidJSON
	CodeInvalidParam     = wire.CodeInvalidParam
	CodeInvalidPosition  = wire.CodeInvalidPosition
	CodeBodyTooLarge     = wire.CodeBodyTooLarge
	CodeUnsupportedType  = wire.CodeUnsupportedType
	CodeUnauthorized     = wire.CodeUnauthorized
	CodeMethodNotAllowed = wire.CodeMethodNotAllowed
	CodeRouteNotFound    = wire.CodeRouteNotFound
	CodeUnavailable      = wire.CodeUnavailable
	CodeStorageFull      = wire.CodeStorageFull
	CodeStorageDown      = wire.CodeStorageDown
	CodeInternal         = wire.CodeInternal
)

// Problem is an RFC 9457 problem details object, the body of every error
// response (Content-Type application/problem+json).
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`
	// retryAfter, when set, is sent as the Retry-After header (seconds).
	retryAfter int
}

// Retry-After of the storage problems, in seconds: a full disk needs
// someone to make room, an unreachable database is often back in seconds.
const (
	retryAfterFull = 30
	retryAfterDown = 5
)

// apiError is an error the server raises itself (bad parameters, bodies).
type apiError struct {
	status int
	code   string
	detail string
}

// Error returns the detail.
func (e *apiError) Error() string { return e.detail }

func errorf(status int, code, format string, args ...any) error {
	return &apiError{status: status, code: code, detail: fmt.Sprintf(format, args...)}
}

func badParam(format string, args ...any) error {
	return errorf(http.StatusBadRequest, CodeInvalidParam, format, args...)
}

// problemOf maps an error to its problem: the one place where engine and
// store sentinels become HTTP statuses. Whatever it does not recognise is an
// internal error whose detail is not shown to the client. internal reports
// that the cause belongs in the server log: a server fault, or a store
// that is full or unavailable (503 with Retry-After).
func problemOf(err error) (p *Problem, internal bool) {
	var ae *apiError
	var tooBig *http.MaxBytesError
	status, code, detail := 0, "", err.Error()
	switch {
	case errors.As(err, &ae):
		status, code, detail = ae.status, ae.code, ae.detail
	case errors.As(err, &tooBig):
		status, code, detail = http.StatusRequestEntityTooLarge, CodeBodyTooLarge, fmt.Sprintf("request body larger than %d bytes", tooBig.Limit)
	case errors.Is(err, worker.ErrInvalidRequest):
		status, code = http.StatusBadRequest, CodeInvalidParam
	case errors.Is(err, worker.ErrTaskNotFound):
		status, code = http.StatusNotFound, wire.CodeTaskNotFound
	case errors.Is(err, worker.ErrNotServed):
		status, code = http.StatusNotFound, wire.CodeNotServed
	case errors.Is(err, worker.ErrLeaseLost):
		status, code = http.StatusConflict, wire.CodeLeaseLost
	case errors.Is(err, worker.ErrTaskFinished):
		status, code = http.StatusConflict, wire.CodeTaskFinished
	case errors.Is(err, worker.ErrInvalidResult):
		status, code = http.StatusUnprocessableEntity, wire.CodeInvalidResult
	case errors.Is(err, worker.ErrInvalidDefinition):
		status, code = http.StatusUnprocessableEntity, wire.CodeInvalidDefinition
	case errors.Is(err, stepwise.ErrInvalidAnswer):
		status, code = http.StatusUnprocessableEntity, CodeInvalidAnswer
	case errors.Is(err, stepwise.ErrAlreadyAnswered):
		status, code = http.StatusConflict, CodeAlreadyAnswered
	case errors.Is(err, stepwise.ErrRunFinished):
		status, code = http.StatusConflict, CodeRunFinished
	case errors.Is(err, stepwise.ErrNotWaiting):
		status, code = http.StatusConflict, CodeNotWaiting
	case errors.Is(err, stepwise.ErrUnknownAgent):
		status, code = http.StatusNotFound, CodeUnknownAgent
	case errors.Is(err, store.ErrNotFound):
		status, code = http.StatusNotFound, CodeNotFound
	case errors.Is(err, store.ErrSessionBusy):
		status, code = http.StatusConflict, CodeSessionBusy
	case errors.Is(err, store.ErrConflict):
		status, code = http.StatusConflict, CodeConflict
	case errors.Is(err, store.ErrInvalid):
		status, code = http.StatusUnprocessableEntity, CodeInvalidArgument
	case errors.Is(err, stepwise.ErrEngineClosed):
		status, code, detail = http.StatusServiceUnavailable, CodeUnavailable, "the server is shutting down"
	case errors.Is(err, store.ErrStorageFull):
		p := newProblem(http.StatusServiceUnavailable, CodeStorageFull, "the database has no room for this write (disk full); nothing was stored")
		p.retryAfter = retryAfterFull
		return p, true
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, store.ErrLocked):
		p := newProblem(http.StatusServiceUnavailable, CodeStorageDown, "the database is unreachable or did not answer in time; a write may or may not have been stored")
		p.retryAfter = retryAfterDown
		return p, true
	default:
		status, code, detail, internal = http.StatusInternalServerError, CodeInternal, "internal error; the cause is in the server log", true
	}
	return newProblem(status, code, detail), internal
}

// errStoreDeadline is the cause of a request context whose store deadline
// (Config.StoreTimeout) passed.
var errStoreDeadline = errors.New("stepwise server: store deadline passed")

// storeDeadlineErr returns err as store.ErrUnavailable when ctx ended
// because the request's store deadline passed, else err itself.
func storeDeadlineErr(ctx context.Context, err error) error {
	if err == nil || !errors.Is(context.Cause(ctx), errStoreDeadline) || errors.Is(err, store.ErrUnavailable) {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errStoreDeadline) {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

func newProblem(status int, code, detail string) *Problem {
	return &Problem{Type: ProblemTypePrefix + code, Title: http.StatusText(status), Status: status, Detail: detail, Code: code}
}

// writeProblem writes p as the response.
func writeProblem(w http.ResponseWriter, p *Problem) {
	body, _ := json.Marshal(p)
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("X-Content-Type-Options", "nosniff")
	if p.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(p.retryAfter))
	}
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}

// fail writes the problem of err and logs internal causes. A request whose
// client went away gets nothing.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && errors.Is(err, context.Canceled) {
		return
	}
	p, internal := problemOf(err)
	if internal {
		s.log.Error("stepwise server: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	} else {
		s.log.Debug("stepwise server: request refused", "method", r.Method, "path", r.URL.Path, "status", p.Status, "err", err)
	}
	writeProblem(w, p)
}
