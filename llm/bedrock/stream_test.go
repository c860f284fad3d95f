package bedrock_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/bedrock"
	"github.com/stepwise-run/stepwise/llm/llmtest"
	"github.com/stepwise-run/stepwise/steptype"
)

func TestGenerateText(t *testing.T) {
	t.Parallel()
	f := newFake(t, serveEvents(eventFile(t, "text.events")))
	d := llmtest.Drain(t.Context(), f.model(t), llmtest.UserRequest("Say hello"))
	if d.Err != nil || d.Final == nil || d.AfterEnd != 0 {
		t.Fatalf("err %v final %+v extra %d", d.Err, d.Final, d.AfterEnd)
	}
	if c, _ := d.Joined(); c != "Hello, world!" || d.Final.Content != c || len(d.Partials) != 2 {
		t.Errorf("partials %q (%d), final %q", c, len(d.Partials), d.Final.Content)
	}
	if want := (llm.Usage{InputTokens: 132, OutputTokens: 6, CachedTokens: 100}); d.Final.Usage != want || d.Final.FinishReason != "end_turn" {
		t.Errorf("usage %+v finish %q", d.Final.Usage, d.Final.FinishReason)
	}
	r := f.last(t)
	if r.rawPath != "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream" {
		t.Errorf("path %s", r.rawPath)
	}
	if r.header.Get("X-Amz-Security-Token") != "session" || r.header.Get("X-Amz-Date") == "" || r.header.Get("Accept") != "application/vnd.amazon.eventstream" {
		t.Errorf("headers %v", r.header)
	}
	if !strings.Contains(r.header.Get("Authorization"), "SignedHeaders=accept;content-type;host;x-amz-date;x-amz-security-token,") {
		t.Errorf("authorization %s", r.header.Get("Authorization"))
	}
}

func TestGenerateParallelToolUse(t *testing.T) {
	t.Parallel()
	f := newFake(t, serveEvents(eventFile(t, "tools.events")))
	d := llmtest.Drain(t.Context(), f.model(t), llmtest.UserRequest("Weather in Paris and Tokyo?"))
	if d.Err != nil {
		t.Fatal(d.Err)
	}
	tc := d.Final.ToolCalls
	if len(tc) != 2 || d.Final.Content != "Checking both." || d.Final.FinishReason != "tool_use" {
		t.Fatalf("final %+v", d.Final)
	}
	if tc[0].ID != "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q" || tc[0].Name != "get_weather" || string(tc[0].Arguments) != `{"location": "Paris"}` {
		t.Errorf("call 0 %+v", tc[0])
	}
	if tc[1].ID != "tooluse_2" || string(tc[1].Arguments) != `{"location": "Tokyo"}` {
		t.Errorf("call 1 %+v", tc[1])
	}
	var args [2]string
	for _, p := range d.Partials {
		for _, dl := range p.ToolCallDeltas {
			args[dl.Index] += dl.Arguments
		}
	}
	if args[0] != string(tc[0].Arguments) || args[1] != string(tc[1].Arguments) {
		t.Errorf("streamed arguments %q", args)
	}
	if u := d.Final.Usage; u.InputTokens != 410 || u.OutputTokens != 88 {
		t.Errorf("usage %+v", u)
	}
}

func TestGenerateReasoning(t *testing.T) {
	t.Parallel()
	f := newFake(t, serveEvents(eventFile(t, "reasoning.events")))
	d := llmtest.Drain(t.Context(), f.model(t), llmtest.UserRequest("?"))
	if d.Err != nil {
		t.Fatal(d.Err)
	}
	if c, r := d.Joined(); c != "42" || r != "The user wants a number." || d.Final.Reasoning != r || d.Final.Content != c {
		t.Errorf("content %q reasoning %q final %+v", c, r, d.Final)
	}
}

