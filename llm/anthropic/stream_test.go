package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/anthropic"
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
		t.Errorf("%d partials, want one per text_delta (16)", len(r.partials))
	}
	for _, p := range r.partials {
		if p.Content == "" || p.Usage != (llm.Usage{}) || p.FinishReason != "" || len(p.ToolCalls) != 0 {
			t.Errorf("partial carries more than a delta: %+v", p)
		}
	}
	// InputTokens counts the cache reads too, as OpenAI's prompt_tokens does.
	wantUsage := llm.Usage{InputTokens: 12 + 2048, OutputTokens: 19, CachedTokens: 2048}
	if r.final.Usage != wantUsage {
		t.Errorf("usage %+v, want %+v", r.final.Usage, wantUsage)
	}
	if r.final.FinishReason != "end_turn" || r.final.Model != "claude-sonnet-4-5-20250929" || r.final.Partial {
		t.Errorf("final %+v", r.final)
	}
}

func TestGenerateToolUseSplitInput(t *testing.T) {
	t.Parallel()
	s := newServer(t, sseFile(t, "tool_use.sse"))
	r := generate(t.Context(), s.model(t), userReq("weather in Paris?"))
	if r.err != nil {
		t.Fatal(r.err)
	}
	const args = `{"location": "Paris, France", "unit": "celsius", "days": [1, 2, 3]}`
	assertCalls(t, r.final.ToolCalls, []steptype.ToolCall{{ID: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", Name: "get_weather", Arguments: json.RawMessage(args)}})
	if r.final.Content != "I'll check the weather in Paris." || r.final.FinishReason != "tool_use" {
		t.Errorf("final %+v", r.final)
	}
	if r.final.Usage != (llm.Usage{InputTokens: 472, OutputTokens: 89}) {
		t.Errorf("usage %+v", r.final.Usage)
	}
	// The deltas rebuild the call: id and name first, then the input.
	var got strings.Builder
	var first llm.ToolCallDelta
	fragments := 0
	for _, p := range r.partials {
		for _, d := range p.ToolCallDeltas {
			if d.Index != 0 {
				t.Errorf("delta index %d, want 0 (the first call, not content block 1)", d.Index)
			}
			if first.ID == "" {
				first = d
			}
			if d.Arguments != "" {
				fragments++
			}
			got.WriteString(d.Arguments)
		}
	}
	if first.ID != "toolu_01T1x1fJ34qAmk2tNTrN7Up6" || first.Name != "get_weather" || first.Arguments != "" {
		t.Errorf("first delta %+v", first)
	}
	if got.String() != args || fragments < 10 {
		t.Errorf("input deltas %q in %d fragments", got.String(), fragments)
	}
}

func TestGenerateParallelToolUseInterleaved(t *testing.T) {
	t.Parallel()
	s := newServer(t, sseFile(t, "parallel_tool_use.sse"))
	r := generate(t.Context(), s.model(t), userReq("weather and time in Tokyo?"))
	if r.err != nil {
		t.Fatal(r.err)
	}
	assertCalls(t, r.final.ToolCalls, []steptype.ToolCall{
		{ID: "toolu_A", Name: "get_weather", Arguments: json.RawMessage(`{"location":"Tokyo"}`)},
		{ID: "toolu_B", Name: "get_time", Arguments: json.RawMessage(`{"timezone":"Asia/Tokyo"}`)},
	})
	if r.final.Content != "Checking both." {
		t.Errorf("content %q (text given whole in content_block_start)", r.final.Content)
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
	// Cache writes count as input, not as cached.
	if r.final.Usage != (llm.Usage{InputTokens: 2100, OutputTokens: 120}) {
		t.Errorf("usage %+v", r.final.Usage)
	}
}

func TestGenerateThinking(t *testing.T) {
	t.Parallel()
	s := newServer(t, sseFile(t, "thinking.sse"))
	r := generate(t.Context(), s.model(t), userReq("27 * 453?"))
	if r.err != nil {
		t.Fatal(r.err)
	}
	const reasoning = "Let me solve this step by step:\n\n1. First break down 27 * 453\n2. 453 = 400 + 50 + 3"
	if r.final.Reasoning != reasoning || r.final.Content != "27 * 453 = 12,231" {
		t.Errorf("final reasoning %q content %q", r.final.Reasoning, r.final.Content)
	}
	if c, rs := r.joined(); c != r.final.Content || rs != reasoning {
		t.Errorf("partials join to content %q reasoning %q", c, rs)
	}
	if len(r.partials) != 5 {
		t.Errorf("%d partials: the signature_delta must not yield one", len(r.partials))
	}
	if r.final.Usage != (llm.Usage{InputTokens: 45, OutputTokens: 312, ReasoningTokens: 280}) || r.final.Model != "claude-opus-4-1-20250805" {
		t.Errorf("usage %+v model %s", r.final.Usage, r.final.Model)
	}
}

func TestGenerateToolInputGivenWhole(t *testing.T) {
	t.Parallel()
	// Some gateways send the input in content_block_start, with no deltas.
	stream := `event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"a","input":{"x":1}}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":7}}

event: message_stop
data: {"type":"message_stop"}

`
	s := newServer(t, sseBytes([]byte(stream)))
	r := generate(t.Context(), s.model(t), userReq("?"))
	if r.err != nil {
		t.Fatal(r.err)
	}
	assertCalls(t, r.final.ToolCalls, []steptype.ToolCall{{ID: "toolu_1", Name: "a", Arguments: json.RawMessage(`{"x":1}`)}})
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

func TestGenerateTruncatedAfterMessageDelta(t *testing.T) {
	t.Parallel()
	// Everything but message_stop: still truncated.
	stream := `event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":"ok"}}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}

`
	s := newServer(t, sseBytes([]byte(stream)))
	r := generate(t.Context(), s.model(t), userReq("?"))
	if e := llmError(t, r.err); e.Code != "stream_truncated" || e.Class != steptype.ErrorTransient {
		t.Errorf("error %+v", e)
	}
}

func TestGenerateConnectionDroppedMidStream(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"Hel\"}}\n\n"))
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

func TestGenerateMalformedEvent(t *testing.T) {
	t.Parallel()
	s := newServer(t, sseFile(t, "bad_chunk.sse"))
	r := generate(t.Context(), s.model(t), userReq("?"))
	e := llmError(t, r.err)
	if e.Class != steptype.ErrorTransient || e.Code != "bad_chunk" || !strings.Contains(e.Message, "malformed stream event") {
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

func TestGenerateDeltaForUnknownBlock(t *testing.T) {
	t.Parallel()
	stream := `event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"usage":{"input_tokens":5,"output_tokens":1}}}

event: content_block_delta
data: {"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{}"}}

`
	s := newServer(t, sseBytes([]byte(stream)))
	r := generate(t.Context(), s.model(t), userReq("?"))
	if e := llmError(t, r.err); e.Code != "bad_chunk" {
		t.Errorf("error %+v", e)
	}
}

// slowStream sends the start of a message and four text deltas at once,
// then nothing until the client goes away, and reports that on gone.
func slowStream(gone chan<- struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Once\"}}\n\n" + strings.Repeat("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" upon\"}}\n\n", 3))) // one write: the client buffers them all
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
		t.Errorf("%d partials after cancelling: buffered events must not be yielded", partials)
	}
	<-gone // the connection was released
}

func TestGenerateCallTimeout(t *testing.T) {
	t.Parallel()
	gone := make(chan struct{})
	s := newServer(t, slowStream(gone))
	m := s.model(t, func(c *anthropic.Config) { c.Timeout = 50 * time.Millisecond })
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
	m := s.model(t, func(c *anthropic.Config) { c.HTTPClient = &http.Client{Transport: tr} })
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
