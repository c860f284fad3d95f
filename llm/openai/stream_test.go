package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/openai"
	"github.com/stepwise-run/stepwise/steptype"
)

func TestGenerateText(t *testing.T) {
	t.Parallel()
	s := newServer(t, sseFile(t, "text.sse"))
	r := generate(t.Context(), s.model(t), userReq("capital of France?"))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.final == nil || r.afterEnd != 0 {
		t.Fatalf("final=%v afterEnd=%d", r.final, r.afterEnd)
	}
	const want = `The capital of France is Paris. It has été called "la Ville Lumière" 🌟.`
	if r.final.Content != want {
		t.Errorf("content %q, want %q", r.final.Content, want)
	}
	if content, _ := r.joined(); content != want {
		t.Errorf("partials join to %q", content)
	}
	if len(r.partials) != 16 {
		t.Errorf("%d partials, want one per content chunk (16)", len(r.partials))
	}
	for _, p := range r.partials {
		if p.Content == "" || p.Usage != (llm.Usage{}) || p.FinishReason != "" || len(p.ToolCalls) != 0 {
			t.Errorf("partial carries more than a delta: %+v", p)
		}
	}
	wantUsage := llm.Usage{InputTokens: 2006, OutputTokens: 17, CachedTokens: 1920}
	if r.final.Usage != wantUsage {
		t.Errorf("usage %+v, want %+v", r.final.Usage, wantUsage)
	}
	if r.final.FinishReason != "stop" || r.final.Model != "gpt-4o-mini-2024-07-18" || r.final.Partial {
		t.Errorf("final %+v", r.final)
	}
	if len(r.final.ToolCalls) != 0 {
		t.Errorf("tool calls %v", r.final.ToolCalls)
	}
}

func TestGenerateToolCallSplitArguments(t *testing.T) {
	t.Parallel()
	s := newServer(t, sseFile(t, "tool_call.sse"))
	r := generate(t.Context(), s.model(t), userReq("weather in Paris?"))
	if r.err != nil {
		t.Fatal(r.err)
	}
	const args = `{"location":"Paris, France","unit":"celsius","days":[1,2,3]}`
	want := []steptype.ToolCall{{ID: "call_DdmO9pD3xa9XTPNJ32zg2hcA", Name: "get_weather", Arguments: json.RawMessage(args)}}
	assertCalls(t, r.final.ToolCalls, want)
	if r.final.FinishReason != "tool_calls" || r.final.Content != "" {
		t.Errorf("final %+v", r.final)
	}
	// The deltas rebuild the call: id and name once, arguments in pieces.
	var got strings.Builder
	var ids, names []string
	fragments := 0
	for _, p := range r.partials {
		for _, d := range p.ToolCallDeltas {
			if d.Index != 0 {
				t.Errorf("delta index %d", d.Index)
			}
			if d.ID != "" {
				ids = append(ids, d.ID)
			}
			if d.Name != "" {
				names = append(names, d.Name)
			}
			if d.Arguments != "" {
				fragments++
			}
			got.WriteString(d.Arguments)
		}
	}
	if got.String() != args || fragments < 10 {
		t.Errorf("argument deltas %q in %d fragments", got.String(), fragments)
	}
	if fmt.Sprint(ids, names) != "[call_DdmO9pD3xa9XTPNJ32zg2hcA] [get_weather]" {
		t.Errorf("ids %v names %v", ids, names)
	}
}

func TestGenerateParallelToolCallsInterleaved(t *testing.T) {
	t.Parallel()
	s := newServer(t, sseFile(t, "parallel_tool_calls.sse"))
	r := generate(t.Context(), s.model(t), userReq("weather and time in Tokyo?"))
	if r.err != nil {
		t.Fatal(r.err)
	}
	assertCalls(t, r.final.ToolCalls, []steptype.ToolCall{
		{ID: "call_A", Name: "get_weather", Arguments: json.RawMessage(`{"location":"Tokyo"}`)},
		{ID: "call_B", Name: "get_time", Arguments: json.RawMessage(`{"timezone":"Asia/Tokyo"}`)},
	})
	if r.final.Content != "Checking both." {
		t.Errorf("content %q", r.final.Content)
	}
	perIndex := map[int]string{}
	for _, p := range r.partials {
		for _, d := range p.ToolCallDeltas {
			perIndex[d.Index] += d.Arguments
		}
	}
	if perIndex[0] != `{"location":"Tokyo"}` || perIndex[1] != `{"timezone":"Asia/Tokyo"}` || len(perIndex) != 2 {
		t.Errorf("deltas by index %v", perIndex)
	}
	if r.final.Usage.CachedTokens != 64 || r.final.Usage.InputTokens != 120 || r.final.Usage.OutputTokens != 40 {
		t.Errorf("usage %+v", r.final.Usage)
	}
}

