package anthropic_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/anthropic"
	"github.com/stepwise-run/stepwise/llm/llmtest"
	"github.com/stepwise-run/stepwise/steptype"
)

func TestHTTPErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		handler    http.HandlerFunc
		class      steptype.ErrorClass
		code       string
		msg        string
		retryAfter time.Duration
	}{
		{
			name:    "429 Retry-After",
			handler: llmtest.JSONError(429, `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 50 input tokens per minute."},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`, "Retry-After: 17", "anthropic-ratelimit-input-tokens-remaining: 0"),
			class:   steptype.ErrorTransient, code: "rate_limited", msg: "would exceed the rate limit", retryAfter: 17 * time.Second,
		},
		{
			name:    "529 overloaded",
			handler: llmtest.JSONError(529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}`),
			class:   steptype.ErrorTransient, code: "server_error", msg: "Overloaded",
		},
		{
			name:    "500",
			handler: llmtest.JSONError(500, `{"type":"error","error":{"type":"api_error","message":"Internal server error"},"request_id":"req_1"}`),
			class:   steptype.ErrorTransient, code: "server_error", msg: "Internal server error",
		},
		{
			name: "503 HTML from a proxy",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				w.WriteHeader(503)
				_, _ = w.Write([]byte("<html><body>503 Service Temporarily Unavailable</body></html>"))
			},
			class: steptype.ErrorTransient, code: "server_error", msg: "503 Service Temporarily Unavailable",
		},
		{
			name:    "400",
			handler: llmtest.JSONError(400, `{"type":"error","error":{"type":"invalid_request_error","message":"messages.1.content.0.tool_use.input: Input should be a valid dictionary"},"request_id":"req_1"}`),
			class:   steptype.ErrorPermanent, code: "bad_request", msg: "messages.1.content.0.tool_use.input: Input should be a valid dictionary",
		},
		{
			name:    "401",
			handler: llmtest.JSONError(401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"req_1"}`),
			class:   steptype.ErrorPermanent, code: "auth", msg: "invalid x-api-key",
		},
		{
			name:    "403",
			handler: llmtest.JSONError(403, `{"type":"error","error":{"type":"permission_error","message":"Your API key does not have permission to use the specified resource."}}`),
			class:   steptype.ErrorPermanent, code: "auth", msg: "does not have permission",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := llmtest.NewServer(t, path, c.handler)
			r := llmtest.Drain(t.Context(), model(t, s), llmtest.UserRequest("hi"))
			e := llmtest.AsError(t, r.Err)
			if e.Class != c.class || e.Code != c.code || e.StatusCode == 0 || !strings.Contains(e.Message, c.msg) {
				t.Errorf("got class %s code %s status %d message %q", e.Class, e.Code, e.StatusCode, e.Message)
			}
			if llm.Classify(r.Err) != c.class || e.RetryAfter != c.retryAfter || llm.RetryAfter(r.Err) != c.retryAfter {
				t.Errorf("Classify %s, RetryAfter %v", llm.Classify(r.Err), e.RetryAfter)
			}
			if r.Final != nil || len(r.Partials) != 0 || r.AfterEnd != 0 {
				t.Errorf("values besides the error: %+v", r)
			}
			if n := s.Count(); n != 1 {
				t.Errorf("%d requests: the SDK retried", n)
			}
		})
	}
}

func TestHTTPErrorKeepsSDKError(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t, path, llmtest.JSONError(529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_42"}`, "request-id: req_42"))
	r := llmtest.Drain(t.Context(), model(t, s), llmtest.UserRequest("hi"))
	var apiErr *anthropic.APIError
	if !errors.As(r.Err, &apiErr) || apiErr.Type != "overloaded_error" || apiErr.RequestID != "req_42" {
		t.Errorf("cause %v", errors.Unwrap(r.Err))
	}
}

func TestStreamedErrors(t *testing.T) {
	t.Parallel()
	const head = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n"
	cases := []struct {
		name, stream string
		class        steptype.ErrorClass
		code, msg    string
		partials     int
	}{
		{"overloaded", string(llmtest.ReadTestdata(t, "overloaded.sse")), steptype.ErrorTransient, "server_error", "Overloaded", 1},
		{"api_error", head + "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"Internal server error\"}}\n\n", steptype.ErrorTransient, "server_error", "Internal server error", 0},
		{"rate limit", head + "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"Too many\"}}\n\n", steptype.ErrorTransient, "rate_limited", "Too many", 0},
		{"invalid request", head + "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"prompt is too long: 210000 tokens > 200000 maximum\"}}\n\n", steptype.ErrorPermanent, "bad_request", "prompt is too long", 0},
		{"unknown type, no event line", head + "data: {\"type\":\"error\",\"error\":{\"type\":\"something_new\",\"message\":\"?\"}}\n\n", steptype.ErrorTransient, "server_error", "?", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := llmtest.NewServer(t, path, llmtest.SSEBytes([]byte(c.stream)))
			r := llmtest.Drain(t.Context(), model(t, s), llmtest.UserRequest("hi"))
			e := llmtest.AsError(t, r.Err)
			if e.Class != c.class || e.Code != c.code || e.Message != c.msg && !strings.Contains(e.Message, c.msg) || e.StatusCode != 0 {
				t.Errorf("error %+v", e)
			}
			if len(r.Partials) != c.partials || r.Final != nil || r.AfterEnd != 0 {
				t.Errorf("%d partials, final %v", len(r.Partials), r.Final)
			}
		})
	}
}
