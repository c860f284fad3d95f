package scripted_test

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/steptype"
)

func itoa(i int) string { return strconv.Itoa(i) }

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func texts(parts []*llm.Response) (content, reasoning []string) {
	for _, p := range parts {
		if p.Content != "" {
			content = append(content, p.Content)
		}
		if p.Reasoning != "" {
			reasoning = append(reasoning, p.Reasoning)
		}
	}
	return content, reasoning
}

func TestChunking(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src string
		content   []string
	}{
		{"default 8", "turns: [{text: abcdefghijklmnopqrs}]", []string{"abcdefgh", "ijklmnop", "qrs"}},
		{"chunk 4", "turns: [{text: abcdefghij, chunk: 4}]", []string{"abcd", "efgh", "ij"}},
		{"chunk 0 is one delta", "turns: [{text: abcdefghijklmnopqrs, chunk: 0}]", []string{"abcdefghijklmnopqrs"}},
		{"runes are not split", "turns: [{text: héllo wörld, chunk: 3}]", []string{"hél", "lo ", "wör", "ld"}},
		{"exact multiple", "turns: [{text: abcd, chunk: 2}]", []string{"ab", "cd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			parts, f, err := call(t, mustParse(t, "c.yaml", tt.src), request(user("x")))
			if err != nil {
				t.Fatal(err)
			}
			content, _ := texts(parts)
			if !reflect.DeepEqual(content, tt.content) {
				t.Fatalf("deltas %q, want %q", content, tt.content)
			}
			if f.Content != strings.Join(tt.content, "") {
				t.Fatalf("final %q", f.Content)
			}
		})
	}
}

func TestStreamOrderReasoningContentCalls(t *testing.T) {
	t.Parallel()
	m := mustParse(t, "o.yaml", "turns:\n  - reasoning: because\n    text: hi\n    tool_calls: [{name: a}]\n    chunk: 4\n")
	parts, f, err := call(t, m, request(user("x")))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, p := range parts {
		switch {
		case p.Reasoning != "":
			kinds = append(kinds, "r:"+p.Reasoning)
		case p.Content != "":
			kinds = append(kinds, "c:"+p.Content)
		case len(p.ToolCallDeltas) == 1:
			kinds = append(kinds, "t:"+p.ToolCallDeltas[0].Name+p.ToolCallDeltas[0].Arguments)
		default:
			t.Fatalf("odd partial %+v", p)
		}
	}
	if want := []string{"r:beca", "r:use", "c:hi", "t:a{}"}; !reflect.DeepEqual(kinds, want) {
		t.Fatalf("order %q, want %q", kinds, want)
	}
	if f.Reasoning != "because" || f.Content != "hi" || f.FinishReason != "tool_calls" || f.Model != "o" {
		t.Fatalf("final %+v", f)
	}
}

