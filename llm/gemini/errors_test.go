package gemini_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/gemini"
	"github.com/stepwise-run/stepwise/llm/llmtest"
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
			h:     llmtest.JSONError(429, `{"error": {"code": 429, "message": "You exceeded your current quota.", "status": "RESOURCE_EXHAUSTED", "details": [{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests"}]}, {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}]}}`),
			class: steptype.ErrorTransient, code: "rate_limited", status: "RESOURCE_EXHAUSTED", retryAfter: 7 * time.Second, msg: "You exceeded your current quota.",
		},
		"Retry-After header wins": {
			h:     llmtest.JSONError(429, `{"error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED", "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "40s"}]}}`, "Retry-After: 3"),
			class: steptype.ErrorTransient, code: "rate_limited", status: "RESOURCE_EXHAUSTED", retryAfter: 3 * time.Second,
		},
		"invalid key": {
			h:     llmtest.JSONError(400, `{"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.", "status": "INVALID_ARGUMENT", "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID", "domain": "googleapis.com"}]}}`),
			class: steptype.ErrorPermanent, code: "bad_request", status: "INVALID_ARGUMENT", msg: "API key not valid. Please pass a valid API key.",
		},
		"permission": {
			h:     llmtest.JSONError(403, `{"error": {"code": 403, "message": "Permission denied", "status": "PERMISSION_DENIED"}}`),
			class: steptype.ErrorPermanent, code: "auth", status: "PERMISSION_DENIED",
		},
		"overloaded": {
			h:     llmtest.JSONError(503, `{"error": {"code": 503, "message": "The model is overloaded. Please try again later.", "status": "UNAVAILABLE"}}`),
			class: steptype.ErrorTransient, code: "server_error", status: "UNAVAILABLE",
		},
		"array form": {
			h:     llmtest.JSONError(500, `[{"error": {"code": 500, "message": "Internal error", "status": "INTERNAL"}}]`),
			class: steptype.ErrorTransient, code: "server_error", status: "INTERNAL", msg: "Internal error",
		},
		"not JSON": {
			h:     llmtest.JSONError(502, `<html>Bad Gateway</html>`),
			class: steptype.ErrorTransient, code: "server_error", msg: "<html>Bad Gateway</html>",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := llmtest.NewServer(t, "", tc.h)
			d := llmtest.Drain(t.Context(), model(t, f), llmtest.UserRequest("?"))
			e := llmtest.AsError(t, d.Err)
			if e.Class != tc.class || e.Code != tc.code || e.RetryAfter != tc.retryAfter || (tc.msg != "" && e.Message != tc.msg) {
				t.Errorf("error %+v", e)
			}
			var api *gemini.APIError
			if !errors.As(d.Err, &api) || api.Status != tc.status || api.StatusCode != e.StatusCode {
				t.Errorf("cause %+v", api)
			}
			if llm.RetryAfter(d.Err) != tc.retryAfter || d.AfterEnd != 0 {
				t.Errorf("RetryAfter %v, %d values after the error", llm.RetryAfter(d.Err), d.AfterEnd)
			}
		})
	}
}

func TestHTTPErrorReason(t *testing.T) {
	t.Parallel()
	f := llmtest.NewServer(t, "", llmtest.JSONError(400, `{"error": {"code": 400, "message": "API key not valid.", "status": "INVALID_ARGUMENT", "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}]}}`))
	d := llmtest.Drain(t.Context(), model(t, f), llmtest.UserRequest("?"))
	var api *gemini.APIError
	if !errors.As(d.Err, &api) || api.Reason != "API_KEY_INVALID" || api.Error() != "gemini: 400 INVALID_ARGUMENT: API key not valid." {
		t.Errorf("cause %+v (%v)", api, api)
	}
}
