package scripted_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/steptype"
)

const benchArgs = `{"expression":"1+1"}`

// loopContext is the context of the benchmark loop after n model calls: a
// user message, then n assistant tool calls each followed by its result.
func loopContext(n int) []llm.Message {
	msgs := []llm.Message{{Role: steptype.RoleUser, Content: "compute"}}
	for i := range n {
		msgs = appendStep(msgs, i)
	}
	return msgs
}

func appendStep(msgs []llm.Message, i int) []llm.Message {
	id := "call_" + strconv.Itoa(i) + "_0"
	return append(msgs,
		llm.Message{Role: steptype.RoleAssistant, ToolCalls: []steptype.ToolCall{{ID: id, Name: "calculator", Arguments: []byte(benchArgs)}}},
		llm.Message{Role: steptype.RoleTool, ToolCallID: id, ToolName: "calculator", Content: "2"})
}

func drain(b *testing.B, m llm.Model, req *llm.Request) {
	for r, err := range m.Generate(context.Background(), req) {
		if err != nil || (!r.Partial && len(r.ToolCalls) != 1) {
			b.Fatal(r, err)
		}
	}
}

// BenchmarkGenerateZeroLatency measures one tool-call turn of the benchmark
// loop model (scripted.Loop), consumed in full.
//
//   - run=10000: calls as the engine makes them during a 10,000-step run
//     (5,000 model calls, the context growing by an assistant message and a
//     tool result after each): ns/op is the mean cost of one call.
//   - context=N/warm: the same N-call context again (the memo holds).
//   - context=N/cold: two equal contexts at different addresses in turn, so
//     every call reads all 2N+1 messages: the cost without the memo.
func BenchmarkGenerateZeroLatency(b *testing.B) {
	b.Run("run=10000", func(b *testing.B) {
		m := scripted.Loop("calculator", benchArgs, 5000, "done")
		full := loopContext(5000) // the engine's context, built ahead so only Generate is timed
		req := &llm.Request{System: "You are a calculator."}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			req.Messages = full[:1+2*i] // grows in place, as the engine appends steps
			drain(b, m, req)
			if i++; i == 5000 {
				i = 0
			}
		}
	})
	for _, n := range []int{0, 100, 1_000, 5_000} {
		b.Run("context="+strconv.Itoa(n)+"/warm", func(b *testing.B) {
			m := scripted.Loop("calculator", benchArgs, 1_000_000, "done")
			req := &llm.Request{System: "You are a calculator.", Messages: loopContext(n)}
			b.ReportAllocs()
			for b.Loop() {
				drain(b, m, req)
			}
		})
		b.Run("context="+strconv.Itoa(n)+"/cold", func(b *testing.B) {
			m := scripted.Loop("calculator", benchArgs, 1_000_000, "done")
			reqs := [2]*llm.Request{{Messages: loopContext(n)}, {Messages: loopContext(n)}}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				drain(b, m, reqs[i&1])
				i++
			}
		})
	}
}
