package scripted_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/steptype"
)

func user(s string) llm.Message { return llm.Message{Role: steptype.RoleUser, Content: s} }

func assistant(s string) llm.Message { return llm.Message{Role: steptype.RoleAssistant, Content: s} }

func toolResult(id, s string) llm.Message {
	return llm.Message{Role: steptype.RoleTool, ToolCallID: id, Content: s}
}

func request(msgs ...llm.Message) *llm.Request { return &llm.Request{Messages: msgs} }

// call runs one Generate and returns its partials and final response, or its error.
func call(t testing.TB, m llm.Model, req *llm.Request) (parts []*llm.Response, final *llm.Response, err error) {
	t.Helper()
	n := 0
	for r, err := range m.Generate(context.Background(), req) {
		n++
		if err != nil {
			return parts, nil, err
		}
		if r.Partial {
			if final != nil {
				t.Fatalf("partial response after the final one")
			}
			parts = append(parts, r)
			continue
		}
		if final != nil {
			t.Fatalf("two final responses")
		}
		final = r
	}
	if final == nil {
		t.Fatalf("no final response after %d values", n)
	}
	return parts, final, nil
}

// final runs one Generate that must succeed and returns the final response.
func final(t testing.TB, m llm.Model, req *llm.Request) *llm.Response {
	t.Helper()
	_, f, err := call(t, m, req)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return f
}

func mustParse(t testing.TB, name, src string) *scripted.Model {
	t.Helper()
	m, err := scripted.Parse(name, []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return m
}

func args(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