func TestGenerateReasoningContent(t *testing.T) {
	t.Parallel()
	s := newServer(t, sseFile(t, "reasoning.sse"))
	r := generate(t.Context(), s.model(t), userReq("hi"))
	if r.err != nil {
		t.Fatal(r.err)
	}
	const reasoning = "Okay, the user says hi. Reply briefly."
	const content = "Hello! How can I help?"
	if r.final.Reasoning != reasoning || r.final.Content != content {
		t.Errorf("final reasoning %q content %q", r.final.Reasoning, r.final.Content)
	}
	if c, rs := r.joined(); c != content || rs != reasoning {
		t.Errorf("partials join to content %q reasoning %q", c, rs)
	}
	// Usage on the finish chunk (DeepSeek) instead of a separate chunk.
	want := llm.Usage{InputTokens: 13, OutputTokens: 40, ReasoningTokens: 31}
	if r.final.Usage != want || r.final.Model != "deepseek-reasoner" {
		t.Errorf("usage %+v model %q", r.final.Usage, r.final.Model)
	}
}

func TestGenerateReasoningField(t *testing.T) {
	t.Parallel()
	// OpenRouter and recent vLLM name the field "reasoning".
	stream := `data: {"id":"gen-1","object":"chat.completion.chunk","created":1,"model":"qwen/qwen3-32b","choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":"Think \"hard\"\u2026"},"finish_reason":null}]}

data: {"id":"gen-1","object":"chat.completion.chunk","created":1,"model":"qwen/qwen3-32b","choices":[{"index":0,"delta":{"content":"42","reasoning":null},"finish_reason":"stop"}]}

data: [DONE]

`
	s := newServer(t, sseBytes([]byte(stream)))
	r := generate(t.Context(), s.model(t), userReq("?"))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.final.Reasoning != `Think "hard"…` || r.final.Content != "42" {
		t.Errorf("final %+v", r.final)
	}
}

func TestGenerateToolCallsAllAtIndexZero(t *testing.T) {
	t.Parallel()
	// Some servers send every parallel call whole, each at index 0.
	stream := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"a","arguments":"{\"x\":1}"}}]},"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_2","type":"function","function":{"name":"b","arguments":""}}]},"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

`
	s := newServer(t, sseBytes([]byte(stream)))
	r := generate(t.Context(), s.model(t), userReq("?"))
	if r.err != nil {
		t.Fatal(r.err)
	}
	assertCalls(t, r.final.ToolCalls, []steptype.ToolCall{
		{ID: "call_1", Name: "a", Arguments: json.RawMessage(`{"x":1}`)},
		{ID: "call_2", Name: "b", Arguments: json.RawMessage(`{}`)},
	})
	if d := r.partials[1].ToolCallDeltas[0]; d.Index != 1 || d.ID != "call_2" {
		t.Errorf("second call delta %+v, want index 1", d)
	}
}

func TestGenerateInvalidArgumentsBecomeString(t *testing.T) {
	t.Parallel()
	stream := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"a","arguments":"{\"x\": 1"}}]},"finish_reason":"tool_calls"}]}

data: [DONE]

`
	s := newServer(t, sseBytes([]byte(stream)))
	r := generate(t.Context(), s.model(t), userReq("?"))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := string(r.final.ToolCalls[0].Arguments); got != `"{\"x\": 1"` {
		t.Errorf("arguments %s, want the broken text as a JSON string", got)
	}
}

func TestGenerateTruncatedMidEvent(t *testing.T) {
	t.Parallel()
	s := newServer(t, sseFile(t, "truncated.sse"))
	r := generate(t.Context(), s.model(t), userReq("?"))
	e := llmError(t, r.err)
	if e.Class != steptype.ErrorTransient || e.Code != "stream_truncated" {
		t.Errorf("error %+v", e)
	}
	if r.final != nil || len(r.partials) != 4 || r.afterEnd != 0 {
		t.Errorf("final %v, %d partials, %d after the error", r.final, len(r.partials), r.afterEnd)
	}
}

