package telemetry_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/telemetry"
	"github.com/stepwise-run/stepwise/tool"
)

type failing struct{}

func (failing) Definition() llm.ToolDef {
	return llm.ToolDef{Name: "fetch", Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (failing) Call(context.Context, *tool.Call) (*tool.Result, error) {
	return &tool.Result{Content: "error: down", IsError: true}, nil
}

func TestFailedRunAndContent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := memory.New()
	e, err := stepwise.New(stepwise.Config{Store: st, Logger: slog.New(slog.DiscardHandler), Agents: []*stepwise.Agent{{
		Name: "stuck", Model: scripted.Loop("fetch", `{"u":1}`, 50, "never"), Tools: []stepwise.Tool{failing{}},
		Limits: stepwise.Limits{MaxSteps: 5},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	r, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "stuck", Input: "go"}))
	if err != nil || r.Status != steptype.RunFailed {
		t.Fatalf("run = %+v, %v", r, err)
	}
	spans := func(capture bool) tracetest.SpanStubs {
		mem := tracetest.NewInMemoryExporter()
		x, err := telemetry.New(ctx, telemetry.Config{Exporter: mem, CaptureContent: capture})
		if err != nil {
			t.Fatal(err)
		}
		if err := x.ExportRun(ctx, st, r.ID); err != nil {
			t.Fatal(err)
		}
		if err := x.ForceFlush(ctx); err != nil { // Shutdown would clear mem
			t.Fatal(err)
		}
		defer x.Shutdown(ctx)
		return mem.GetSpans()
	}
	got := spans(true)
	var run, budget, toolSpan *tracetest.SpanStub
	for i, s := range got {
		switch {
		case s.Name == "invoke_agent stuck":
			run = &got[i]
		case s.Name == "error llm" || s.Name == "error tools":
			budget = &got[i]
		case s.Name == "execute_tool fetch" && toolSpan == nil:
			toolSpan = &got[i]
		}
	}
	if run == nil || run.Status.Code != codes.Error || !strings.Contains(run.Status.Description, "step budget") || attr(run, "error.type") != "max_steps" {
		t.Errorf("run span = %+v", run)
	}
	if budget == nil || budget.Status.Code != codes.Error || attr(budget, "error.type") != "max_steps" {
		t.Errorf("budget error step span = %+v", budget)
	}
	if toolSpan == nil || toolSpan.Status.Code != codes.Error || attr(toolSpan, "gen_ai.tool.call.arguments") != `{"u":1}` ||
		attr(toolSpan, "gen_ai.tool.call.result") != "error: down" {
		t.Errorf("tool span = %+v", toolSpan)
	}
	chats := 0
	for _, s := range got {
		if s.Name != "chat loop" {
			continue
		}
		if !strings.Contains(attr(&s, "gen_ai.output.messages"), `"type":"tool_call"`) {
			t.Errorf("chat span output messages = %q", attr(&s, "gen_ai.output.messages"))
		}
		// The input is the run's conversation before the call: the user's
		// message, then each earlier call and its result.
		var in []struct {
			Role  string           `json:"role"`
			Parts []map[string]any `json:"parts"`
		}
		if err := json.Unmarshal([]byte(attr(&s, "gen_ai.input.messages")), &in); err != nil || len(in) != 1+2*chats ||
			in[0].Role != "user" || in[0].Parts[0]["content"] != "go" {
			t.Errorf("chat %d input messages = %s (%v)", chats, attr(&s, "gen_ai.input.messages"), err)
		} else if chats > 0 && (in[len(in)-1].Role != "tool" || in[len(in)-1].Parts[0]["type"] != "tool_call_response" || in[len(in)-2].Role != "assistant") {
			t.Errorf("chat %d input messages end with %+v", chats, in[len(in)-2:])
		}
		chats++
	}
	if chats < 2 {
		t.Errorf("%d chat spans", chats)
	}
	// Ids derive from the run and step ids: exporting again (another
	// process resuming the run) continues the same trace with the same spans.
	again := spans(false)
	for _, s := range again {
		if attr(&s, "gen_ai.input.messages") != "" || attr(&s, "gen_ai.output.messages") != "" {
			t.Errorf("span %q carries content without CaptureContent", s.Name)
		}
	}
	if len(again) != len(got) {
		t.Fatalf("%d spans, then %d", len(got), len(again))
	}
	for i := range got {
		if got[i].SpanContext.SpanID() != again[i].SpanContext.SpanID() || got[i].SpanContext.TraceID() != telemetry.TraceID(r.ID) {
			t.Errorf("span %q: ids differ between exports", got[i].Name)
		}
	}
}

func attr(s *tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}
