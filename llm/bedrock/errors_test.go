package bedrock_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/bedrock"
	"github.com/stepwise-run/stepwise/llm/llmtest"
	"github.com/stepwise-run/stepwise/steptype"
)

func TestHTTPErrors(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		status     int
		body       string
		headers    []string
		class      steptype.ErrorClass
		code, typ  string
		retryAfter time.Duration
	}{
		"throttled": {429, `{"message":"Too many requests, please wait before trying again."}`, []string{"X-Amzn-Errortype: ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/", "X-Amzn-Requestid: 7f1c"},
			steptype.ErrorTransient, "rate_limited", "ThrottlingException", 0},
		"throttled with Retry-After": {429, `{"message":"slow down"}`, []string{"X-Amzn-Errortype: ThrottlingException", "Retry-After: 2"},
			steptype.ErrorTransient, "rate_limited", "ThrottlingException", 2 * time.Second},
		"validation": {400, `{"message":"The model returned the following errors: messages: roles must alternate"}`, []string{"X-Amzn-Errortype: ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"},
			steptype.ErrorPermanent, "bad_request", "ValidationException", 0},
		"access denied, type in body": {403, `{"__type":"com.amazon.coral.service#AccessDeniedException","Message":"You don't have access to the model with the specified model ID."}`, nil,
			steptype.ErrorPermanent, "auth", "AccessDeniedException", 0},
		"model not ready": {429, `{"message":"Model is not ready"}`, []string{"X-Amzn-Errortype: ModelNotReadyException"},
			steptype.ErrorTransient, "model_error", "ModelNotReadyException", 0},
		"model error": {424, `{"message":"The model failed"}`, []string{"X-Amzn-Errortype: ModelErrorException"},
			steptype.ErrorTransient, "model_error", "ModelErrorException", 0},
		"unavailable": {503, `{"message":"Service unavailable"}`, []string{"X-Amzn-Errortype: ServiceUnavailableException"},
			steptype.ErrorTransient, "server_error", "ServiceUnavailableException", 0},
		"not found": {404, `{"message":"Could not resolve the foundation model from the provided model identifier."}`, []string{"X-Amzn-Errortype: ResourceNotFoundException"},
			steptype.ErrorPermanent, "not_found", "ResourceNotFoundException", 0},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, llmtest.JSONError(tc.status, tc.body, tc.headers...))
			d := llmtest.Drain(t.Context(), f.model(t), llmtest.UserRequest("?"))
			e := llmtest.AsError(t, d.Err)
			if e.Class != tc.class || e.Code != tc.code || e.StatusCode != tc.status || llm.RetryAfter(d.Err) != tc.retryAfter || e.Message == "" || !strings.Contains(tc.body, e.Message) {
				t.Errorf("error %+v", e)
			}
			var api *bedrock.APIError
			if !errors.As(d.Err, &api) || api.Type != tc.typ || api.Message != e.Message {
				t.Errorf("cause %+v", api)
			}
		})
	}
}

func TestHTTPErrorRequestID(t *testing.T) {
	t.Parallel()
	f := newFake(t, llmtest.JSONError(400, `{"message":"bad"}`, "X-Amzn-Errortype: ValidationException", "X-Amzn-Requestid: 7f1c-42"))
	d := llmtest.Drain(t.Context(), f.model(t), llmtest.UserRequest("?"))
	var api *bedrock.APIError
	if !errors.As(d.Err, &api) || api.RequestID != "7f1c-42" || api.Error() != "bedrock: 400 ValidationException: bad" {
		t.Errorf("cause %+v", api)
	}
}

func TestSignatureRefused(t *testing.T) {
	t.Parallel()
	f := newFake(t, serveEvents(eventFile(t, "text.events")))
	bad := func(context.Context) (bedrock.Credentials, error) {
		return bedrock.Credentials{AccessKeyID: "AKIDOTHER", SecretAccessKey: "x"}, nil
	}
	d := llmtest.Drain(t.Context(), f.model(t, func(c *bedrock.Config) { c.Credentials = bad }), llmtest.UserRequest("?"))
	var api *bedrock.APIError
	if e := llmtest.AsError(t, d.Err); e.Class != steptype.ErrorPermanent || e.Code != "auth" || !errors.As(d.Err, &api) || api.Type != "UnrecognizedClientException" {
		t.Errorf("error %+v cause %+v", e, api)
	}
}