func TestToolCallDeltasReassemble(t *testing.T) {
	t.Parallel()
	m := mustParse(t, "t.yaml", `turns:
  - tool_calls:
      - name: search
        arguments: {query: "stepwise durable step log", filters: {lang: [go, rust]}, limit: 10, exact: true, score: 0.5, none: null}
      - name: clock
      - name: write
        id: custom-id
        arguments: '{"path": "/tmp/a.txt", "text": "ünïcödé ✓"}'
    chunk: 5
`)
	parts, f, err := call(t, m, request(user("x")))
	if err != nil {
		t.Fatal(err)
	}
	type acc struct{ id, name, args string }
	var got []acc
	for _, p := range parts {
		for _, d := range p.ToolCallDeltas {
			for len(got) <= d.Index {
				got = append(got, acc{})
			}
			a := &got[d.Index]
			if d.ID != "" {
				a.id = d.ID
			}
			if d.Name != "" {
				a.name = d.Name
			}
			a.args += d.Arguments
			if len(d.Arguments) > 0 && len([]rune(d.Arguments)) > 5 {
				t.Fatalf("delta %q longer than 5 characters", d.Arguments)
			}
		}
	}
	if len(got) != len(f.ToolCalls) {
		t.Fatalf("%d calls from deltas, %d in final", len(got), len(f.ToolCalls))
	}
	for i, tc := range f.ToolCalls {
		if got[i] != (acc{tc.ID, tc.Name, string(tc.Arguments)}) {
			t.Fatalf("call %d: deltas %+v, final %+v", i, got[i], tc)
		}
	}
	want := []steptype.ToolCall{
		{ID: "call_0_0", Name: "search", Arguments: []byte(`{"query":"stepwise durable step log","filters":{"lang":["go","rust"]},"limit":10,"exact":true,"score":0.5,"none":null}`)},
		{ID: "call_0_1", Name: "clock", Arguments: []byte(`{}`)},
		{ID: "custom-id", Name: "write", Arguments: []byte(`{"path":"/tmp/a.txt","text":"ünïcödé ✓"}`)},
	}
	if !reflect.DeepEqual(f.ToolCalls, want) {
		t.Fatalf("final calls\n got %s\nwant %s", args(f.ToolCalls), args(want))
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	m := mustParse(t, "u.yaml", `turns:
  - text: 12345678
    reasoning: abcde
  - text: x
    usage: {input_tokens: 100, output_tokens: 7, cached_tokens: 90, reasoning_tokens: 3}
  - text: y
    usage: {cached_tokens: 5}
`)
	req := &llm.Request{System: "sys", Messages: []llm.Message{user("hello world")}} // 3+11 = 14 bytes
	got := final(t, m, req).Usage
	if want := (llm.Usage{InputTokens: 4, OutputTokens: 4, ReasoningTokens: 2}); got != want {
		t.Fatalf("estimated usage %+v, want %+v", got, want)
	}
	req.Messages = append(req.Messages, llm.Message{Role: steptype.RoleAssistant, Content: "ab",
		ToolCalls: []steptype.ToolCall{{ID: "i", Name: "n", Arguments: []byte("{}")}}}) // +2+1+1+2 = 20
	if got := final(t, m, req).Usage; got != (llm.Usage{InputTokens: 100, OutputTokens: 7, CachedTokens: 90, ReasoningTokens: 3}) {
		t.Fatalf("explicit usage %+v", got)
	}
	req.Messages = append(req.Messages, assistant("abcd")) // 24
	if got := final(t, m, req).Usage; got != (llm.Usage{InputTokens: 6, OutputTokens: 1, CachedTokens: 5}) {
		t.Fatalf("partly explicit usage %+v", got)
	}
}

func TestSimulatedErrors(t *testing.T) {
	t.Parallel()
	m, err := scripted.Load("testdata/flaky.yaml")
	if err != nil {
		t.Fatal(err)
	}
	check := func(req *llm.Request) {
		t.Helper()
		for i := range 2 {
			_, _, err := call(t, m, req)
			var le *llm.Error
			if !errors.As(err, &le) {
				t.Fatalf("call %d: got %v, want *llm.Error", i, err)
			}
			if le.StatusCode != 429 || le.Code != "rate_limited" || le.Class != steptype.ErrorTransient ||
				le.RetryAfter != 2*time.Second || le.Message != "slow down" {
				t.Fatalf("call %d: %+v", i, le)
			}
			if llm.Classify(err) != steptype.ErrorTransient || llm.RetryAfter(err) != 2*time.Second {
				t.Fatalf("classification of %v", err)
			}
		}
		if f := final(t, m, req); f.Content != "Made it after two rate limits." {
			t.Fatalf("third call: %+v", f)
		}
	}
	check(request(user("a")))
	// Another conversation reaching the turn counts its own failures.
	check(request(user("b")))
	// The permanent error never goes away.
	req := request(user("a"), assistant("Made it after two rate limits."))
	for range 3 {
		_, _, err := call(t, m, req)
		var le *llm.Error
		if !errors.As(err, &le) || le.StatusCode != 400 || le.Class != steptype.ErrorPermanent || le.Code != "bad_request" {
			t.Fatalf("got %v, want a permanent 400", err)
		}
	}
	// Counters live in the Model: a fresh instance (a restarted process) fails again.
	m2, _ := scripted.Load("testdata/flaky.yaml")
	if _, _, err := call(t, m2, request(user("a"))); err == nil {
		t.Fatal("a new Model did not fail")
	}
}

func TestStatusTextDefault(t *testing.T) {
	t.Parallel()
	m := mustParse(t, "s.yaml", "turns: [{error: {status: 503}}]")
	_, _, err := call(t, m, request())
	if err == nil || err.Error() != "llm: server_error (HTTP 503): Service Unavailable" {
		t.Fatalf("got %v", err)
	}
}

func TestLatency(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := mustParse(t, "lat.yaml", "turns: [{text: abcdef, chunk: 2, delay: 2s, chunk_delay: 100ms}]")
		start := time.Now()
		var at []time.Duration
		for r, err := range m.Generate(context.Background(), request(user("x"))) {
			if err != nil {
				t.Fatal(err)
			}
			_ = r
			at = append(at, time.Since(start))
		}
		want := []time.Duration{2 * time.Second, 2100 * time.Millisecond, 2200 * time.Millisecond, 2300 * time.Millisecond}
		if !reflect.DeepEqual(at, want) {
			t.Fatalf("yield times %v, want %v", at, want)
		}
	})
}

