package bedrock

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// exceptionStatus maps the Converse exceptions to the HTTP status they
// come with, to classify an exception inside a stream, and, for the
// retryable ones that come with a 4xx, to override the status class.
var exceptionStatus = map[string]int{
	"ValidationException":           400,
	"ServiceQuotaExceededException": 400,
	"UnrecognizedClientException":   403,
	"AccessDeniedException":         403,
	"ExpiredTokenException":         403,
	"ResourceNotFoundException":     404,
	"ModelTimeoutException":         408,
	"ModelErrorException":           424,
	"ThrottlingException":           429,
	"ModelNotReadyException":        429,
	"InternalServerException":       500,
	"ModelStreamErrorException":     424,
	"ServiceUnavailableException":   503,
}

// transientTypes are retried whatever their status: the model failed or
// was not ready, which another attempt can fix.
var transientTypes = map[string]bool{
	"ModelErrorException":       true,
	"ModelNotReadyException":    true,
	"ModelStreamErrorException": true,
	"ModelTimeoutException":     true,
}

// APIError is the exception the API answered with: the cause (errors.As)
// of the *llm.Error of a failed call.
type APIError struct {
	// StatusCode is the HTTP status (for an exception inside a stream,
	// the status it comes with otherwise).
	StatusCode int
	// Type is the exception, e.g. "ThrottlingException"; empty when the
	// response named none.
	Type string
	// Message is the exception's message.
	Message string
	// RequestID is the x-amzn-RequestId header.
	RequestID string
}

// Error returns the status, type and message.
func (e *APIError) Error() string {
	s := "bedrock: " + strconv.Itoa(e.StatusCode)
	if e.Type != "" {
		s += " " + e.Type
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// callError converts the failure of the request that opens a stream.
func (m *Model) callError(ctx, callCtx context.Context, raw *http.Response, err error) error {
	if err == nil && raw.StatusCode >= 400 {
		return httpError(raw)
	}
	if cerr := m.cancelled(ctx, callCtx); cerr != nil {
		return cerr
	}
	var le *llm.Error
	if errors.As(err, &le) {
		return le // no credentials
	}
	return llm.TransportError(err)
}

// cancelled returns ctx's error, a per-call timeout error, or nil; see
// llm.Cancelled.
func (m *Model) cancelled(ctx, callCtx context.Context) error {
	return llm.Cancelled(ctx, callCtx, m.cfg.Timeout)
}

// httpError converts an error status and closes the body: classified by
// llm.ClassifyHTTP, except that the model's own failures are transient.
func httpError(raw *http.Response) *llm.Error {
	body, _ := io.ReadAll(io.LimitReader(raw.Body, 64<<10))
	_ = raw.Body.Close()
	msg, typ := parseError(body)
	if h := raw.Header.Get("X-Amzn-Errortype"); h != "" {
		typ, _, _ = strings.Cut(h, ":")
	}
	apiErr := &APIError{StatusCode: raw.StatusCode, Type: typ, Message: msg, RequestID: raw.Header.Get("X-Amzn-Requestid")}
	e := llm.StatusError(raw.StatusCode, raw.Header, msg, apiErr)
	e.Class, e.Code = classify(raw.StatusCode, typ)
	return e
}

// classify is llm.ClassifyHTTP, except that the model's own failures are
// transient, with Code "model_error".
func classify(status int, typ string) (steptype.ErrorClass, string) {
	if transientTypes[typ] {
		return steptype.ErrorTransient, "model_error"
	}
	return llm.ClassifyHTTP(status)
}

// refusesStreamedTools reports whether err is the ValidationException of a
// model that does not take tools in converse-stream ("This model doesn't
// support tool use in streaming mode.").
func refusesStreamedTools(err error) bool {
	var api *APIError
	if !errors.As(err, &api) || api.StatusCode != http.StatusBadRequest || api.Type != "ValidationException" && api.Type != "" {
		return false
	}
	msg := strings.ToLower(api.Message)
	return strings.Contains(msg, "streaming mode") && strings.Contains(msg, "tool")
}

// exceptionError converts an exception inside a stream, classified as if
// it had come with its HTTP status; an unknown one is a server failure.
func exceptionError(typ string, payload []byte) *llm.Error {
	msg, _ := parseError(payload)
	if typ != "" {
		// A stream names the exception by its event member,
		// "throttlingException"; the shape is "ThrottlingException".
		typ = strings.ToUpper(typ[:1]) + typ[1:]
	}
	status, ok := exceptionStatus[typ]
	if !ok {
		status = http.StatusInternalServerError
	}
	class, code := classify(status, typ)
	if msg == "" {
		msg = "exception in stream"
	}
	return &llm.Error{Class: class, Code: code, Message: msg, Err: &APIError{StatusCode: status, Type: typ, Message: msg}}
}

// parseError reads an exception body, {"message": "…"} (or "Message"),
// with the type in "__type" when the header does not name it. The message
// is the raw body, shortened, when it has another shape.
func parseError(body []byte) (msg, typ string) {
	var e struct {
		Message  string `json:"message"`
		MessageU string `json:"Message"`
		Type     string `json:"__type"`
	}
	if json.Unmarshal(body, &e) == nil {
		if e.Message == "" {
			e.Message = e.MessageU
		}
		if i := strings.LastIndexByte(e.Type, '#'); i >= 0 {
			e.Type = e.Type[i+1:]
		}
		if e.Message != "" || e.Type != "" {
			return e.Message, e.Type
		}
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s, ""
}
