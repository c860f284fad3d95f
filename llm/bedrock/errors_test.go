package bedrock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/bedrock"
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
			f := newFake(t, answer(tc.status, tc.body, tc.headers...))
			d := run(t.Context(), f.model(t), ask("?"))
			e := asLLMError(t, d.err)
			if e.Class != tc.class || e.Code != tc.code || e.StatusCode != tc.status || llm.RetryAfter(d.err) != tc.retryAfter || e.Message == "" || !strings.Contains(tc.body, e.Message) {
				t.Errorf("error %+v", e)
			}
			var api *bedrock.APIError
			if !errors.As(d.err, &api) || api.Type != tc.typ || api.Message != e.Message {
				t.Errorf("cause %+v", api)
			}
		})
	}
}

func TestHTTPErrorRequestID(t *testing.T) {
	t.Parallel()
	f := newFake(t, answer(400, `{"message":"bad"}`, "X-Amzn-Errortype: ValidationException", "X-Amzn-Requestid: 7f1c-42"))
	d := run(t.Context(), f.model(t), ask("?"))
	var api *bedrock.APIError
	if !errors.As(d.err, &api) || api.RequestID != "7f1c-42" || api.Error() != "bedrock: 400 ValidationException: bad" {
		t.Errorf("cause %+v", api)
	}
}

func TestSignatureRefused(t *testing.T) {
	t.Parallel()
	f := newFake(t, serveEvents(eventFile(t, "text.events")))
	bad := func(context.Context) (bedrock.Credentials, error) {
		return bedrock.Credentials{AccessKeyID: "AKIDOTHER", SecretAccessKey: "x"}, nil
	}
	d := run(t.Context(), f.model(t, func(c *bedrock.Config) { c.Credentials = bad }), ask("?"))
	var api *bedrock.APIError
	if e := asLLMError(t, d.err); e.Class != steptype.ErrorPermanent || e.Code != "auth" || !errors.As(d.err, &api) || api.Type != "UnrecognizedClientException" {
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
		d := run(t.Context(), f.model(t, func(c *bedrock.Config) { c.Credentials = creds }), ask("?"))
		if e := asLLMError(t, d.err); e.Class != steptype.ErrorPermanent || e.Code != "auth" || !errors.Is(d.err, bedrock.ErrNoCredentials) {
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
	d := run(t.Context(), f.model(t, func(c *bedrock.Config) { c.BearerToken = "ABSK-test"; c.Credentials = never }), ask("?"))
	if d.err != nil {
		t.Fatal(d.err)
	}
	if r := f.last(t); r.header.Get("Authorization") != "Bearer ABSK-test" || r.header.Get("X-Amz-Date") != "" {
		t.Errorf("headers %v", r.header)
	}
}