func TestGenerateConnectionDroppedMidStream(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}` + "\n\n"))
		_ = http.NewResponseController(w).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // RST instead of FIN
			}
			_ = conn.Close()
		}
	})
	r := generate(t.Context(), s.model(t), userReq("?"))
	e := llmError(t, r.err)
	if e.Class != steptype.ErrorTransient || e.Code != "stream_truncated" || len(r.partials) != 1 {
		t.Errorf("error %+v after %d partials", e, len(r.partials))
	}
}

func TestGenerateFinishWithoutDone(t *testing.T) {
	t.Parallel()
	// A clean close after the finish chunk lost only "[DONE]": accepted.
	stream := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}

`
	s := newServer(t, sseBytes([]byte(stream)))
	r := generate(t.Context(), s.model(t), userReq("?"))
	if r.err != nil || r.final == nil || r.final.Content != "ok" {
		t.Fatalf("final %+v err %v", r.final, r.err)
	}
}

func TestGenerateMalformedChunk(t *testing.T) {
	t.Parallel()
	s := newServer(t, sseFile(t, "bad_chunk.sse"))
	r := generate(t.Context(), s.model(t), userReq("?"))
	e := llmError(t, r.err)
	if e.Class != steptype.ErrorTransient || e.Code != "bad_chunk" || !strings.Contains(e.Message, "malformed stream chunk") {
		t.Errorf("error %+v", e)
	}
	var syntax *json.SyntaxError
	if !errors.As(r.err, &syntax) {
		t.Errorf("cause %T, want *json.SyntaxError", e.Err)
	}
	if r.final != nil || len(r.partials) != 1 || r.afterEnd != 0 {
		t.Errorf("final %v, %d partials, %d after the error", r.final, len(r.partials), r.afterEnd)
	}
}

// slowStream sends four chunks at once, then nothing until the client goes
// away, and reports that on gone.
func slowStream(gone chan<- struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		var b strings.Builder
		for _, word := range []string{"Once", " upon", " a", " time"} {
			b.WriteString(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"` + word + `"},"finish_reason":null}]}` + "\n\n")
		}
		_, _ = w.Write([]byte(b.String())) // one write: the client buffers them all
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done()
		close(gone)
	}
}

func TestGenerateCancelledMidStream(t *testing.T) {
	t.Parallel()
	gone := make(chan struct{})
	s := newServer(t, slowStream(gone))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var partials int
	var got error
	for resp, err := range s.model(t).Generate(ctx, userReq("tell a long story")) {
		if err != nil {
			got = err
			break
		}
		partials++
		if resp.Partial {
			cancel() // the server will never send more
		}
	}
	if got != context.Canceled {
		t.Fatalf("error %v, want context.Canceled itself", got)
	}
	if partials != 1 {
		t.Errorf("%d partials after cancelling: buffered chunks must not be yielded", partials)
	}
	<-gone // the connection was released
}

func TestGenerateCallTimeout(t *testing.T) {
	t.Parallel()
	gone := make(chan struct{})
	s := newServer(t, slowStream(gone))
	m := s.model(t, func(c *openai.Config) { c.Timeout = 50 * time.Millisecond })
	r := generate(t.Context(), m, userReq("?"))
	e := llmError(t, r.err)
	if e.Class != steptype.ErrorTransient || e.Code != "timeout" || !errors.Is(r.err, context.DeadlineExceeded) {
		t.Errorf("error %+v", e)
	}
	// Under load the 50 ms can end before the request reaches the server;
	// then no handler runs and gone never closes. Close waits for every
	// handler, so afterwards a server that saw the request saw it go away.
	s.Close()
	if s.count() > 0 {
		select {
		case <-gone:
		default:
			t.Error("the server never saw the client go away")
		}
	}
}

func TestGenerateBreakReleasesConnection(t *testing.T) {
	// Not parallel: it counts goroutines.
	gone := make(chan struct{})
	s := newServer(t, slowStream(gone))
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	m := s.model(t, func(c *openai.Config) { c.HTTPClient = &http.Client{Transport: tr} })
	before := runtime.NumGoroutine()
	for range m.Generate(t.Context(), userReq("?")) {
		break
	}
	<-gone // the server saw the client close the connection
	tr.CloseIdleConnections()
	for i := 0; ; i++ {
		n := runtime.NumGoroutine()
		if n <= before {
			break
		}
		if i == 200 {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines before, %d after breaking out:\n%s", before, n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func assertCalls(t *testing.T, got, want []steptype.ToolCall) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("tool calls\n got %s\nwant %s", g, w)
	}
}
