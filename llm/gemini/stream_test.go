package gemini_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/gemini"
	"github.com/stepwise-run/stepwise/steptype"
)

func TestGenerateText(t *testing.T) {
	t.Parallel()
	f := newFake(t, serveSSE(t, "text.sse"))
	d := run(t.Context(), f.model(t), ask("Say hello"))
	if d.err != nil || d.final == nil || d.extra != 0 {
		t.Fatalf("err %v final %+v extra %d", d.err, d.final, d.extra)
	}
	if c, _ := d.text(); c != "Hello, world!" || d.final.Content != c || len(d.partials) != 3 {
		t.Errorf("partials %q (%d), final %q", c, len(d.partials), d.final.Content)
	}
	want := llm.Usage{InputTokens: 9, OutputTokens: 48, CachedTokens: 4, ReasoningTokens: 44}
	if d.final.Usage != want || d.final.FinishReason != "STOP" || d.final.Model != "gemini-2.5-flash" {
		t.Errorf("final usage %+v finish %q model %q", d.final.Usage, d.final.FinishReason, d.final.Model)
	}
	r := f.last(t)
	if r.path != "/v1beta/models/gemini-test:streamGenerateContent" || r.query != "alt=sse" {
		t.Errorf("request to %s?%s", r.path, r.query)
	}
	if r.header.Get("x-goog-api-key") != "AIza-test" || r.header.Get("Authorization") != "" {
		t.Errorf("headers %v", r.header)
	}
}

func TestGenerateParallelFunctionCalls(t *testing.T) {
	t.Parallel()
	f := newFake(t, serveSSE(t, "tools.sse"))
	d := run(t.Context(), f.model(t), ask("Weather in Paris and Tokyo?"))
	if d.err != nil {
		t.Fatal(d.err)
	}
	calls := d.final.ToolCalls
	if len(calls) != 2 || d.final.Content != "Checking both cities." {
		t.Fatalf("final %+v", d.final)
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
	for _, p := range d.partials {
		deltas = append(deltas, p.ToolCallDeltas...)
	}
	if len(deltas) != 2 || deltas[0].Index != 0 || deltas[1].Index != 1 || deltas[1].ID != calls[1].ID || deltas[1].Arguments != string(calls[1].Arguments) {
		t.Errorf("deltas %+v", deltas)
	}
	if u := d.final.Usage; u.InputTokens != 120 || u.OutputTokens != 30 {
		t.Errorf("usage %+v", u)
	}
}

func TestGenerateThoughts(t *testing.T) {
	t.Parallel()
	f := newFake(t, serveSSE(t, "thoughts.sse"))
	d := run(t.Context(), f.model(t, func(c *gemini.Config) { c.IncludeThoughts = true }), ask("?"))
	if d.err != nil {
		t.Fatal(d.err)
	}
	c, r := d.text()
	if c != "42" || d.final.Content != "42" || !strings.HasPrefix(r, "**Weighing") || d.final.Reasoning != r {
		t.Errorf("content %q reasoning %q final %+v", c, r, d.final)
	}
	if u := d.final.Usage; u.OutputTokens != 23 || u.ReasoningTokens != 22 {
		t.Errorf("usage %+v", u)
	}
	if at(f.last(t).body, "generationConfig", "thinkingConfig", "includeThoughts") != true {
		t.Errorf("body %v", f.last(t).body)
	}
}

func TestGenerateUnary(t *testing.T) {
	t.Parallel()
	f := newFake(t, answer(200, string(testdata(t, "unary.json"))))
	d := run(t.Context(), f.model(t, func(c *gemini.Config) { c.Unary = true }), ask("2+3?"))
	if d.err != nil || len(d.partials) != 0 {
		t.Fatalf("err %v, %d partials", d.err, len(d.partials))
	}
	tc := d.final.ToolCalls
	if len(tc) != 1 || tc[0].ID != "fc-7" || tc[0].Name != "add" || string(tc[0].Arguments) != `{"a": 2, "b": 3}` || d.final.Content != "Let me add them." {
		t.Errorf("final %+v", d.final)
	}
	if r := f.last(t); r.path != "/v1beta/models/gemini-test:generateContent" || r.query != "" || r.header.Get("Accept") != "application/json" {
		t.Errorf("request to %s?%s accept %q", r.path, r.query, r.header.Get("Accept"))
	}
}

func TestGenerateTruncated(t *testing.T) {
	t.Parallel()
	// Two chunks and no finish reason: the connection closed early.
	data := testdata(t, "text.sse")
	cut := data[:strings.LastIndex(string(data), "data:")]
	f := newFake(t, streamBytes(cut))
	d := run(t.Context(), f.model(t), ask("?"))
	e := asLLMError(t, d.err)
	if e.Class != steptype.ErrorTransient || e.Code != "stream_truncated" || len(d.partials) != 2 {
		t.Errorf("error %+v after %d partials", e, len(d.partials))
	}
}

func TestGenerateMalformedChunk(t *testing.T) {
	t.Parallel()
	f := newFake(t, streamBytes([]byte("data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Hi\"}]}}]}\n\ndata: {\"candidates\": [{\"content\n\n")))
	d := run(t.Context(), f.model(t), ask("?"))
	if e := asLLMError(t, d.err); e.Class != steptype.ErrorTransient || e.Code != "bad_chunk" || len(d.partials) != 1 {
		t.Errorf("error %+v after %d partials", e, len(d.partials))
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
			f := newFake(t, streamBytes([]byte("data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Hi\"}]}}]}\n\ndata: "+tc.chunk+"\n\n")))
			d := run(t.Context(), f.model(t), ask("?"))
			e := asLLMError(t, d.err)
			var api *gemini.APIError
			if e.Class != tc.class || e.Code != tc.code || !errors.As(d.err, &api) {
				t.Errorf("error %+v", e)
			}
		})
	}
}

func TestGeneratePromptBlocked(t *testing.T) {
	t.Parallel()
	f := newFake(t, streamBytes([]byte(`data: {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 8}}`+"\n\n")))
	d := run(t.Context(), f.model(t), ask("?"))
	if e := asLLMError(t, d.err); e.Class != steptype.ErrorPermanent || e.Code != "blocked" || !strings.Contains(e.Message, "SAFETY") {
		t.Errorf("error %+v", e)
	}
}

// hanging streams one chunk, then waits for the client to go away.
func hanging(gone chan<- struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(strings.Repeat(`data: {"candidates": [{"content": {"parts": [{"text": "Once upon"}]}}]}`+"\n\n", 3)))
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
	d := run(t.Context(), f.model(t, func(c *gemini.Config) { c.Timeout = 50 * time.Millisecond }), ask("?"))
	e := asLLMError(t, d.err)
	if e.Class != steptype.ErrorTransient || e.Code != "timeout" || !errors.Is(d.err, context.DeadlineExceeded) {
		t.Errorf("error %+v", e)
	}
	f.Close() // waits for the handler, which saw the client go away if it ran
	if f.count() > 0 {
		select {
		case <-gone:
		default:
			t.Error("the server never saw the client go away")
		}
	}
}