func TestNoCredentials(t *testing.T) {
	t.Parallel()
	f := newFake(t, serveEvents(eventFile(t, "text.events")))
	for name, creds := range map[string]bedrock.CredentialsFunc{
		"error": func(context.Context) (bedrock.Credentials, error) {
			return bedrock.Credentials{}, bedrock.ErrNoCredentials
		},
		"empty": func(context.Context) (bedrock.Credentials, error) { return bedrock.Credentials{}, nil },
	} {
		d := llmtest.Drain(t.Context(), f.model(t, func(c *bedrock.Config) { c.Credentials = creds }), llmtest.UserRequest("?"))
		if e := llmtest.AsError(t, d.Err); e.Class != steptype.ErrorPermanent || e.Code != "auth" || !errors.Is(d.Err, bedrock.ErrNoCredentials) {
			t.Errorf("%s: error %+v", name, e)
		}
	}
	if f.count() != 0 {
		t.Errorf("%d requests sent without credentials", f.count())
	}
}

func TestBearerToken(t *testing.T) {
	t.Parallel()
	f := newFake(t, serveEvents(eventFile(t, "text.events")))
	never := func(context.Context) (bedrock.Credentials, error) { panic("credentials read with a bearer token") }
	d := llmtest.Drain(t.Context(), f.model(t, func(c *bedrock.Config) { c.BearerToken = "ABSK-test"; c.Credentials = never }), llmtest.UserRequest("?"))
	if d.Err != nil {
		t.Fatal(d.Err)
	}
	if r := f.last(t); r.header.Get("Authorization") != "Bearer ABSK-test" || r.header.Get("X-Amz-Date") != "" {
		t.Errorf("headers %v", r.header)
	}
}

// A model that takes tools only without streaming answers converse-stream
// with a ValidationException: that attempt fails as transient, and the
// next one, and those after it, go to converse.
func TestToolsWithoutStreaming(t *testing.T) {
	t.Parallel()
	refusal := `{"message":"This model doesn't support tool use in streaming mode."}`
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/converse-stream") {
			llmtest.JSONError(400, refusal, "X-Amzn-Errortype: ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/")(w, r)
			return
		}
		llmtest.JSONError(200, `{"output":{"message":{"role":"assistant","content":[{"toolUse":{"toolUseId":"t1","name":"now","input":{}}}]}},"stopReason":"tool_use","usage":{"inputTokens":9,"outputTokens":4}}`)(w, r)
	})
	m := f.model(t, func(c *bedrock.Config) { c.Model = "meta.llama3-1-70b-instruct-v1:0" })
	req := llmtest.UserRequest("what time is it?")
	req.Tools = []llm.ToolDef{{Name: "now"}}
	d := llmtest.Drain(t.Context(), m, req)
	if e := llmtest.AsError(t, d.Err); e.Class != steptype.ErrorTransient || e.Code != "stream_unsupported" {
		t.Fatalf("first attempt: %+v", e)
	}
	for range 2 {
		d = llmtest.Drain(t.Context(), m, req)
		if d.Err != nil || len(d.Final.ToolCalls) != 1 || !strings.HasSuffix(f.last(t).rawPath, "/converse") {
			t.Fatalf("next attempt: %+v to %s", d, f.last(t).rawPath)
		}
	}
	// Without tools the model still streams.
	f2 := newFake(t, serveEvents(eventFile(t, "text.events")))
	if d := llmtest.Drain(t.Context(), f2.model(t), llmtest.UserRequest("hi")); d.Err != nil || !strings.HasSuffix(f2.last(t).rawPath, "/converse-stream") {
		t.Errorf("%+v", d)
	}
	// Another ValidationException stays permanent.
	f3 := newFake(t, llmtest.JSONError(400, `{"message":"messages: roles must alternate"}`, "X-Amzn-Errortype: ValidationException"))
	if e := llmtest.AsError(t, llmtest.Drain(t.Context(), f3.model(t), req).Err); e.Class != steptype.ErrorPermanent {
		t.Errorf("other validation error: %+v", e)
	}
}
