package anthropic_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/anthropic"
	"github.com/stepwise-run/stepwise/llm/llmtest"
	"github.com/stepwise-run/stepwise/steptype"
)

const okStream = `event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}

event: message_stop
data: {"type":"message_stop"}

`

// agentTurn is a request with every message kind of a tool loop.
func agentTurn() *llm.Request {
	temp := 0.0
	return &llm.Request{
		System: "You are terse.",
		Messages: []llm.Message{
			{Role: steptype.RoleUser, Content: "Weather and time in Tokyo?"},
			{Role: steptype.RoleAssistant, Reasoning: "need two tools", ToolCalls: []steptype.ToolCall{
				{ID: "toolu_1", Name: "get_weather", Arguments: json.RawMessage(`{"location":"Tokyo"}`)},
				{ID: "toolu_2", Name: "get_time", Arguments: nil},
			}},
			{Role: steptype.RoleTool, ToolCallID: "toolu_1", ToolName: "get_weather", Content: `{"temp_c":21}`},
			{Role: steptype.RoleTool, ToolCallID: "toolu_2", ToolName: "get_time", Content: ""},
			{Role: steptype.RoleAssistant, Content: "21°C."},
			{Role: steptype.RoleSystem, Content: "Answer in French from now on."},
			{Role: steptype.RoleUser, Content: "Thanks"},
		},
		Tools: []llm.ToolDef{
			{Name: "get_weather", Description: "Current weather.", Parameters: json.RawMessage(`{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"number"}},"required":["zeta"],"additionalProperties":false}`)},
			{Name: "get_time"},
		},
		Temperature: &temp,
		MaxTokens:   256,
	}
}

func TestRequestBody(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t, path, llmtest.SSEBytes([]byte(okStream)))
	m := model(t, s, func(c *anthropic.Config) {
		c.ExtraHeaders = map[string]string{"anthropic-beta": "fine-grained-tool-streaming-2025-05-14"}
	})
	if r := llmtest.Drain(t.Context(), m, agentTurn()); r.Err != nil {
		t.Fatal(r.Err)
	}
	got := s.Last(t)
	for k, want := range map[string]string{
		"X-Api-Key":         "sk-ant-test",
		"Anthropic-Version": "2023-06-01",
		"Anthropic-Beta":    "fine-grained-tool-streaming-2025-05-14",
		"Authorization":     "",
	} {
		if v := got.Header.Get(k); v != want {
			t.Errorf("header %s = %q, want %q", k, v, want)
		}
	}
	b := got.Body
	checks := []struct {
		path []any
		want any
	}{
		{[]any{"model"}, "claude-test"},
		{[]any{"stream"}, true},
		{[]any{"max_tokens"}, 256.0},
		{[]any{"temperature"}, 0.0},
		{[]any{"thinking"}, nil},
		{[]any{"cache_control"}, nil},
		{[]any{"system", 0, "type"}, "text"},
		{[]any{"system", 0, "text"}, "You are terse.\n\nAnswer in French from now on."},
		{[]any{"messages", 0, "role"}, "user"},
		{[]any{"messages", 0, "content", 0, "type"}, "text"},
		{[]any{"messages", 0, "content", 0, "text"}, "Weather and time in Tokyo?"},
		{[]any{"messages", 1, "role"}, "assistant"},
		{[]any{"messages", 1, "content", 0, "type"}, "tool_use"},
		{[]any{"messages", 1, "content", 0, "id"}, "toolu_1"},
		{[]any{"messages", 1, "content", 0, "name"}, "get_weather"},
		{[]any{"messages", 1, "content", 0, "input", "location"}, "Tokyo"},
		{[]any{"messages", 1, "content", 1, "id"}, "toolu_2"},
		{[]any{"messages", 1, "content", 1, "input"}, map[string]any{}},
		{[]any{"messages", 1, "content", 2}, nil},
		// Both results in one user message.
		{[]any{"messages", 2, "role"}, "user"},
		{[]any{"messages", 2, "content", 0, "type"}, "tool_result"},
		{[]any{"messages", 2, "content", 0, "tool_use_id"}, "toolu_1"},
		{[]any{"messages", 2, "content", 0, "content", 0, "text"}, `{"temp_c":21}`},
		{[]any{"messages", 2, "content", 1, "tool_use_id"}, "toolu_2"},
		{[]any{"messages", 2, "content", 1, "content"}, nil},
		{[]any{"messages", 2, "content", 2}, nil},
		{[]any{"messages", 3, "role"}, "assistant"},
		{[]any{"messages", 3, "content", 0, "text"}, "21°C."},
		{[]any{"messages", 4, "role"}, "user"},
		{[]any{"messages", 4, "content", 0, "text"}, "Thanks"},
		{[]any{"messages", 5}, nil},
		{[]any{"tools", 0, "name"}, "get_weather"},
		{[]any{"tools", 0, "description"}, "Current weather."},
		{[]any{"tools", 0, "input_schema", "additionalProperties"}, false},
		{[]any{"tools", 1, "input_schema", "type"}, "object"},
		{[]any{"tools", 1, "description"}, nil},
	}
	for _, c := range checks {
		if v := llmtest.Field(b, c.path...); fmt.Sprint(v) != fmt.Sprint(c.want) {
			t.Errorf("%v = %#v, want %#v", c.path, v, c.want)
		}
	}
	if !strings.Contains(string(got.Raw), `"input_schema":{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"number"}}`) {
		t.Errorf("schema reordered: %s", got.Raw)
	}
}

