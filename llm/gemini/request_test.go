package gemini_test

import (
	"encoding/json"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/gemini"
	"github.com/stepwise-run/stepwise/steptype"
)

// agentTurn is the third call of a tool loop: a question, two parallel
// calls and their results.
func agentTurn() *llm.Request {
	temp := 0.2
	return &llm.Request{
		System: "You are terse.",
		Messages: []llm.Message{
			{Role: steptype.RoleSystem, Content: "Use metric units."},
			{Role: steptype.RoleUser, Content: "Weather in Paris and Tokyo?"},
			{Role: steptype.RoleAssistant, Content: "Checking.", ToolCalls: []steptype.ToolCall{
				{ID: "call_a", Name: "get_weather", Arguments: json.RawMessage(`{"location":"Paris"}`)},
				{ID: "call_b", Name: "get_weather", Arguments: json.RawMessage(`"broken`)},
			}},
			{Role: steptype.RoleTool, ToolCallID: "call_a", ToolName: "get_weather", Content: `{"temp_c":18}`},
			{Role: steptype.RoleTool, ToolCallID: "call_b", Content: "rain"},
		},
		Tools: []llm.ToolDef{
			{Name: "get_weather", Description: "Weather of a city", Parameters: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"}},"required":["location"],"additionalProperties":false}`)},
			{Name: "now"},
		},
		Temperature: &temp,
		MaxTokens:   256,
	}
}

func TestRequestBody(t *testing.T) {
	t.Parallel()
	f := newFake(t, serveSSE(t, "text.sse"))
	if d := run(t.Context(), f.model(t), agentTurn()); d.err != nil {
		t.Fatal(d.err)
	}
	b := f.last(t).body
	checks := []struct {
		path []any
		want string
	}{
		{[]any{"systemInstruction"}, `{"parts":[{"text":"You are terse.\n\nUse metric units."}]}`},
		{[]any{"contents", 0}, `{"parts":[{"text":"Weather in Paris and Tokyo?"}],"role":"user"}`},
		{[]any{"contents", 1, "role"}, `"model"`},
		{[]any{"contents", 1, "parts", 0}, `{"text":"Checking."}`},
		{[]any{"contents", 1, "parts", 1}, `{"functionCall":{"args":{"location":"Paris"},"id":"call_a","name":"get_weather"},"thoughtSignature":"skip_thought_signature_validator"}`},
		{[]any{"contents", 1, "parts", 2}, `{"functionCall":{"args":{},"id":"call_b","name":"get_weather"}}`},
		// Both results in one user turn; the second one's name comes from its call.
		{[]any{"contents", 2}, `{"parts":[{"functionResponse":{"id":"call_a","name":"get_weather","response":{"temp_c":18}}},{"functionResponse":{"id":"call_b","name":"get_weather","response":{"output":"rain"}}}],"role":"user"}`},
		{[]any{"contents", 3}, `null`},
		{[]any{"tools"}, `[{"functionDeclarations":[{"description":"Weather of a city","name":"get_weather","parametersJsonSchema":{"additionalProperties":false,"properties":{"location":{"type":"string"}},"required":["location"],"type":"object"}},{"name":"now"}]}]`},
		{[]any{"generationConfig"}, `{"maxOutputTokens":256,"temperature":0.2}`},
	}
	for _, c := range checks {
		if got := jsonOf(t, at(b, c.path...)); got != c.want {
			t.Errorf("%v = %s\nwant %s", c.path, got, c.want)
		}
	}
}

func TestRequestModelOverrideAndDefaults(t *testing.T) {
	t.Parallel()
	f := newFake(t, serveSSE(t, "text.sse"))
	req := ask("hi")
	req.Model = "models/gemini-2.5-pro"
	if d := run(t.Context(), f.model(t), req); d.err != nil {
		t.Fatal(d.err)
	}
	r := f.last(t)
	if r.path != "/v1beta/models/gemini-2.5-pro:streamGenerateContent" {
		t.Errorf("path %s", r.path)
	}
	for _, k := range []string{"systemInstruction", "tools", "generationConfig"} {
		if v, ok := r.body[k]; ok {
			t.Errorf("%s sent: %v", k, v)
		}
	}
}

func TestRequestInvalid(t *testing.T) {
	t.Parallel()
	f := newFake(t, serveSSE(t, "text.sse"))
	m := f.model(t)
	for name, req := range map[string]*llm.Request{
		"nil":            nil,
		"negative max":   {MaxTokens: -1, Messages: ask("x").Messages},
		"unknown result": {Messages: []llm.Message{{Role: steptype.RoleUser, Content: "x"}, {Role: steptype.RoleTool, ToolCallID: "call_z", Content: "?"}}},
		"no call id":     {Messages: []llm.Message{{Role: steptype.RoleTool, Content: "?"}}},
		"nameless call":  {Messages: []llm.Message{{Role: steptype.RoleAssistant, ToolCalls: []steptype.ToolCall{{ID: "c"}}}}},
		"bad schema":     {Messages: ask("x").Messages, Tools: []llm.ToolDef{{Name: "t", Parameters: json.RawMessage(`{`)}}},
		"nameless tool":  {Messages: ask("x").Messages, Tools: []llm.ToolDef{{}}},
		"unknown role":   {Messages: []llm.Message{{Role: "critic", Content: "x"}}},
	} {
		d := run(t.Context(), m, req)
		if e := asLLMError(t, d.err); e.Class != steptype.ErrorPermanent || e.Code != "bad_request" {
			t.Errorf("%s: error %+v", name, e)
		}
	}
	if f.count() != 0 {
		t.Errorf("%d requests sent for invalid input", f.count())
	}
}

func TestNewConfig(t *testing.T) {
	for name, cfg := range map[string]gemini.Config{
		"no model":        {},
		"path in model":   {Model: "gemini/../x"},
		"bad url":         {Model: "m", BaseURL: "ftp://x"},
		"negative tokens": {Model: "m", MaxTokens: -1},
		"negative budget": {Model: "m", ThinkingBudget: new(-2)},
		"negative limit":  {Model: "m", Timeout: -1},
	} {
		if _, err := gemini.New(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestNewEnvironment(t *testing.T) {
	// Not parallel: it sets the environment.
	f := newFake(t, serveSSE(t, "text.sse"))
	t.Setenv("GEMINI_BASE_URL", f.URL)
	t.Setenv("GEMINI_API_KEY", "from-gemini")
	t.Setenv("GOOGLE_API_KEY", "")
	m, err := gemini.New(gemini.Config{Model: "models/gemini-2.5-flash"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Name() != "gemini:gemini-2.5-flash" || m.Provider() != "gemini" {
		t.Errorf("name %q provider %q", m.Name(), m.Provider())
	}
	if d := run(t.Context(), m, ask("hi")); d.err != nil {
		t.Fatal(d.err)
	}
	if k := f.last(t).header.Get("x-goog-api-key"); k != "from-gemini" {
		t.Errorf("key %q", k)
	}
	t.Setenv("GOOGLE_API_KEY", "from-google") // Google's SDKs prefer it too
	m, _ = gemini.New(gemini.Config{Model: "gemini-2.5-flash"})
	_ = run(t.Context(), m, ask("hi"))
	if k := f.last(t).header.Get("x-goog-api-key"); k != "from-google" {
		t.Errorf("key %q", k)
	}
}