func TestGenerateUnary(t *testing.T) {
	t.Parallel()
	body, err := os.ReadFile(filepath.Join("testdata", "converse.json"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFake(t, llmtest.JSONError(200, string(body)))
	d := llmtest.Drain(t.Context(), f.model(t, func(c *bedrock.Config) { c.Unary = true; c.Model = "us.amazon.nova-pro-v1:0" }), llmtest.UserRequest("2+3?"))
	if d.Err != nil || len(d.Partials) != 0 {
		t.Fatalf("err %v, %d partials", d.Err, len(d.Partials))
	}
	fin := d.Final
	if fin.Content != "Let me add them." || fin.Reasoning != "Add them." || len(fin.ToolCalls) != 1 || fin.ToolCalls[0].ID != "tooluse_add" || string(fin.ToolCalls[0].Arguments) != `{"a": 2, "b": 3}` {
		t.Errorf("final %+v", fin)
	}
	if fin.Usage.InputTokens != 30 || fin.FinishReason != "tool_use" {
		t.Errorf("usage %+v finish %q", fin.Usage, fin.FinishReason)
	}
	if r := f.last(t); r.rawPath != "/model/us.amazon.nova-pro-v1%3A0/converse" {
		t.Errorf("path %s", r.rawPath)
	}
}

func TestGenerateTruncated(t *testing.T) {
	t.Parallel()
	data := eventFile(t, "text.events")
	for name, cut := range map[string][]byte{
		"before messageStop": data[:len(data)-len(frame("metadata", `{}`))-400],
		"inside a message":   data[:60],
	} {
		f := newFake(t, serveEvents(cut))
		d := llmtest.Drain(t.Context(), f.model(t), llmtest.UserRequest("?"))
		if e := llmtest.AsError(t, d.Err); e.Class != steptype.ErrorTransient || e.Code != "stream_truncated" {
			t.Errorf("%s: error %+v", name, e)
		}
	}
}

func TestGenerateBadFrame(t *testing.T) {
	t.Parallel()
	data := eventFile(t, "text.events")
	data[len(data)-1] ^= 0xff // the last message's checksum
	f := newFake(t, serveEvents(data))
	d := llmtest.Drain(t.Context(), f.model(t), llmtest.UserRequest("?"))
	if e := llmtest.AsError(t, d.Err); e.Class != steptype.ErrorTransient || e.Code != "bad_chunk" || len(d.Partials) != 2 {
		t.Errorf("error %+v after %d partials", e, len(d.Partials))
	}
}

func TestGenerateStreamedExceptions(t *testing.T) {
	t.Parallel()
	for typ, want := range map[string]struct {
		class steptype.ErrorClass
		code  string
	}{
		"throttlingException":         {steptype.ErrorTransient, "rate_limited"},
		"ThrottlingException":         {steptype.ErrorTransient, "rate_limited"},
		"modelStreamErrorException":   {steptype.ErrorTransient, "model_error"},
		"internalServerException":     {steptype.ErrorTransient, "server_error"},
		"serviceUnavailableException": {steptype.ErrorTransient, "server_error"},
		"validationException":         {steptype.ErrorPermanent, "bad_request"},
		"somethingNewException":       {steptype.ErrorTransient, "server_error"},
	} {
		data := append(frame("messageStart", `{"role":"assistant"}`), frame("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hi"}}`)...)
		data = append(data, frame("!"+typ, `{"message":"Too many tokens, please wait before trying again."}`)...)
		f := newFake(t, serveEvents(data))
		d := llmtest.Drain(t.Context(), f.model(t), llmtest.UserRequest("?"))
		e := llmtest.AsError(t, d.Err)
		var api *bedrock.APIError
		if e.Class != want.class || e.Code != want.code || e.Message != "Too many tokens, please wait before trying again." || !errors.As(d.Err, &api) || api.Type != strings.ToUpper(typ[:1])+typ[1:] {
			t.Errorf("%s: error %+v cause %+v", typ, e, api)
		}
	}
}
