package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// callError converts the failure of the request that opens a stream.
func (m *Model) callError(ctx, callCtx context.Context, raw *http.Response, err error) error {
	if raw != nil && raw.StatusCode >= 400 {
		return httpError(raw, err)
	}
	if cerr := m.cancelled(ctx, callCtx); cerr != nil {
		return cerr
	}
	if err == nil {
		err = errors.New("no response")
	}
	return transportError(err)
}

// cancelled returns ctx's own error when the caller cancelled (unchanged, as
// the llm.Model contract says), a transient "timeout" error when only
// Config.Timeout expired, and nil when neither context is done.
func (m *Model) cancelled(ctx, callCtx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if callCtx.Err() != nil {
		return &llm.Error{
			Class:   steptype.ErrorTransient,
			Code:    "timeout",
			Message: fmt.Sprintf("no complete response within %v", m.cfg.Timeout),
			Err:     context.DeadlineExceeded,
		}
	}
	return nil
}

// transportError classifies a failure to get a response at all. Refused and
// reset connections, timeouts and a connection closed before the response
// (io.EOF) are transient; anything else (bad URL, TLS, DNS) is permanent.
func transportError(err error) *llm.Error {
	class := llm.Classify(err)
	if errors.Is(err, io.EOF) {
		class = steptype.ErrorTransient
	}
	code := "connection"
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		code = "timeout"
	case class == steptype.ErrorPermanent:
		code = "request"
	}
	return &llm.Error{Class: class, Code: code, Message: err.Error(), Err: err}
}

// truncated is the error of a stream that ended before "data: [DONE]" or a
// finish reason: transient, since the next attempt is likely to complete.
func truncated(err error) *llm.Error {
	msg := "stream ended before the response was complete"
	if err != nil {
		msg += ": " + err.Error()
	}
	return &llm.Error{Class: steptype.ErrorTransient, Code: "stream_truncated", Message: msg, Err: err}
}

// httpError converts an error status. The SDK has already read the body and
// put it back in raw.Body.
func httpError(raw *http.Response, sdkErr error) *llm.Error {
	body, _ := io.ReadAll(io.LimitReader(raw.Body, 64<<10))
	_ = raw.Body.Close()
	class, code := llm.ClassifyHTTP(raw.StatusCode)
	msg, typ, pcode := parseError(body)
	if msg == "" {
		msg = strings.TrimSpace(http.StatusText(raw.StatusCode))
	}
	if raw.StatusCode == http.StatusTooManyRequests && (pcode == "insufficient_quota" || typ == "insufficient_quota") {
		// OpenAI answers 429 when the account is out of credit: waiting
		// does not help.
		class, code = steptype.ErrorPermanent, "insufficient_quota"
	}
	e := &llm.Error{
		Class:      class,
		StatusCode: raw.StatusCode,
		Code:       code,
		RetryAfter: llm.ParseRetryAfter(raw.Header, time.Now()),
		Message:    msg,
	}
	var apiErr *sdk.Error
	if errors.As(sdkErr, &apiErr) {
		e.Err = apiErr
	}
	return e
}

// streamedError converts an error the server sent inside the stream. A
// numeric code is read as an HTTP status; a request error is permanent;
// anything else is a server failure, transient.
func streamedError(raw string) *llm.Error {
	msg, typ, code := parseError([]byte(raw))
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

// parseError reads the message, type and code of an error body in any of
// the shapes compatible servers use:
//
//	{"error": {"message": "...", "type": "...", "code": "..." | 400}}  OpenAI, Ollama, llama.cpp, LM Studio
//	{"error": "..."}                                                  some proxies
//	{"object": "error", "message": "...", "type": "...", "code": 400} vLLM
//	{"detail": "..."}                                                 FastAPI servers
//
// The message is the raw body, shortened, when none of them matches.
func parseError(body []byte) (msg, typ, code string) {
	var e struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &e) != nil {
		return shorten(string(body)), "", ""
	}
	if len(e.Error) > 0 && e.Error[0] == '"' {
		_ = json.Unmarshal(e.Error, &msg)
		return msg, "", ""
	}
	if len(e.Error) > 0 && e.Error[0] == '{' {
		var inner struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Code    json.RawMessage `json:"code"`
		}
		if json.Unmarshal(e.Error, &inner) == nil {
			return inner.Message, inner.Type, rawString(inner.Code)
		}
	}
	if e.Message != "" {
		return e.Message, e.Type, rawString(e.Code)
	}
	if len(e.Detail) > 0 {
		if rawString(e.Detail) != "" && e.Detail[0] == '"' {
			return rawString(e.Detail), "", ""
		}
		return shorten(string(e.Detail)), "", ""
	}
	return shorten(string(body)), "", ""
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
