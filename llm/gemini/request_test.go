package gemini_test

import (
	"encoding/json"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/gemini"
	"github.com/stepwise-run/stepwise/llm/llmtest"
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
	f := llmtest.NewServer(t, "", llmtest.SSEFile(t, "text.sse"))
	if d := llmtest.Drain(t.Context(), model(t, f), agentTurn()); d.Err != nil {
		t.Fatal(d.Err)
	}
	b := f.Last(t).Body
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
		if got := jsonOf(t, llmtest.Field(b, c.path...)); got != c.want {
			t.Errorf("%v = %s\nwant %s", c.path, got, c.want)
		}
	}
}

func TestRequestModelOverrideAndDefaults(t *testing.T) {
	t.Parallel()
	f := llmtest.NewServer(t, "", llmtest.SSEFile(t, "text.sse"))
	req := llmtest.UserRequest("hi")
	req.Model = "models/gemini-2.5-pro"
	if d := llmtest.Drain(t.Context(), model(t, f), req); d.Err != nil {
		t.Fatal(d.Err)
	}
	r := f.Last(t)
	if r.Path != "/v1beta/models/gemini-2.5-pro:streamGenerateContent" {
		t.Errorf("path %s", r.Path)
	}
	for _, k := range []string{"systemInstruction", "tools", "generationConfig"} {
		if v, ok := r.Body[k]; ok {
			t.Errorf("%s sent: %v", k, v)
		}
	}
}

func TestRequestInvalid(t *testing.T) {
	t.Parallel()
	f := llmtest.NewServer(t, "", llmtest.SSEFile(t, "text.sse"))
	m := model(t, f)
	for name, req := range map[string]*llm.Request{
		"nil":            nil,
		"negative max":   {MaxTokens: -1, Messages: llmtest.UserRequest("x").Messages},
		"unknown result": {Messages: []llm.Message{{Role: steptype.RoleUser, Content: "x"}, {Role: steptype.RoleTool, ToolCallID: "call_z", Content: "?"}}},
		"no call id":     {Messages: []llm.Message{{Role: steptype.RoleTool, Content: "?"}}},
		"nameless call":  {Messages: []llm.Message{{Role: steptype.RoleAssistant, ToolCalls: []steptype.ToolCall{{ID: "c"}}}}},
		"bad schema":     {Messages: llmtest.UserRequest("x").Messages, Tools: []llm.ToolDef{{Name: "t", Parameters: json.RawMessage(`{`)}}},
		"nameless tool":  {Messages: llmtest.UserRequest("x").Messages, Tools: []llm.ToolDef{{}}},
		"unknown role":   {Messages: []llm.Message{{Role: "critic", Content: "x"}}},
	} {
		d := llmtest.Drain(t.Context(), m, req)
		if e := llmtest.AsError(t, d.Err); e.Class != steptype.ErrorPermanent || e.Code != "bad_request" {
			t.Errorf("%s: error %+v", name, e)
		}
	}
	if f.Count() != 0 {
		t.Errorf("%d requests sent for invalid input", f.Count())
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
	f := llmtest.NewServer(t, "", llmtest.SSEFile(t, "text.sse"))
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
	if d := llmtest.Drain(t.Context(), m, llmtest.UserRequest("hi")); d.Err != nil {
		t.Fatal(d.Err)
	}
	if k := f.Last(t).Header.Get("x-goog-api-key"); k != "from-gemini" {
		t.Errorf("key %q", k)
	}
	t.Setenv("GOOGLE_API_KEY", "from-google") // Google's SDKs prefer it too
	m, _ = gemini.New(gemini.Config{Model: "gemini-2.5-flash"})
	_ = llmtest.Drain(t.Context(), m, llmtest.UserRequest("hi"))
	if k := f.Last(t).Header.Get("x-goog-api-key"); k != "from-google" {
		t.Errorf("key %q", k)
	}
}

func TestBaseURLWithVersion(t *testing.T) {
	t.Parallel()
	f := llmtest.NewServer(t, "", llmtest.SSEFile(t, "text.sse"))
	for base, want := range map[string]string{
		f.URL + "/":                 "/v1beta/models/gemini-test:streamGenerateContent",
		f.URL + "/proxy/v1":         "/proxy/v1/models/gemini-test:streamGenerateContent",
		f.URL + "/proxy/v1alpha/":   "/proxy/v1alpha/models/gemini-test:streamGenerateContent",
		f.URL + "/google-ai-studio": "/google-ai-studio/v1beta/models/gemini-test:streamGenerateContent",
	} {
		m := model(t, f, func(c *gemini.Config) { c.BaseURL = base })
		if d := llmtest.Drain(t.Context(), m, llmtest.UserRequest("hi")); d.Err != nil {
			t.Fatal(d.Err)
		}
		if p := f.Last(t).Path; p != want {
			t.Errorf("base %s: path %s, want %s", base, p, want)
		}
	}
}

// The thought signature a call came with goes back with it on the next
// request of the loop; a call the Model did not receive gets the
// placeholder.
func TestRequestSendsThoughtSignaturesBack(t *testing.T) {
	t.Parallel()
	f := llmtest.NewServer(t, "", llmtest.SSEFile(t, "tools.sse"))
	m := model(t, f)
	d := llmtest.Drain(t.Context(), m, llmtest.UserRequest("Weather in Paris and Tokyo?"))
	if d.Err != nil {
		t.Fatal(d.Err)
	}
	calls := d.Final.ToolCalls
	req := &llm.Request{Messages: []llm.Message{
		{Role: steptype.RoleUser, Content: "Weather in Paris and Tokyo?"},
		{Role: steptype.RoleAssistant, ToolCalls: calls},
		{Role: steptype.RoleTool, ToolCallID: calls[0].ID, ToolName: "get_weather", Content: "sunny"},
		{Role: steptype.RoleTool, ToolCallID: calls[1].ID, ToolName: "get_weather", Content: "rain"},
		{Role: steptype.RoleAssistant, ToolCalls: []steptype.ToolCall{{ID: "call_elsewhere", Name: "get_weather", Arguments: json.RawMessage(`{}`)}}},
		{Role: steptype.RoleTool, ToolCallID: "call_elsewhere", Content: "fog"},
	}}
	if d := llmtest.Drain(t.Context(), m, req); d.Err != nil {
		t.Fatal(d.Err)
	}
	b := f.Last(t).Body
	for path, want := range map[string]any{
		"1.0": "CiQBVKhc7...", "1.1": nil, "3.0": "skip_thought_signature_validator",
	} {
		turn, i := int(path[0]-'0'), int(path[2]-'0')
		if got := llmtest.Field(b, "contents", turn, "parts", i, "thoughtSignature"); got != want {
			t.Errorf("contents[%d].parts[%d].thoughtSignature = %v, want %v", turn, i, got, want)
		}
	}
}
