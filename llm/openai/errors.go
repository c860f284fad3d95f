package openai

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

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

// httpError converts an error status. The SDK has already read the body and
// put it back in raw.Body.
func httpError(raw *http.Response, sdkErr error) *llm.Error {
	body, _ := io.ReadAll(io.LimitReader(raw.Body, 64<<10))
	_ = raw.Body.Close()
	msg, typ, pcode := parseError(body)
	e := llm.StatusError(raw.StatusCode, raw.Header, strings.TrimSpace(msg), nil)
	if raw.StatusCode == http.StatusTooManyRequests && (pcode == "insufficient_quota" || typ == "insufficient_quota") {
		// OpenAI answers 429 when the account is out of credit: waiting
		// does not help.
		e.Class, e.Code = steptype.ErrorPermanent, "insufficient_quota"
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