func TestCancellation(t *testing.T) {
	t.Parallel()
	t.Run("already cancelled", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		n := 0
		for _, err := range scripted.Loop("a", "", 1, "").Generate(ctx, request()) {
			n++
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("got %v", err)
			}
		}
		if n != 1 {
			t.Fatalf("%d values, want 1", n)
		}
	})
	for _, src := range []string{
		"turns: [{text: abc, delay: 1h}]",
		"turns: [{text: abcdef, chunk: 1, chunk_delay: 1h}]",
		"turns: [{error: {status: 500}, delay: 1h}]",
	} {
		t.Run(src, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				m := mustParse(t, "c.yaml", src)
				ctx, cancel := context.WithCancel(context.Background())
				start := time.Now()
				time.AfterFunc(time.Second, cancel)
				var last error
				for _, err := range m.Generate(ctx, request(user("x"))) {
					last = err
				}
				if !errors.Is(last, context.Canceled) {
					t.Fatalf("last value %v, want context.Canceled", last)
				}
				if d := time.Since(start); d != time.Second {
					t.Fatalf("returned after %v of fake time, want 1s", d)
				}
			})
		})
	}
}

func TestBreakStopsTheStream(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := mustParse(t, "b.yaml", "turns: [{text: abcdefgh, chunk: 1, chunk_delay: 1s}]")
		start := time.Now()
		for r, err := range m.Generate(context.Background(), request()) {
			if err != nil || r.Content != "a" {
				t.Fatalf("first value %+v %v", r, err)
			}
			break
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("break took %v of fake time, want 0", d)
		}
	})
}

func TestStrictRefusesMalformedSequences(t *testing.T) {
	t.Parallel()
	m, err := scripted.Parse("strict.yaml", []byte("strict: true\nloop: true\nturns: [{text: fine}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	lax := scripted.New("lax", scripted.Script{Turns: []scripted.Turn{{Text: "fine"}}})
	bad := &llm.Request{Messages: []llm.Message{
		{Role: steptype.RoleUser, Content: "hi"},
		{Role: steptype.RoleAssistant, ToolCalls: []steptype.ToolCall{{ID: "a", Name: "t"}, {ID: "b", Name: "t"}}},
		{Role: steptype.RoleTool, ToolCallID: "a", Content: "ok"},
		{Role: steptype.RoleUser, Content: "and?"},
	}}
	_, err = llm.Complete(context.Background(), m, bad)
	var le *llm.Error
	if !errors.As(err, &le) || le.StatusCode != 400 || le.Code != "invalid_sequence" || !contains(err.Error(), ": b") {
		t.Fatalf("strict model accepted a missing tool result: %v", err)
	}
	if _, err := llm.Complete(context.Background(), lax, bad); err != nil {
		t.Fatalf("lax model: %v", err)
	}
	good := &llm.Request{Messages: append(bad.Messages[:3:3], llm.Message{Role: steptype.RoleTool, ToolCallID: "b", Content: "ok"}, bad.Messages[3])}
	if r, err := llm.Complete(context.Background(), m, good); err != nil || r.Content != "fine" {
		t.Fatalf("strict model refused a valid request: %+v %v", r, err)
	}
}

func TestFailureAfterPartialText(t *testing.T) {
	t.Parallel()
	m, err := scripted.Parse("cut.yaml", []byte("turns:\n  - {text: \"Hello there, friend\", chunk: 4, error: {status: 502, times: 1, after: 9}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	parts, fin, err := call(t, m, request(user("hi")))
	var got []string
	for _, p := range parts {
		got = append(got, p.Content)
	}
	var le *llm.Error
	if fin != nil || !errors.As(err, &le) || le.StatusCode != 502 || strings.Join(got, "|") != "Hell|o th|e" {
		t.Fatalf("first call: parts %q final %v err %v", got, fin, err)
	}
	if f := final(t, m, request(user("hi"))); f.Content != "Hello there, friend" {
		t.Fatalf("retry: %+v", f)
	}
	if _, err := scripted.Parse("bad.yaml", []byte("turns:\n  - {text: a, error: {status: 500, after: -1}}\n")); err == nil {
		t.Fatal("negative after accepted")
	}
}