func TestRequestDefaultsThinkingCaching(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t, path, llmtest.SSEBytes([]byte(okStream)))
	m := model(t, s, func(c *anthropic.Config) {
		c.ThinkingBudget = 2048
		c.PromptCaching = true
	})
	req := llmtest.UserRequest("hi")
	temp := 0.3
	req.Temperature = &temp
	req.Model = "claude-other"
	if r := llmtest.Drain(t.Context(), m, req); r.Err != nil {
		t.Fatal(r.Err)
	}
	b := s.Last(t).Body
	for _, c := range []struct {
		path []any
		want any
	}{
		{[]any{"model"}, "claude-other"},
		{[]any{"max_tokens"}, 4096.0},
		{[]any{"thinking", "type"}, "enabled"},
		{[]any{"thinking", "budget_tokens"}, 2048.0},
		{[]any{"temperature"}, nil},
		{[]any{"cache_control", "type"}, "ephemeral"},
		{[]any{"system"}, nil},
		{[]any{"tools"}, nil},
	} {
		if v := llmtest.Field(b, c.path...); fmt.Sprint(v) != fmt.Sprint(c.want) {
			t.Errorf("%v = %#v, want %#v", c.path, v, c.want)
		}
	}
	if m.Name() != "anthropic:claude-test" || m.Provider() != "anthropic" {
		t.Errorf("name %q provider %q", m.Name(), m.Provider())
	}
}

func TestRequestInvalid(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t, path, llmtest.SSEBytes([]byte(okStream)))
	m := model(t, s, func(c *anthropic.Config) { c.ThinkingBudget = 1024 })
	user := []llm.Message{{Role: steptype.RoleUser, Content: "x"}}
	cases := map[string]*llm.Request{
		"nil request":            nil,
		"unknown role":           {Messages: []llm.Message{{Role: "robot", Content: "x"}}},
		"no role":                {Messages: []llm.Message{{Content: "x"}}},
		"tool without id":        {Messages: []llm.Message{{Role: steptype.RoleTool, Content: "x"}}},
		"call without id":        {Messages: []llm.Message{{Role: steptype.RoleAssistant, ToolCalls: []steptype.ToolCall{{Name: "a"}}}}},
		"tool without name":      {Messages: user, Tools: []llm.ToolDef{{}}},
		"schema not JSON":        {Messages: user, Tools: []llm.ToolDef{{Name: "a", Parameters: json.RawMessage(`{"type":`)}}},
		"negative MaxTokens":     {Messages: user, MaxTokens: -1},
		"MaxTokens under budget": {Messages: user, MaxTokens: 1000},
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
	for name, cfg := range map[string]anthropic.Config{
		"no model":            {BaseURL: "http://localhost:1"},
		"no scheme":           {Model: "m", BaseURL: "localhost:8080"},
		"negative timeout":    {Model: "m", BaseURL: "http://localhost:1", Timeout: -1},
		"negative max tokens": {Model: "m", BaseURL: "http://localhost:1", MaxTokens: -5},
		"budget too small":    {Model: "m", BaseURL: "http://localhost:1", ThinkingBudget: 500},
		"budget over max":     {Model: "m", BaseURL: "http://localhost:1", ThinkingBudget: 4096},
	} {
		if m, err := anthropic.New(cfg); err == nil || m != nil || !strings.HasPrefix(err.Error(), "stepwise: anthropic: ") {
			t.Errorf("%s: model %v error %v", name, m, err)
		}
	}
}

func TestNewEnvironmentDefaults(t *testing.T) {
	// Not parallel: it sets environment variables.
	s := llmtest.NewServer(t, path, llmtest.SSEBytes([]byte(okStream)))
	t.Setenv("ANTHROPIC_BASE_URL", s.URL)
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-env")
	m, err := anthropic.New(anthropic.Config{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if r := llmtest.Drain(t.Context(), m, llmtest.UserRequest("hi")); r.Err != nil {
		t.Fatal(r.Err)
	}
	if h := s.Last(t).Header.Get("X-Api-Key"); h != "sk-ant-env" {
		t.Errorf("x-api-key %q", h)
	}
}
