package telemetry_test

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/sqlite"
	"github.com/stepwise-run/stepwise/telemetry"
	"github.com/stepwise-run/stepwise/tool"
)

// receiver is an OTLP/HTTP trace receiver that decodes the protobuf spans.
type receiver struct {
	mu       sync.Mutex
	spans    []*tracepb.Span
	resource []*commonpb.KeyValue
	headers  http.Header
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "unexpected request", http.StatusNotFound)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.headers = r.Header.Clone()
	for _, rs := range req.ResourceSpans {
		rc.resource = rs.Resource.GetAttributes()
		for _, ss := range rs.ScopeSpans {
			rc.spans = append(rc.spans, ss.Spans...)
		}
	}
	rc.mu.Unlock()
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func attrs(kvs []*commonpb.KeyValue) map[string]any {
	m := map[string]any{}
	for _, kv := range kvs {
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = v.IntValue
		case *commonpb.AnyValue_DoubleValue:
			m[kv.Key] = v.DoubleValue
		case *commonpb.AnyValue_ArrayValue:
			var a []string
			for _, x := range v.ArrayValue.Values {
				a = append(a, x.GetStringValue())
			}
			m[kv.Key] = a
		}
	}
	return m
}

type calcArgs struct {
	Expression string `json:"expression"`
}

func agents() []*stepwise.Agent {
	calc := tool.New("calculator", "Evaluates arithmetic.", func(_ context.Context, a calcArgs) (string, error) { return "4", nil })
	helper := &stepwise.Agent{Name: "helper", Description: "Knows arithmetic.", Tools: []stepwise.Tool{calc},
		Model: scripted.New("helper", scripted.Script{Strict: true, Turns: []scripted.Turn{
			{ToolCalls: []steptype.ToolCall{{Name: "calculator", Arguments: json.RawMessage(`{"expression":"2+2"}`)}}},
			{Text: "It is 4."},
		}})}
	boss := &stepwise.Agent{Name: "boss", SubAgents: []*stepwise.Agent{helper},
		Model: scripted.New("boss", scripted.Script{Strict: true, Turns: []scripted.Turn{
			{ToolCalls: []steptype.ToolCall{{ID: "call-h", Name: "helper", Arguments: json.RawMessage(`{"input":"2+2?"}`)}}},
			{Text: "The answer is 4."},
		}})}
	return []*stepwise.Agent{boss}
}

// The whole path: a run with a sub-agent, exported over OTLP/HTTP
// configured by the environment, decoded by a local receiver.
func TestExportOverOTLPHTTP(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=acme")
	t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
	t.Setenv("OTEL_SERVICE_NAME", "stepwise-test")

	ctx := t.Context()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "s.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e, err := stepwise.New(stepwise.Config{Store: st, Agents: agents(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	r, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "boss", Input: "what is 2+2?"}))
	if err != nil || r.Status != steptype.RunCompleted {
		t.Fatalf("run = %+v, %v", r, err)
	}
	x, err := telemetry.New(ctx, telemetry.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := x.ExportRun(ctx, st, r.ID); err != nil {
		t.Fatal(err)
	}
	if err := x.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.headers.Get("X-Tenant") != "acme" {
		t.Errorf("OTEL_EXPORTER_OTLP_HEADERS not applied: %v", rc.headers)
	}
	if res := attrs(rc.resource); res["service.name"] != "stepwise-test" {
		t.Errorf("resource = %v", res)
	}
	byName := map[string][]*tracepb.Span{}
	for _, s := range rc.spans {
		byName[s.Name] = append(byName[s.Name], s)
	}
	steps, _ := st.StepList(ctx, &store.StepListParams{SessionID: r.SessionID})
	kids, _ := st.RunList(ctx, &store.RunListParams{ParentRunID: r.ID})
	if len(kids) != 1 {
		t.Fatalf("%d child runs, want 1", len(kids))
	}
	if got, want := len(rc.spans), len(steps)+2; got != want {
		t.Errorf("%d spans, want %d (one per step, one per run)", got, want)
	}
	trace := telemetry.TraceID(r.ID)
	for _, s := range rc.spans {
		if hex.EncodeToString(s.TraceId) != trace.String() {
			t.Errorf("span %q in trace %x, want %s", s.Name, s.TraceId, trace)
		}
	}
	one := func(name string) (*tracepb.Span, map[string]any) {
		t.Helper()
		if len(byName[name]) != 1 {
			t.Fatalf("%d spans %q, want 1 (spans: %v)", len(byName[name]), name, keys(byName))
		}
		return byName[name][0], attrs(byName[name][0].Attributes)
	}
	root, ra := one("invoke_agent boss")
	if len(root.ParentSpanId) != 0 || ra["gen_ai.operation.name"] != "invoke_agent" || ra["gen_ai.agent.name"] != "boss" ||
		ra["gen_ai.conversation.id"] != r.SessionID || root.Status.GetCode() != tracepb.Status_STATUS_CODE_OK {
		t.Errorf("root span = %v %v", root, ra)
	}
	chats := byName["chat boss"]
	if len(chats) != 2 {
		t.Fatalf("%d chat boss spans, want 2", len(chats))
	}
	ca := attrs(chats[0].Attributes)
	for k, v := range map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "scripted", "gen_ai.request.model": "boss",
		"gen_ai.agent.name": "boss", "gen_ai.conversation.id": r.SessionID} {
		if ca[k] != v {
			t.Errorf("chat span %s = %v, want %v", k, ca[k], v)
		}
	}
	if ca["gen_ai.usage.input_tokens"].(int64) <= 0 || ca["gen_ai.usage.output_tokens"].(int64) <= 0 || chats[0].Kind != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("chat span usage/kind = %v %v", ca, chats[0].Kind)
	}
	if string(chats[0].ParentSpanId) != string(root.SpanId) {
		t.Error("chat span is not a child of the run span")
	}
	agentStep, aa := one("execute_tool helper")
	if aa["gen_ai.tool.name"] != "helper" || aa["gen_ai.tool.call.id"] != "call-h" || aa["gen_ai.operation.name"] != "execute_tool" {
		t.Errorf("agent step span = %v", aa)
	}
	child, cha := one("invoke_agent helper")
	if string(child.ParentSpanId) != string(agentStep.SpanId) || cha["stepwise.run.parent_id"] != r.ID {
		t.Errorf("helper run span parent = %x, want the agent step span %x", child.ParentSpanId, agentStep.SpanId)
	}
	toolSpan, ta := one("execute_tool calculator")
	if string(toolSpan.ParentSpanId) != string(child.SpanId) || ta["gen_ai.agent.name"] != "helper" || ta["gen_ai.tool.call.id"] == "" {
		t.Errorf("calculator span = %v (parent %x, want %x)", ta, toolSpan.ParentSpanId, child.SpanId)
	}
	if _, ok := ta["gen_ai.tool.call.arguments"]; ok {
		t.Error("tool arguments exported without CaptureContent")
	}
	for _, u := range byName["user input"] { // the boss's and the helper's
		if u.StartTimeUnixNano == 0 || u.EndTimeUnixNano < u.StartTimeUnixNano {
			t.Errorf("user step span times: %d..%d", u.StartTimeUnixNano, u.EndTimeUnixNano)
		}
	}
}

func keys(m map[string][]*tracepb.Span) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
