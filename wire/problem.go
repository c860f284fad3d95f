package wire

// ProblemTypePrefix prefixes the type URI of every problem: the type of a
// problem with code "not_found" is "urn:stepwise:problem:not_found".
const ProblemTypePrefix = "urn:stepwise:problem:"

// Problem is the body of an error response: RFC 9457 problem details with
// a stable code.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`
}

// Problem codes. They are stable: clients branch on them.
const (
	CodeNotFound         = "not_found"         // 404: no such session, run, step or request
	CodeUnknownAgent     = "unknown_agent"     // 404: no agent of that name
	CodeConflict         = "conflict"          // 409: the write contradicts what is stored
	CodeSessionBusy      = "session_busy"      // 409: the session already has an unfinished run
	CodeAlreadyAnswered  = "already_answered"  // 409: the input request was answered or expired
	CodeRunFinished      = "run_finished"      // 409: the run has already finished
	CodeNotWaiting       = "not_waiting"       // 409: the run is not waiting for input
	CodeInvalidArgument  = "invalid_argument"  // 422: well-formed request the engine refuses
	CodeInvalidAnswer    = "invalid_answer"    // 422: the answer does not satisfy the request
	CodeInvalidJSON      = "invalid_json"      // 400: malformed, unknown field, trailing data
	CodeInvalidParam     = "invalid_parameter" // 400: a bad query or path parameter
	CodeInvalidPosition  = "invalid_position"  // 400: a malformed Last-Event-ID or after
	CodeBodyTooLarge     = "body_too_large"    // 413
	CodeUnsupportedType  = "unsupported_media_type"
	CodeUnauthorized     = "unauthorized"        // 401
	CodeMethodNotAllowed = "method_not_allowed"  // 405
	CodeRouteNotFound    = "route_not_found"     // 404: no such endpoint
	CodeUnavailable      = "unavailable"         // 503: the engine is shutting down
	CodeStorageFull      = "storage_full"        // 503: the store has no room for the write
	CodeStorageDown      = "storage_unavailable" // 503: the store is unreachable or did not answer in time
	CodeInternal         = "internal"            // 500: the cause is in the server log
)
