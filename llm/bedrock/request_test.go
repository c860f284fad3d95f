package bedrock_test

import (
	"encoding/json"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/bedrock"
	"github.com/stepwise-run/stepwise/llm/llmtest"
	"github.com/stepwise-run/stepwise/steptype"
)

func agentTurn() *llm.Request {
	temp := 0.3
	return &llm.Request{
		System: "You are terse.",
		Messages: []llm.Message{
			{Role: steptype.RoleSystem, Content: "Use metric units."},
			{Role: steptype.RoleUser, Content: "Weather in Paris and Tokyo?"},
			{Role: steptype.RoleAssistant, Content: "Checking.", Reasoning: "not sent", ToolCalls: []steptype.ToolCall{
				{ID: "tooluse_a", Name: "get_weather", Arguments: json.RawMessage(`{"location":"Paris"}`)},
				{ID: "tooluse_b", Name: "get_weather", Arguments: json.RawMessage(`"broken`)},
			}},
			{Role: steptype.RoleTool, ToolCallID: "tooluse_a", Content: `{"temp_c":18}`},
			{Role: steptype.RoleTool, ToolCallID: "tooluse_b"},
		},
		Tools: []llm.ToolDef{
			{Name: "get_weather", Description: "Weather of a city", Parameters: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"}}}`)},
			{Name: "now"},
		},
		Temperature: &temp,
		MaxTokens:   300,
	}
}

func TestRequestBody(t *testing.T) {
	t.Parallel()
	f := newFake(t, serveEvents(eventFile(t, "text.events")))
	if d := llmtest.Drain(t.Context(), f.model(t), agentTurn()); d.Err != nil {
		t.Fatal(d.Err)
	}
	b := f.last(t).body
	for _, c := range []struct {
		path []any
		want string
	}{
		{[]any{"system"}, `[{"text":"You are terse.\n\nUse metric units."}]`},
		{[]any{"messages", 0}, `{"content":[{"text":"Weather in Paris and Tokyo?"}],"role":"user"}`},
		{[]any{"messages", 1}, `{"content":[{"text":"Checking."},{"toolUse":{"input":{"location":"Paris"},"name":"get_weather","toolUseId":"tooluse_a"}},{"toolUse":{"input":{},"name":"get_weather","toolUseId":"tooluse_b"}}],"role":"assistant"}`},
		{[]any{"messages", 2}, `{"content":[{"toolResult":{"content":[{"text":"{\"temp_c\":18}"}],"toolUseId":"tooluse_a"}},{"toolResult":{"content":[{"json":{}}],"toolUseId":"tooluse_b"}}],"role":"user"}`},
		{[]any{"messages", 3}, `null`},
		{[]any{"toolConfig"}, `{"tools":[{"toolSpec":{"description":"Weather of a city","inputSchema":{"json":{"properties":{"location":{"type":"string"}},"type":"object"}},"name":"get_weather"}},{"toolSpec":{"inputSchema":{"json":{"properties":{},"type":"object"}},"name":"now"}}]}`},
		{[]any{"inferenceConfig"}, `{"maxTokens":300,"temperature":0.3}`},
	} {
		if got := jsonOf(t, llmtest.Field(b, c.path...)); got != c.want {
			t.Errorf("%v = %s\nwant %s", c.path, got, c.want)
		}
	}
}

func TestRequestModelOverride(t *testing.T) {
	t.Parallel()
	f := newFake(t, serveEvents(eventFile(t, "text.events")))
	req := llmtest.UserRequest("hi")
	req.Model = "arn:aws:bedrock:us-west-2:123456789012:inference-profile/us.meta.llama3-3-70b-instruct-v1:0"
	if d := llmtest.Drain(t.Context(), f.model(t), req); d.Err != nil {
		t.Fatal(d.Err)
	}
	r := f.last(t)
	if r.rawPath != "/model/arn%3Aaws%3Abedrock%3Aus-west-2%3A123456789012%3Ainference-profile%2Fus.meta.llama3-3-70b-instruct-v1%3A0/converse-stream" {
		t.Errorf("path %s", r.rawPath)
	}
	for _, k := range []string{"system", "toolConfig", "inferenceConfig"} {
		if v, ok := r.body[k]; ok {
			t.Errorf("%s sent: %v", k, v)
		}
	}
}

func TestRequestInvalid(t *testing.T) {
	t.Parallel()
	f := newFake(t, serveEvents(eventFile(t, "text.events")))
	m := f.model(t)
	for name, req := range map[string]*llm.Request{
		"nil":           nil,
		"negative max":  {MaxTokens: -1, Messages: llmtest.UserRequest("x").Messages},
		"no call id":    {Messages: []llm.Message{{Role: steptype.RoleTool, Content: "?"}}},
		"nameless call": {Messages: []llm.Message{{Role: steptype.RoleAssistant, ToolCalls: []steptype.ToolCall{{ID: "c"}}}}},
		"bad schema":    {Messages: llmtest.UserRequest("x").Messages, Tools: []llm.ToolDef{{Name: "t", Parameters: json.RawMessage(`{`)}}},
		"nameless tool": {Messages: llmtest.UserRequest("x").Messages, Tools: []llm.ToolDef{{}}},
		"unknown role":  {Messages: []llm.Message{{Role: "critic", Content: "x"}}},
	} {
		d := llmtest.Drain(t.Context(), m, req)
		if e := llmtest.AsError(t, d.Err); e.Class != steptype.ErrorPermanent || e.Code != "bad_request" {
			t.Errorf("%s: error %+v", name, e)
		}
	}
	if f.count() != 0 {
		t.Errorf("%d requests sent for invalid input", f.count())
	}
}

func TestNewConfig(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	for name, cfg := range map[string]bedrock.Config{
		"no model":        {Region: "us-east-1"},
		"no region":       {Model: "m"},
		"bad url":         {Model: "m", Region: "us-east-1", BaseURL: "bedrock.local"},
		"negative tokens": {Model: "m", Region: "us-east-1", MaxTokens: -1},
		"negative limit":  {Model: "m", Region: "us-east-1", Timeout: -1},
	} {
		if _, err := bedrock.New(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	t.Setenv("AWS_DEFAULT_REGION", "eu-central-1")
	m, err := bedrock.New(bedrock.Config{Model: "amazon.nova-lite-v1:0"})
	if err != nil || m.Name() != "bedrock:amazon.nova-lite-v1:0" || m.Provider() != "bedrock" {
		t.Fatalf("%v %v", m, err)
	}
}

func TestRequestPromptCaching(t *testing.T) {
	t.Parallel()
	f := newFake(t, serveEvents(eventFile(t, "text.events")))
	if d := llmtest.Drain(t.Context(), f.model(t, func(c *bedrock.Config) { c.PromptCaching = true }), agentTurn()); d.Err != nil {
		t.Fatal(d.Err)
	}
	b := f.last(t).body
	if got := jsonOf(t, llmtest.Field(b, "messages", 2, "content", 2)); got != `{"cachePoint":{"type":"default"}}` {
		t.Errorf("last block %s", got)
	}
	if n := len(llmtest.Field(b, "messages", 1, "content").([]any)); n != 3 {
		t.Errorf("%d blocks in the assistant turn: the cache point belongs to the last message only", n)
	}
}
