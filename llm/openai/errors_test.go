package openai_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/llmtest"
	"github.com/stepwise-run/stepwise/llm/openai"
	"github.com/stepwise-run/stepwise/steptype"
)

func TestHTTPErrors(t *testing.T) {
	t.Parallel()
	inAnHour := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	cases := []struct {
		name       string
		handler    http.HandlerFunc
		class      steptype.ErrorClass
		code       string
		msg        string
		retryAfter func(time.Duration) bool
	}{
		{
			name: "429 Retry-After seconds",
			handler: llmtest.JSONError(429, `{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-x on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
				"Retry-After: 20"),
			class: steptype.ErrorTransient, code: "rate_limited", msg: "Rate limit reached for gpt-4o-mini",
			retryAfter: func(d time.Duration) bool { return d == 20*time.Second },
		},
		{
			name:    "429 retry-after-ms wins",
			handler: llmtest.JSONError(429, `{"error":{"message":"slow down","type":"tokens","code":"rate_limit_exceeded"}}`, "Retry-After: 2", "retry-after-ms: 1500"),
			class:   steptype.ErrorTransient, code: "rate_limited", msg: "slow down",
			retryAfter: func(d time.Duration) bool { return d == 1500*time.Millisecond },
		},
		{
			name:    "429 Retry-After date",
			handler: llmtest.JSONError(429, `{"error":{"message":"slow down"}}`, "Retry-After: "+inAnHour),
			class:   steptype.ErrorTransient, code: "rate_limited", msg: "slow down",
			retryAfter: func(d time.Duration) bool { return d > 58*time.Minute && d <= time.Hour },
		},
		{
			name:    "429 insufficient quota",
			handler: llmtest.JSONError(429, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`),
			class:   steptype.ErrorPermanent, code: "insufficient_quota", msg: "You exceeded your current quota",
		},
		{
			name:    "500",
			handler: llmtest.JSONError(500, `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`),
			class:   steptype.ErrorTransient, code: "server_error", msg: "The server had an error",
		},
		{
			name: "502 HTML from a proxy",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				w.WriteHeader(502)
				_, _ = w.Write([]byte("<html><body><h1>502 Bad Gateway</h1></body></html>"))
			},
			class: steptype.ErrorTransient, code: "server_error", msg: "502 Bad Gateway",
		},
		{
			name:    "400",
			handler: llmtest.JSONError(400, `{"error":{"message":"Invalid value for 'temperature': expected a number between 0 and 2.","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}`),
			class:   steptype.ErrorPermanent, code: "bad_request", msg: "Invalid value for 'temperature': expected a number between 0 and 2.",
		},
		{
			name:    "401",
			handler: llmtest.JSONError(401, `{"error":{"message":"Incorrect API key provided: sk-test. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`),
			class:   steptype.ErrorPermanent, code: "auth", msg: "Incorrect API key provided: sk-test.",
		},
		{
			name:    "404 Ollama model",
			handler: llmtest.JSONError(404, `{"error":{"message":"model \"llama9\" not found, try pulling it first","type":"api_error","param":null,"code":null}}`),
			class:   steptype.ErrorPermanent, code: "not_found", msg: `model "llama9" not found`,
		},
		{
			name:    "400 vLLM",
			handler: llmtest.JSONError(400, `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","param":null,"code":400}`),
			class:   steptype.ErrorPermanent, code: "bad_request", msg: "maximum context length is 4096 tokens",
		},
		{
			name:    "400 llama.cpp",
			handler: llmtest.JSONError(400, `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}}`),
			class:   steptype.ErrorPermanent, code: "bad_request", msg: "exceeds the available context size",
		},
		{
			name:    "503 error string",
			handler: llmtest.JSONError(503, `{"error":"model is loading"}`),
			class:   steptype.ErrorTransient, code: "server_error", msg: "model is loading",
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
			if llm.Classify(r.Err) != c.class {
				t.Errorf("llm.Classify = %s", llm.Classify(r.Err))
			}
			if c.retryAfter != nil && !c.retryAfter(e.RetryAfter) || c.retryAfter == nil && e.RetryAfter != 0 {
				t.Errorf("RetryAfter %v", e.RetryAfter)
			}
			if llm.RetryAfter(r.Err) != e.RetryAfter {
				t.Errorf("llm.RetryAfter = %v", llm.RetryAfter(r.Err))
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
	s := llmtest.NewServer(t, path, llmtest.JSONError(400, `{"error":{"message":"bad","type":"invalid_request_error","param":"model","code":"model_not_found"}}`))
	r := llmtest.Drain(t.Context(), model(t, s), llmtest.UserRequest("hi"))
	var apiErr *openai.APIError
	if !errors.As(r.Err, &apiErr) || apiErr.Code != "model_not_found" || apiErr.Param != "model" {
		t.Errorf("cause %#v", errors.Unwrap(r.Err))
	}
}

func TestStreamedErrors(t *testing.T) {
	t.Parallel()
	const first = `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}` + "\n\n"
	cases := []struct {
		name, event string
		class       steptype.ErrorClass
		code, msg   string
	}{
		{"openai server error", `data: {"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`,
			steptype.ErrorTransient, "server_error", "The server had an error"},
		{"vllm bad request", `data: {"object":"error","message":"prompt too long","type":"BadRequestError","param":null,"code":400}`,
			steptype.ErrorPermanent, "bad_request", "prompt too long"},
		{"numeric code 503", `data: {"error":{"message":"overloaded","code":503}}`,
			steptype.ErrorTransient, "server_error", "overloaded"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := llmtest.NewServer(t, path, llmtest.SSEBytes([]byte(first+c.event+"\n\n"+"data: [DONE]\n\n")))
			r := llmtest.Drain(t.Context(), model(t, s), llmtest.UserRequest("hi"))
			e := llmtest.AsError(t, r.Err)
			if e.Class != c.class || e.Code != c.code || !strings.Contains(e.Message, c.msg) {
				t.Errorf("error %+v", e)
			}
			if len(r.Partials) != 1 || r.Final != nil || r.AfterEnd != 0 {
				t.Errorf("%d partials, final %v", len(r.Partials), r.Final)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		headers []string
		want    time.Duration
	}{
		{nil, 0},
		{[]string{"Retry-After: 3"}, 3 * time.Second},
		{[]string{"Retry-After: 0.5"}, 500 * time.Millisecond},
		{[]string{"Retry-After: 0"}, 0},
		{[]string{"Retry-After: -4"}, 0},
		{[]string{"Retry-After: soon"}, 0},
		{[]string{"Retry-After: Fri, 02 Jan 2026 03:05:05 GMT"}, time.Minute},
		{[]string{"Retry-After: Fri, 02 Jan 2026 03:04:00 GMT"}, 0}, // past
		{[]string{"Retry-After: 99999999999"}, 24 * time.Hour},
		{[]string{"retry-after-ms: 250"}, 250 * time.Millisecond},
		{[]string{"retry-after-ms: 12.5", "Retry-After: 9"}, 12500 * time.Microsecond},
		{[]string{"retry-after-ms: nope", "Retry-After: 9"}, 9 * time.Second},
	}
	for _, c := range cases {
		h := http.Header{}
		for _, kv := range c.headers {
			k, v, _ := strings.Cut(kv, ": ")
			h.Set(k, v)
		}
		if got := llm.ParseRetryAfter(h, now); got != c.want {
			t.Errorf("%v: %v, want %v", c.headers, got, c.want)
		}
	}
}
