package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/store"
)

func TestProblemMapping(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err    error
		status int
		code   string
	}{
		{fmt.Errorf("run %q: %w", "x", store.ErrNotFound), 404, CodeNotFound},
		{fmt.Errorf("%w %q", stepwise.ErrUnknownAgent, "x"), 404, CodeUnknownAgent},
		{fmt.Errorf("wrap: %w", store.ErrConflict), 409, CodeConflict},
		{fmt.Errorf("%w: request r", stepwise.ErrAlreadyAnswered), 409, CodeAlreadyAnswered},
		{fmt.Errorf("%w: run r", stepwise.ErrRunFinished), 409, CodeRunFinished},
		{fmt.Errorf("start: %w: session s", store.ErrSessionBusy), 409, CodeSessionBusy},
		{stepwise.ErrNotWaiting, 409, CodeNotWaiting},
		{fmt.Errorf("%w: bad", stepwise.ErrInvalidAnswer), 422, CodeInvalidAnswer},
		{fmt.Errorf("%w: fork at 0", store.ErrInvalid), 422, CodeInvalidArgument},
		{stepwise.ErrEngineClosed, 503, CodeUnavailable},
		{&http.MaxBytesError{Limit: 10}, 413, CodeBodyTooLarge},
		{fmt.Errorf("append: %w: database or disk is full", store.ErrStorageFull), 503, CodeStorageFull},
		{fmt.Errorf("get: %w: connection refused", store.ErrUnavailable), 503, CodeStorageDown},
		{fmt.Errorf("append: %w", store.ErrLocked), 503, CodeStorageDown},
		{errors.New("disk on fire at /var/secret"), 500, CodeInternal},
	}
	ctx, cancel := context.WithTimeoutCause(context.Background(), 0, errStoreDeadline)
	defer cancel()
	cases = append(cases, struct {
		err    error
		status int
		code   string
	}{storeDeadlineErr(ctx, fmt.Errorf("list: %w", context.DeadlineExceeded)), 503, CodeStorageDown})
	for _, c := range cases {
		p, internal := problemOf(c.err)
		if p.Status != c.status || p.Code != c.code || p.Type != ProblemTypePrefix+c.code || p.Title != http.StatusText(c.status) {
			t.Errorf("%v: got %+v", c.err, p)
		}
		if internal != (c.status == 500 || strings.HasPrefix(c.code, "storage_")) {
			t.Errorf("%v: internal %v", c.err, internal)
		}
		if (c.status == 503) != (p.retryAfter > 0) && c.code != CodeUnavailable {
			t.Errorf("%v: Retry-After %d", c.err, p.retryAfter)
		}
		if internal && strings.Contains(p.Detail, "secret") {
			t.Errorf("internal cause leaked: %q", p.Detail)
		}
	}
}

func TestBadRequestsGetProblems(t *testing.T) {
	t.Parallel()
	env := newEnv(t, []*stepwise.Agent{chatAgent("chat", "hi")})
	sid := finishedSession(t, env, "chat", "one")
	big := `{"agent":"chat","input":"` + strings.Repeat("x", 2<<20) + `"}`
	cases := []struct {
		status       int
		code         string
		method, path string
		body         string
		hdr          []string
	}{
		{400, CodeInvalidJSON, "POST", "/v1/runs", `{"agent":"chat","input":"x","extra":1}`, nil},
		{400, CodeInvalidJSON, "POST", "/v1/runs", `{"agent":"chat","input":"x"} {"again":1}`, nil},
		{400, CodeInvalidJSON, "POST", "/v1/runs", `{"agent":"chat","input":"x"}garbage`, nil},
		{400, CodeInvalidJSON, "POST", "/v1/runs", `{"agent":"chat",`, nil},
		{400, CodeInvalidJSON, "POST", "/v1/runs", `{"agent":12}`, nil},
		{400, CodeInvalidJSON, "POST", "/v1/runs", `[]`, nil},
		{400, CodeInvalidJSON, "POST", "/v1/runs", `"x"`, nil},
		{400, CodeInvalidJSON, "POST", "/v1/runs", ``, nil},
		{400, CodeInvalidJSON, "POST", "/v1/runs", `   `, nil},
		{413, CodeBodyTooLarge, "POST", "/v1/runs", big, nil},
		{415, CodeUnsupportedType, "POST", "/v1/runs", `{"agent":"chat"}`, []string{"Content-Type", "text/plain"}},
		{415, CodeUnsupportedType, "POST", "/v1/runs", `{"agent":"chat"}`, []string{"Content-Type", "nonsense;;"}},
		{405, CodeMethodNotAllowed, "PUT", "/v1/runs", `{}`, nil},
		{405, CodeMethodNotAllowed, "DELETE", "/v1/agents", ``, nil},
		{404, CodeRouteNotFound, "GET", "/v1/nothing", ``, nil},
		{404, CodeRouteNotFound, "GET", "/", ``, nil},
		{400, CodeInvalidPosition, "GET", "/v1/sessions/" + sid + "/events", ``, []string{"Last-Event-ID", "12:x"}},
		{400, CodeInvalidPosition, "GET", "/v1/sessions/" + sid + "/events?after=-1:0", ``, nil},
		{400, CodeInvalidPosition, "GET", "/v1/runs/whatever/events", ``, []string{"Last-Event-ID", "abc"}},
		{404, CodeNotFound, "GET", "/v1/sessions/nope/events", ``, nil},
		{404, CodeNotFound, "GET", "/v1/runs/nope/events", ``, nil},
		{400, CodeInvalidParam, "GET", "/v1/sessions/" + strings.Repeat("x", 300), ``, nil},
		{400, CodeInvalidParam, "GET", "/v1/sessions/a%20b", ``, nil},
		{400, CodeInvalidJSON, "POST", "/v1/sessions", `{"agent":"a","owner":"me"}`, nil},
		{422, CodeInvalidArgument, "POST", "/v1/sessions", `{"metadata":[1]}`, nil},
		{400, CodeInvalidJSON, "POST", "/v1/sessions/" + sid + "/replay", `{"live_tools":"all"}`, nil},
		{400, CodeInvalidJSON, "POST", "/v1/runs/x/cancel", `{"why":"x"}`, nil},
	}
	for _, c := range cases {
		p := env.problem(c.status, c.code, c.method, c.path, c.body, c.hdr...)
		if p.Detail == "" {
			t.Errorf("%s %s: empty detail", c.method, c.path)
		}
	}
	// 405 names the allowed methods.
	req, _ := http.NewRequest("PATCH", env.ts.URL+"/v1/sessions/"+sid, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET, DELETE" || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("405: %d allow %q ct %q", resp.StatusCode, resp.Header.Get("Allow"), resp.Header.Get("Content-Type"))
	}
	// Nothing was created by the refused requests.
	page, err := env.store.SessionList(context.Background(), &store.SessionListParams{})
	if err != nil || len(page.Sessions) != 1 {
		t.Fatalf("sessions after bad requests: %d %v", len(page.Sessions), err)
	}
}

