package gemini_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/gemini"
	"github.com/stepwise-run/stepwise/llm/llmtest"
	"github.com/stepwise-run/stepwise/steptype"
)

func TestGenerateText(t *testing.T) {
	t.Parallel()
	f := llmtest.NewServer(t, "", llmtest.SSEFile(t, "text.sse"))
	d := llmtest.Drain(t.Context(), model(t, f), llmtest.UserRequest("Say hello"))
	if d.Err != nil || d.Final == nil || d.AfterEnd != 0 {
		t.Fatalf("err %v final %+v extra %d", d.Err, d.Final, d.AfterEnd)
	}
	if c, _ := d.Joined(); c != "Hello, world!" || d.Final.Content != c || len(d.Partials) != 3 {
		t.Errorf("partials %q (%d), final %q", c, len(d.Partials), d.Final.Content)
	}
	want := llm.Usage{InputTokens: 9, OutputTokens: 48, CachedTokens: 4, ReasoningTokens: 44}
	if d.Final.Usage != want || d.Final.FinishReason != "STOP" || d.Final.Model != "gemini-2.5-flash" {
		t.Errorf("final usage %+v finish %q model %q", d.Final.Usage, d.Final.FinishReason, d.Final.Model)
	}
	r := f.Last(t)
	if r.Path != "/v1beta/models/gemini-test:streamGenerateContent" || r.Query != "alt=sse" {
		t.Errorf("request to %s?%s", r.Path, r.Query)
	}
	if r.Header.Get("x-goog-api-key") != "AIza-test" || r.Header.Get("Authorization") != "" {
		t.Errorf("headers %v", r.Header)
	}
}

func TestGenerateParallelFunctionCalls(t *testing.T) {
	t.Parallel()
	f := llmtest.NewServer(t, "", llmtest.SSEFile(t, "tools.sse"))
	d := llmtest.Drain(t.Context(), model(t, f), llmtest.UserRequest("Weather in Paris and Tokyo?"))
	if d.Err != nil {
		t.Fatal(d.Err)
	}
	calls := d.Final.ToolCalls
	if len(calls) != 2 || d.Final.Content != "Checking both cities." {
		t.Fatalf("final %+v", d.Final)
	}
	for i, city := range []string{"Paris", "Tokyo"} {
		c := calls[i]
		if c.Name != "get_weather" || string(c.Arguments) != `{"location": "`+city+`"}` || !strings.HasPrefix(c.ID, "call_") {
			t.Errorf("call %d = %+v", i, c)
		}
	}
	if calls[0].ID == calls[1].ID {
		t.Errorf("both calls have id %q", calls[0].ID)
	}
	var deltas []llm.ToolCallDelta
	for _, p := range d.Partials {
		deltas = append(deltas, p.ToolCallDeltas...)
	}
	if len(deltas) != 2 || deltas[0].Index != 0 || deltas[1].Index != 1 || deltas[1].ID != calls[1].ID || deltas[1].Arguments != string(calls[1].Arguments) {
		t.Errorf("deltas %+v", deltas)
	}
	if u := d.Final.Usage; u.InputTokens != 120 || u.OutputTokens != 30 {
		t.Errorf("usage %+v", u)
	}
}

func TestGenerateThoughts(t *testing.T) {
	t.Parallel()
	f := llmtest.NewServer(t, "", llmtest.SSEFile(t, "thoughts.sse"))
	d := llmtest.Drain(t.Context(), model(t, f, func(c *gemini.Config) { c.IncludeThoughts = true }), llmtest.UserRequest("?"))
	if d.Err != nil {
		t.Fatal(d.Err)
	}
	c, r := d.Joined()
	if c != "42" || d.Final.Content != "42" || !strings.HasPrefix(r, "**Weighing") || d.Final.Reasoning != r {
		t.Errorf("content %q reasoning %q final %+v", c, r, d.Final)
	}
	if u := d.Final.Usage; u.OutputTokens != 23 || u.ReasoningTokens != 22 {
		t.Errorf("usage %+v", u)
	}
	if llmtest.Field(f.Last(t).Body, "generationConfig", "thinkingConfig", "includeThoughts") != true {
		t.Errorf("body %v", f.Last(t).Body)
	}
}

