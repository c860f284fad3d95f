package openai_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/llmtest"
	"github.com/stepwise-run/stepwise/llm/openai"
	"github.com/stepwise-run/stepwise/steptype"
)

const okStream = `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}

data: [DONE]

`

// agentTurn is a request with every message kind of a tool loop.
func agentTurn() *llm.Request {
	temp := 0.0
	return &llm.Request{
		System: "You are terse.",
		Messages: []llm.Message{
			{Role: steptype.RoleUser, Content: "Weather and time in Tokyo?"},
			{Role: steptype.RoleAssistant, Reasoning: "need two tools", ToolCalls: []steptype.ToolCall{
				{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"location":"Tokyo"}`)},
				{ID: "call_2", Name: "get_time", Arguments: nil},
			}},
			{Role: steptype.RoleTool, ToolCallID: "call_1", ToolName: "get_weather", Content: `{"temp_c":21}`},
			{Role: steptype.RoleTool, ToolCallID: "call_2", ToolName: "get_time", Content: "09:30"},
			{Role: steptype.RoleAssistant, Content: "21°C, 09:30."},
			{Role: steptype.RoleUser, Content: "Thanks"},
		},
		Tools: []llm.ToolDef{
			{Name: "get_weather", Description: "Current weather.", Parameters: json.RawMessage(`{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"number"}},"required":["zeta"]}`)},
			{Name: "get_time"},
		},
		Temperature: &temp,
		MaxTokens:   256,
	}
}

func TestRequestBody(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t, path, llmtest.SSEBytes([]byte(okStream)))
	m := model(t, s, func(c *openai.Config) { c.ExtraHeaders = map[string]string{"X-Title": "stepwise"} })
	if r := llmtest.Drain(t.Context(), m, agentTurn()); r.Err != nil {
		t.Fatal(r.Err)
	}
	got := s.Last(t)
	if got.Path != "/v1/chat/completions" || got.Header.Get("Authorization") != "Bearer sk-test" || got.Header.Get("X-Title") != "stepwise" {
		t.Errorf("path %s headers %v", got.Path, got.Header)
	}
	b := got.Body
	checks := []struct {
		path []any
		want any
	}{
		{[]any{"model"}, "gpt-test"},
		{[]any{"stream"}, true},
		{[]any{"stream_options", "include_usage"}, true},
		{[]any{"temperature"}, 0.0},
		{[]any{"max_tokens"}, 256.0},
		{[]any{"max_completion_tokens"}, nil},
		{[]any{"messages", 0, "role"}, "system"},
		{[]any{"messages", 0, "content"}, "You are terse."},
		{[]any{"messages", 1, "role"}, "user"},
		{[]any{"messages", 1, "content"}, "Weather and time in Tokyo?"},
		{[]any{"messages", 2, "role"}, "assistant"},
		{[]any{"messages", 2, "content"}, nil},
		{[]any{"messages", 2, "reasoning_content"}, nil},
		{[]any{"messages", 2, "tool_calls", 0, "id"}, "call_1"},
		{[]any{"messages", 2, "tool_calls", 0, "type"}, "function"},
		{[]any{"messages", 2, "tool_calls", 0, "function", "name"}, "get_weather"},
		{[]any{"messages", 2, "tool_calls", 0, "function", "arguments"}, `{"location":"Tokyo"}`},
		{[]any{"messages", 2, "tool_calls", 1, "function", "arguments"}, `{}`},
		{[]any{"messages", 3, "role"}, "tool"},
		{[]any{"messages", 3, "tool_call_id"}, "call_1"},
		{[]any{"messages", 3, "content"}, `{"temp_c":21}`},
		{[]any{"messages", 4, "tool_call_id"}, "call_2"},
		{[]any{"messages", 5, "content"}, "21°C, 09:30."},
		{[]any{"messages", 6, "content"}, "Thanks"},
		{[]any{"messages", 7}, nil},
		{[]any{"tools", 0, "type"}, "function"},
		{[]any{"tools", 0, "function", "name"}, "get_weather"},
		{[]any{"tools", 0, "function", "description"}, "Current weather."},
		{[]any{"tools", 0, "function", "parameters", "required", 0}, "zeta"},
		{[]any{"tools", 1, "function", "parameters", "type"}, "object"},
		{[]any{"tools", 1, "function", "description"}, nil},
	}
	for _, c := range checks {
		if v := llmtest.Field(b, c.path...); fmt.Sprint(v) != fmt.Sprint(c.want) {
			t.Errorf("%v = %#v, want %#v", c.path, v, c.want)
		}
	}
	// The schema goes out as given, key order included.
	if !strings.Contains(string(got.Raw), `"properties":{"zeta":{"type":"string"},"alpha":{"type":"number"}}`) {
		t.Errorf("schema reordered: %s", got.Raw)
	}
}

func TestRequestModelOverride(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t, path, llmtest.SSEBytes([]byte(okStream)))
	req := llmtest.UserRequest("hi")
	req.Model = "other-model"
	if r := llmtest.Drain(t.Context(), model(t, s), req); r.Err != nil {
		t.Fatal(r.Err)
	}
	b := s.Last(t).Body
	if b["model"] != "other-model" || b["temperature"] != nil || b["max_tokens"] != nil || b["tools"] != nil {
		t.Errorf("body %v", b)
	}
	if model(t, s).Name() != "openai:gpt-test" || model(t, s).Provider() != "openai" {
		t.Errorf("name %q provider %q", model(t, s).Name(), model(t, s).Provider())
	}
}

// redirect sends every request to target, whatever its URL.
type redirect struct{ target *url.URL }

func (r redirect) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.URL.Scheme, req.URL.Host = r.target.Scheme, r.target.Host
	return http.DefaultTransport.RoundTrip(req)
}

func TestRequestMaxCompletionTokensForOpenAI(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t, path, llmtest.SSEBytes([]byte(okStream)))
	target, _ := url.Parse(s.URL)
	m := model(t, s, func(c *openai.Config) {
		c.BaseURL = "https://api.openai.com/v1"
		c.HTTPClient = &http.Client{Transport: redirect{target}}
	})
	req := llmtest.UserRequest("hi")
	req.MaxTokens = 100
	if r := llmtest.Drain(t.Context(), m, req); r.Err != nil {
		t.Fatal(r.Err)
	}
	if b := s.Last(t).Body; b["max_completion_tokens"] != 100.0 || b["max_tokens"] != nil {
		t.Errorf("body %v", b)
	}
}

func TestRequestInvalid(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t, path, llmtest.SSEBytes([]byte(okStream)))
	m := model(t, s)
	cases := map[string]*llm.Request{
		"nil request":        nil,
		"unknown role":       {Messages: []llm.Message{{Role: "robot", Content: "x"}}},
		"no role":            {Messages: []llm.Message{{Content: "x"}}},
		"tool without id":    {Messages: []llm.Message{{Role: steptype.RoleTool, Content: "x"}}},
		"call without id":    {Messages: []llm.Message{{Role: steptype.RoleAssistant, ToolCalls: []steptype.ToolCall{{Name: "a"}}}}},
		"tool without name":  {Messages: []llm.Message{{Role: steptype.RoleUser, Content: "x"}}, Tools: []llm.ToolDef{{}}},
		"schema not JSON":    {Messages: []llm.Message{{Role: steptype.RoleUser, Content: "x"}}, Tools: []llm.ToolDef{{Name: "a", Parameters: json.RawMessage(`{"type":`)}}},
		"negative MaxTokens": {Messages: []llm.Message{{Role: steptype.RoleUser, Content: "x"}}, MaxTokens: -1},
	}
	for name, req := range cases {
		r := llmtest.Drain(t.Context(), m, req)
		e := llmtest.AsError(t, r.Err)
		if e.Class != steptype.ErrorPermanent || e.Code != "bad_request" || r.Final != nil || r.AfterEnd != 0 {
			t.Errorf("%s: %+v", name, e)
		}
	}
	if n := s.Count(); n != 0 {
		t.Errorf("%d requests sent for invalid input", n)
	}
}

func TestNewInvalidConfig(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]openai.Config{
		"no model":         {BaseURL: "http://localhost:1/v1"},
		"no scheme":        {Model: "m", BaseURL: "localhost:11434/v1"},
		"bad scheme":       {Model: "m", BaseURL: "ftp://localhost/v1"},
		"negative timeout": {Model: "m", BaseURL: "http://localhost:1/v1", Timeout: -1},
	} {
		if m, err := openai.New(cfg); err == nil || m != nil || !strings.HasPrefix(err.Error(), "stepwise: openai: ") {
			t.Errorf("%s: model %v error %v", name, m, err)
		}
	}
}

func TestNewEnvironmentDefaults(t *testing.T) {
	// Not parallel: it sets environment variables.
	s := llmtest.NewServer(t, path, llmtest.SSEBytes([]byte(okStream)))
	t.Setenv("OPENAI_BASE_URL", s.URL+"/v1")
	t.Setenv("OPENAI_API_KEY", "sk-from-env")
	m, err := openai.New(openai.Config{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if r := llmtest.Drain(t.Context(), m, llmtest.UserRequest("hi")); r.Err != nil {
		t.Fatal(r.Err)
	}
	if h := s.Last(t).Header.Get("Authorization"); h != "Bearer sk-from-env" {
		t.Errorf("authorization %q", h)
	}
	// Explicit fields win; no key at all sends no Authorization header.
	t.Setenv("OPENAI_API_KEY", "")
	m, err = openai.New(openai.Config{Model: "m", BaseURL: s.URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	if r := llmtest.Drain(t.Context(), m, llmtest.UserRequest("hi")); r.Err != nil {
		t.Fatal(r.Err)
	}
	if h := s.Last(t).Header.Get("Authorization"); h != "" {
		t.Errorf("authorization %q without a key", h)
	}
}

func TestNewEnvironmentHeaders(t *testing.T) {
	// Not parallel: it sets environment variables.
	s := llmtest.NewServer(t, path, llmtest.SSEBytes([]byte(okStream)))
	t.Setenv("OPENAI_ORG_ID", "org-1")
	t.Setenv("OPENAI_PROJECT_ID", "proj-1")
	t.Setenv("OPENAI_CUSTOM_HEADERS", "X-A: 1\nX-B: two")
	m := model(t, s, func(c *openai.Config) { c.ExtraHeaders = map[string]string{"X-B": "config"} })
	if r := llmtest.Drain(t.Context(), m, llmtest.UserRequest("hi")); r.Err != nil {
		t.Fatal(r.Err)
	}
	h := s.Last(t).Header
	for k, want := range map[string]string{"Openai-Organization": "org-1", "Openai-Project": "proj-1", "X-A": "1", "X-B": "config"} {
		if h.Get(k) != want {
			t.Errorf("header %s = %q, want %q", k, h.Get(k), want)
		}
	}
}
