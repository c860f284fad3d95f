package gemini_test

import (
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/gemini"
	"github.com/stepwise-run/stepwise/steptype"
)

func TestHTTPErrors(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		h          http.HandlerFunc
		class      steptype.ErrorClass
		code       string
		status     string
		retryAfter time.Duration
		msg        string
	}{
		"quota with RetryInfo": {
			h:     answer(429, `{"error": {"code": 429, "message": "You exceeded your current quota.", "status": "RESOURCE_EXHAUSTED", "details": [{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests"}]}, {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}]}}`),
			class: steptype.ErrorTransient, code: "rate_limited", status: "RESOURCE_EXHAUSTED", retryAfter: 7 * time.Second, msg: "You exceeded your current quota.",
		},
		"Retry-After header wins": {
			h:     answer(429, `{"error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED", "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "40s"}]}}`, "Retry-After: 3"),
			class: steptype.ErrorTransient, code: "rate_limited", status: "RESOURCE_EXHAUSTED", retryAfter: 3 * time.Second,
		},
		"invalid key": {
			h:     answer(400, `{"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.", "status": "INVALID_ARGUMENT", "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID", "domain": "googleapis.com"}]}}`),
			class: steptype.ErrorPermanent, code: "bad_request", status: "INVALID_ARGUMENT", msg: "API key not valid. Please pass a valid API key.",
		},
		"permission": {
			h:     answer(403, `{"error": {"code": 403, "message": "Permission denied", "status": "PERMISSION_DENIED"}}`),
			class: steptype.ErrorPermanent, code: "auth", status: "PERMISSION_DENIED",
		},
		"overloaded": {
			h:     answer(503, `{"error": {"code": 503, "message": "The model is overloaded. Please try again later.", "status": "UNAVAILABLE"}}`),
			class: steptype.ErrorTransient, code: "server_error", status: "UNAVAILABLE",
		},
		"array form": {
			h:     answer(500, `[{"error": {"code": 500, "message": "Internal error", "status": "INTERNAL"}}]`),
			class: steptype.ErrorTransient, code: "server_error", status: "INTERNAL", msg: "Internal error",
		},
		"not JSON": {
			h:     answer(502, `<html>Bad Gateway</html>`),
			class: steptype.ErrorTransient, code: "server_error", msg: "<html>Bad Gateway</html>",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tc.h)
			d := run(t.Context(), f.model(t), ask("?"))
			e := asLLMError(t, d.err)
			if e.Class != tc.class || e.Code != tc.code || e.RetryAfter != tc.retryAfter || (tc.msg != "" && e.Message != tc.msg) {
				t.Errorf("error %+v", e)
			}
			var api *gemini.APIError
			if !errors.As(d.err, &api) || api.Status != tc.status || api.StatusCode != e.StatusCode {
				t.Errorf("cause %+v", api)
			}
			if llm.RetryAfter(d.err) != tc.retryAfter || d.extra != 0 {
				t.Errorf("RetryAfter %v, %d values after the error", llm.RetryAfter(d.err), d.extra)
			}
		})
	}
}

func TestHTTPErrorReason(t *testing.T) {
	t.Parallel()
	f := newFake(t, answer(400, `{"error": {"code": 400, "message": "API key not valid.", "status": "INVALID_ARGUMENT", "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}]}}`))
	d := run(t.Context(), f.model(t), ask("?"))
	var api *gemini.APIError
	if !errors.As(d.err, &api) || api.Reason != "API_KEY_INVALID" || api.Error() != "gemini: 400 INVALID_ARGUMENT: API key not valid." {
		t.Errorf("cause %+v (%v)", api, api)
	}
}

func TestConnectionRefused(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	_ = l.Close()
	m, err := gemini.New(gemini.Config{Model: "m", BaseURL: url, APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	d := run(t.Context(), m, ask("?"))
	if e := asLLMError(t, d.err); e.Class != steptype.ErrorTransient || e.Code != "connection" {
		t.Errorf("error %+v", e)
	}
}
