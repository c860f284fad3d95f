package openai

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// callError converts the failure of the request that opens a stream.
func (m *Model) callError(ctx, callCtx context.Context, raw *http.Response, err error) error {
	if err == nil && raw.StatusCode >= 400 {
		return httpError(raw)
	}
	if cerr := m.cancelled(ctx, callCtx); cerr != nil {
		return cerr
	}
	return transportError(err)
}

// cancelled returns ctx's error, a per-call timeout error, or nil; see
// llm.Cancelled.
func (m *Model) cancelled(ctx, callCtx context.Context) error {
	return llm.Cancelled(ctx, callCtx, m.cfg.Timeout)
}

// transportError classifies a failure to get a response; see
// llm.TransportError.
func transportError(err error) *llm.Error { return llm.TransportError(err) }

// truncated is the error of a stream cut off before its end.
func truncated(err error) *llm.Error { return llm.Truncated("the response was complete", err) }

// APIError is the error a server answered with: the cause (errors.As) of
// the *llm.Error of a failed call.
type APIError struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Message, Type, Code and Param are the fields of the error object,
	// empty when the server did not send them; a numeric code is given
	// as its decimal text.
	Message, Type, Code, Param string
	// RequestID is the x-request-id header, if any.
	RequestID string
}

// Error returns the status and message.
func (e *APIError) Error() string {
	s := "openai: " + strconv.Itoa(e.StatusCode) + " " + http.StatusText(e.StatusCode)
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// httpError converts an error status and closes the body.
func httpError(raw *http.Response) *llm.Error {
	body, _ := io.ReadAll(io.LimitReader(raw.Body, 64<<10))
	_ = raw.Body.Close()
	f := parseError(body)
	apiErr := &APIError{StatusCode: raw.StatusCode, Message: strings.TrimSpace(f.msg), Type: f.typ, Code: f.code,
		Param: f.param, RequestID: raw.Header.Get("x-request-id")}
	e := llm.StatusError(raw.StatusCode, raw.Header, apiErr.Message, apiErr)
	if raw.StatusCode == http.StatusTooManyRequests && (f.code == "insufficient_quota" || f.typ == "insufficient_quota") {
		// OpenAI answers 429 when the account is out of credit: waiting
		// does not help.
		e.Class, e.Code = steptype.ErrorPermanent, "insufficient_quota"
	}
	return e
}

// streamedError converts an error the server sent inside the stream. A
// numeric code is read as an HTTP status; a request error is permanent;
// anything else is a server failure, transient.
func streamedError(raw string) *llm.Error {
	f := parseError([]byte(raw))
	msg, typ, code := f.msg, f.typ, f.code
	if msg == "" {
		msg = "error event in stream: " + raw
	}
	e := &llm.Error{Class: steptype.ErrorTransient, Code: "server_error", Message: msg}
	if n, err := strconv.Atoi(code); err == nil && n >= 400 && n < 600 {
		e.Class, e.Code = llm.ClassifyHTTP(n)
	} else if strings.Contains(strings.ToLower(typ), "invalid_request") || typ == "BadRequestError" {
		e.Class, e.Code = steptype.ErrorPermanent, "bad_request"
	}
	return e
}

// errorFields are the parts of an error body this package reads.
type errorFields struct{ msg, typ, code, param string }

// parseError reads the message, type, code and param of an error body in
// any of the shapes compatible servers use:
//
//	{"error": {"message": "...", "type": "...", "code": "..." | 400}}  OpenAI, Ollama, llama.cpp, LM Studio
//	{"error": "..."}                                                  some proxies
//	{"object": "error", "message": "...", "type": "...", "code": 400} vLLM
//	{"detail": "..."}                                                 FastAPI servers
//
// The message is the raw body, shortened, when none of them matches.
func parseError(body []byte) errorFields {
	type object struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
		Param   json.RawMessage `json:"param"`
	}
	var e struct {
		object
		Error  json.RawMessage `json:"error"`
		Detail json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &e) != nil {
		return errorFields{msg: shorten(string(body))}
	}
	if len(e.Error) > 0 && e.Error[0] == '"' {
		var msg string
		_ = json.Unmarshal(e.Error, &msg)
		return errorFields{msg: msg}
	}
	if len(e.Error) > 0 && e.Error[0] == '{' {
		var inner object
		if json.Unmarshal(e.Error, &inner) == nil {
			return errorFields{inner.Message, inner.Type, rawString(inner.Code), rawString(inner.Param)}
		}
	}
	if e.Message != "" {
		return errorFields{e.Message, e.Type, rawString(e.Code), rawString(e.Param)}
	}
	if len(e.Detail) > 0 {
		if rawString(e.Detail) != "" && e.Detail[0] == '"' {
			return errorFields{msg: rawString(e.Detail)}
		}
		return errorFields{msg: shorten(string(e.Detail))}
	}
	return errorFields{msg: shorten(string(body))}
}

// rawString returns a JSON string's value, or a number's text.
func rawString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	if t := strings.TrimSpace(string(raw)); t != "null" {
		return t
	}
	return ""
}

func shorten(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}
