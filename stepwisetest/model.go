package stepwisetest

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"sync"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// DefaultModelName is what [Model.Name] returns when ModelName is empty.
const DefaultModelName = "stepwisetest:model"

// Model is an [llm.Model] scripted in Go: Reply answers each request, and
// the model records the requests. It is strict like a real provider: a
// request whose messages break the sequence rules ([llm.CheckSequence])
// fails as an HTTP 400 would, unless Lax is set. A reply with content
// streams it as one partial response before the final one. It is safe for
// concurrent use.
type Model struct {
	// Reply answers a request. Required.
	Reply func(req *llm.Request) (*llm.Response, error)
	// Lax accepts requests that llm.CheckSequence rejects.
	Lax bool
	// ModelName is what Name returns. Default: DefaultModelName.
	ModelName string

	mu   sync.Mutex
	reqs []*llm.Request
}

var _ llm.Model = (*Model)(nil)

// Replies returns a model that answers its n-th call with the n-th
// response, and fails a call past the last.
func Replies(resps ...*llm.Response) *Model {
	var mu sync.Mutex
	next := 0
	return &Model{Reply: func(req *llm.Request) (*llm.Response, error) {
		mu.Lock()
		n := next
		next++
		mu.Unlock()
		if n >= len(resps) {
			return nil, &llm.Error{Class: steptype.ErrorPermanent, Code: "script_exhausted",
				Message: fmt.Sprintf("stepwisetest: call %d, but the script has %d replies", n+1, len(resps))}
		}
		r := *resps[n]
		return &r, nil
	}}
}

// Text is a final reply with content.
func Text(content string) *llm.Response {
	return &llm.Response{Content: content, FinishReason: "stop"}
}

// ToolCalls is a final reply that calls tools.
func ToolCalls(calls ...steptype.ToolCall) *llm.Response {
	return &llm.Response{ToolCalls: calls, FinishReason: "tool_calls"}
}

// Call is a tool call with JSON arguments.
func Call(id, name, args string) steptype.ToolCall {
	return steptype.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
}

// Name returns ModelName, or DefaultModelName.
func (m *Model) Name() string {
	if m.ModelName != "" {
		return m.ModelName
	}
	return DefaultModelName
}

// Generate records req and answers it with Reply.
func (m *Model) Generate(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Response, error] {
	return func(yield func(*llm.Response, error) bool) {
		m.mu.Lock()
		m.reqs = append(m.reqs, req)
		m.mu.Unlock()
		if !m.Lax {
			if err := llm.CheckSequence(req.Messages); err != nil {
				yield(nil, err)
				return
			}
		}
		resp, err := m.Reply(req)
		if err != nil {
			yield(nil, err)
			return
		}
		if resp.Content != "" && !yield(&llm.Response{Partial: true, Content: resp.Content}, nil) {
			return
		}
		yield(resp, nil)
	}
}

// Calls returns how many times Generate was called.
func (m *Model) Calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.reqs)
}

// Requests returns the requests received so far, in order.
func (m *Model) Requests() []*llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*llm.Request(nil), m.reqs...)
}
