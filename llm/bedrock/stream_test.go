package bedrock_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/bedrock"
	"github.com/stepwise-run/stepwise/steptype"
)

func TestGenerateText(t *testing.T) {
	t.Parallel()
	f := newFake(t, serveEvents(eventFile(t, "text.events")))
	d := run(t.Context(), f.model(t), ask("Say hello"))
	if d.err != nil || d.final == nil || d.extra != 0 {
		t.Fatalf("err %v final %+v extra %d", d.err, d.final, d.extra)
	}
	if c, _ := d.text(); c != "Hello, world!" || d.final.Content != c || len(d.partials) != 2 {
		t.Errorf("partials %q (%d), final %q", c, len(d.partials), d.final.Content)
	}
	if want := (llm.Usage{InputTokens: 132, OutputTokens: 6, CachedTokens: 100}); d.final.Usage != want || d.final.FinishReason != "end_turn" {
		t.Errorf("usage %+v finish %q", d.final.Usage, d.final.FinishReason)
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
	d := run(t.Context(), f.model(t), ask("Weather in Paris and Tokyo?"))
	if d.err != nil {
		t.Fatal(d.err)
	}
	tc := d.final.ToolCalls
	if len(tc) != 2 || d.final.Content != "Checking both." || d.final.FinishReason != "tool_use" {
		t.Fatalf("final %+v", d.final)
	}
	if tc[0].ID != "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q" || tc[0].Name != "get_weather" || string(tc[0].Arguments) != `{"location": "Paris"}` {
		t.Errorf("call 0 %+v", tc[0])
	}
	if tc[1].ID != "tooluse_2" || string(tc[1].Arguments) != `{"location": "Tokyo"}` {
		t.Errorf("call 1 %+v", tc[1])
	}
	var args [2]string
	for _, p := range d.partials {
		for _, dl := range p.ToolCallDeltas {
			args[dl.Index] += dl.Arguments
		}
	}
	if args[0] != string(tc[0].Arguments) || args[1] != string(tc[1].Arguments) {
		t.Errorf("streamed arguments %q", args)
	}
	if u := d.final.Usage; u.InputTokens != 410 || u.OutputTokens != 88 {
		t.Errorf("usage %+v", u)
	}
}

func TestGenerateReasoning(t *testing.T) {
	t.Parallel()
	f := newFake(t, serveEvents(eventFile(t, "reasoning.events")))
	d := run(t.Context(), f.model(t), ask("?"))
	if d.err != nil {
		t.Fatal(d.err)
	}
	if c, r := d.text(); c != "42" || r != "The user wants a number." || d.final.Reasoning != r || d.final.Content != c {
		t.Errorf("content %q reasoning %q final %+v", c, r, d.final)
	}
}

func TestGenerateUnary(t *testing.T) {
	t.Parallel()
	body, err := os.ReadFile(filepath.Join("testdata", "converse.json"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFake(t, answer(200, string(body)))
	d := run(t.Context(), f.model(t, func(c *bedrock.Config) { c.Unary = true; c.Model = "us.amazon.nova-pro-v1:0" }), ask("2+3?"))
	if d.err != nil || len(d.partials) != 0 {
		t.Fatalf("err %v, %d partials", d.err, len(d.partials))
	}
	fin := d.final
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
		d := run(t.Context(), f.model(t), ask("?"))
		if e := asLLMError(t, d.err); e.Class != steptype.ErrorTransient || e.Code != "stream_truncated" {
			t.Errorf("%s: error %+v", name, e)
		}
	}
}

func TestGenerateBadFrame(t *testing.T) {
	t.Parallel()
	data := eventFile(t, "text.events")
	data[len(data)-1] ^= 0xff // the last message's checksum
	f := newFake(t, serveEvents(data))
	d := run(t.Context(), f.model(t), ask("?"))
	if e := asLLMError(t, d.err); e.Class != steptype.ErrorTransient || e.Code != "bad_chunk" || len(d.partials) != 2 {
		t.Errorf("error %+v after %d partials", e, len(d.partials))
	}
}

func TestGenerateBadPayload(t *testing.T) {
	t.Parallel()
	f := newFake(t, serveEvents(append(frame("messageStart", `{"role":"assistant"}`), frame("contentBlockDelta", `{"delta":`)...)))
	d := run(t.Context(), f.model(t), ask("?"))
	if e := asLLMError(t, d.err); e.Class != steptype.ErrorTransient || e.Code != "bad_chunk" {
		t.Errorf("error %+v", e)
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
		d := run(t.Context(), f.model(t), ask("?"))
		e := asLLMError(t, d.err)
		var api *bedrock.APIError
		if e.Class != want.class || e.Code != want.code || e.Message != "Too many tokens, please wait before trying again." || !errors.As(d.err, &api) || api.Type != strings.ToUpper(typ[:1])+typ[1:] {
			t.Errorf("%s: error %+v cause %+v", typ, e, api)
		}
	}
}

// hanging streams two events, then waits for the client to go away.
func hanging(gone chan<- struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		data := append(frame("messageStart", `{"role":"assistant"}`), frame("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Once"}}`)...)
		data = append(data, frame("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":" upon"}}`)...)
		_, _ = w.Write(data)
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done()
		close(gone)
	}
}

func TestGenerateCancelled(t *testing.T) {
	t.Parallel()
	gone := make(chan struct{})
	f := newFake(t, hanging(gone))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	partials := 0
	var got error
	for r, err := range f.model(t).Generate(ctx, ask("a long story")) {
		if err != nil {
			got = err
			break
		}
		partials++
		if r.Partial {
			cancel()
		}
	}
	if got != context.Canceled || partials != 1 {
		t.Fatalf("error %v after %d partials, want context.Canceled itself after 1", got, partials)
	}
	<-gone
}

func TestGenerateCallTimeout(t *testing.T) {
	t.Parallel()
	gone := make(chan struct{})
	f := newFake(t, hanging(gone))
	d := run(t.Context(), f.model(t, func(c *bedrock.Config) { c.Timeout = 50 * time.Millisecond }), ask("?"))
	e := asLLMError(t, d.err)
	if e.Class != steptype.ErrorTransient || e.Code != "timeout" || !errors.Is(d.err, context.DeadlineExceeded) {
		t.Errorf("error %+v", e)
	}
	f.Close()
	if f.count() > 0 {
		select {
		case <-gone:
		default:
			t.Error("the server never saw the client go away")
		}
	}
}