func TestGenerateUnary(t *testing.T) {
	t.Parallel()
	f := llmtest.NewServer(t, "", llmtest.JSONError(200, string(llmtest.ReadTestdata(t, "unary.json"))))
	d := llmtest.Drain(t.Context(), model(t, f, func(c *gemini.Config) { c.Unary = true }), llmtest.UserRequest("2+3?"))
	if d.Err != nil || len(d.Partials) != 0 {
		t.Fatalf("err %v, %d partials", d.Err, len(d.Partials))
	}
	tc := d.Final.ToolCalls
	if len(tc) != 1 || tc[0].ID != "fc-7" || tc[0].Name != "add" || string(tc[0].Arguments) != `{"a": 2, "b": 3}` || d.Final.Content != "Let me add them." {
		t.Errorf("final %+v", d.Final)
	}
	if r := f.Last(t); r.Path != "/v1beta/models/gemini-test:generateContent" || r.Query != "" || r.Header.Get("Accept") != "application/json" {
		t.Errorf("request to %s?%s accept %q", r.Path, r.Query, r.Header.Get("Accept"))
	}
}

func TestGenerateStreamedStatus(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		chunk string
		class steptype.ErrorClass
		code  string
	}{
		"unavailable": {`{"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}`, steptype.ErrorTransient, "server_error"},
		"invalid":     {`{"error": {"message": "Bad part", "status": "INVALID_ARGUMENT"}}`, steptype.ErrorPermanent, "bad_request"},
		"unknown":     {`{"error": {"message": "?"}}`, steptype.ErrorTransient, "server_error"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := llmtest.NewServer(t, "", llmtest.SSEBytes([]byte("data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Hi\"}]}}]}\n\ndata: "+tc.chunk+"\n\n")))
			d := llmtest.Drain(t.Context(), model(t, f), llmtest.UserRequest("?"))
			e := llmtest.AsError(t, d.Err)
			var api *gemini.APIError
			if e.Class != tc.class || e.Code != tc.code || !errors.As(d.Err, &api) {
				t.Errorf("error %+v", e)
			}
		})
	}
}

func TestGeneratePromptBlocked(t *testing.T) {
	t.Parallel()
	f := llmtest.NewServer(t, "", llmtest.SSEBytes([]byte(`data: {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 8}}`+"\n\n")))
	d := llmtest.Drain(t.Context(), model(t, f), llmtest.UserRequest("?"))
	if e := llmtest.AsError(t, d.Err); e.Class != steptype.ErrorPermanent || e.Code != "blocked" || !strings.Contains(e.Message, "SAFETY") {
		t.Errorf("error %+v", e)
	}
}

func TestGenerateMalformedFunctionCall(t *testing.T) {
	t.Parallel()
	for name, unary := range map[string]bool{"stream": false, "unary": true} {
		body := `{"candidates": [{"content": {"parts": [{"text": ""}], "role": "model"}, "finishReason": "MALFORMED_FUNCTION_CALL", "index": 0}], "usageMetadata": {"promptTokenCount": 40}}`
		h := llmtest.SSEBytes([]byte("data: " + body + "\n\n"))
		if unary {
			h = llmtest.JSONError(200, body)
		}
		f := llmtest.NewServer(t, "", h)
		d := llmtest.Drain(t.Context(), model(t, f, func(c *gemini.Config) { c.Unary = unary }), llmtest.UserRequest("?"))
		if e := llmtest.AsError(t, d.Err); e.Class != steptype.ErrorTransient || e.Code != "malformed_function_call" {
			t.Errorf("%s: error %+v", name, e)
		}
	}
}