func TestBearerTokens(t *testing.T) {
	t.Parallel()
	env := newEnv(t, []*stepwise.Agent{chatAgent("chat", "hi")}, withTokens("s3cret-token", "second-token"))
	for _, hdr := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", "Basic czNjcmV0LXRva2Vu"},
		{"Authorization", "Bearer"}, {"Authorization", "Bearer s3cret-token2"}, {"Authorization", "s3cret-token"}} {
		for _, path := range []string{"/v1/agents", "/v1/openapi.json", "/v1/sessions/x/events", "/v1/nothing"} {
			p := env.problem(401, CodeUnauthorized, "GET", path, "", hdr...)
			if strings.Contains(p.Detail, "s3cret") || strings.Contains(p.Detail, "wrong") || strings.Contains(p.Detail, "second") {
				t.Fatalf("401 leaks: %q", p.Detail)
			}
		}
	}
	for _, tok := range []string{"s3cret-token", "second-token"} {
		if status, body := env.call("GET", "/v1/agents", "", "Authorization", "Bearer "+tok); status != 200 {
			t.Fatalf("token %s: %d %s", tok, status, body)
		}
	}
	if status, _ := env.call("GET", "/v1/agents", "", "Authorization", "bearer s3cret-token"); status != 200 {
		t.Fatalf("scheme is case-insensitive: %d", status)
	}
	// The client sends its token.
	if _, err := env.c.Agents(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "an engine is required") {
		t.Fatalf("no engine: %v", err)
	}
	env := newEnv(t, nil)
	for _, cfg := range []Config{
		{Engine: env.eng, NextStepTimeout: 3 * MaxNextStepTimeout},
		{Engine: env.eng, Tokens: []string{""}},
		{Engine: env.eng, Tokens: []string{"a b"}},
		{Engine: env.eng, MaxBodyBytes: -1},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
}

func TestRequireTokens(t *testing.T) {
	t.Parallel()
	for addr, loop := range map[string]bool{
		"127.0.0.1:7700": true, "localhost:1": true, "[::1]:80": true, "127.1.2.3:9": true, "LOCALHOST:5": true,
		":7700": false, "0.0.0.0:7700": false, "[::]:1": false, "10.0.0.1:80": false, "example.com:80": false, "": false,
	} {
		if IsLoopback(addr) != loop {
			t.Errorf("IsLoopback(%q) = %v", addr, !loop)
		}
		err := RequireTokens(addr, nil)
		if (err == nil) != loop || (err != nil && !errors.Is(err, ErrTokensRequired)) {
			t.Errorf("RequireTokens(%q): %v", addr, err)
		}
		if err := RequireTokens(addr, []string{"t"}); err != nil {
			t.Errorf("RequireTokens(%q, token): %v", addr, err)
		}
	}
	env := newEnv(t, nil)
	err := ListenAndServe(context.Background(), "0.0.0.0:0", Config{Engine: env.eng})
	if !errors.Is(err, ErrTokensRequired) || !strings.Contains(err.Error(), "0.0.0.0:0") {
		t.Fatalf("public address without tokens: %v", err)
	}
}
