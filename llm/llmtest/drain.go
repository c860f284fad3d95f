package llmtest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// Result is a Generate sequence run to its end.
type Result struct {
	Partials []*llm.Response
	Final    *llm.Response
	Err      error
	// AfterEnd counts the values yielded after the final response or an
	// error; the Model contract says there are none.
	AfterEnd int
}

// Drain runs m.Generate(ctx, req) to its end.
func Drain(ctx context.Context, m llm.Model, req *llm.Request) Result {
	var r Result
	for resp, err := range m.Generate(ctx, req) {
		switch {
		case r.Err != nil || r.Final != nil:
			r.AfterEnd++
		case err != nil:
			r.Err = err
		case resp.Partial:
			r.Partials = append(r.Partials, resp)
		default:
			r.Final = resp
		}
	}
	return r
}

// Joined concatenates the content and reasoning deltas of the partials,
// which must equal the final text.
func (r Result) Joined() (content, reasoning string) {
	var c, rs strings.Builder
	for _, p := range r.Partials {
		c.WriteString(p.Content)
		rs.WriteString(p.Reasoning)
	}
	return c.String(), rs.String()
}

// AsError asserts that err is an *llm.Error (not wrapped) and returns it.
func AsError(t testing.TB, err error) *llm.Error {
	t.Helper()
	e, ok := err.(*llm.Error)
	if !ok {
		t.Fatalf("error %T %v, want *llm.Error", err, err)
	}
	return e
}

// UserRequest is a request of one user message.
func UserRequest(text string) *llm.Request {
	return &llm.Request{Messages: []llm.Message{{Role: steptype.RoleUser, Content: text}}}
}

// Field walks a decoded JSON value: Field(body, "messages", 0, "role").
// A missing key or index gives nil.
func Field(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

// AssertCalls fails the test unless got and want encode to the same JSON.
func AssertCalls(t testing.TB, got, want []steptype.ToolCall) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("tool calls\n got %s\nwant %s", g, w)
	}
}
