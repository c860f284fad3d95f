package server

import (
	"encoding/json"
	"github.com/stepwise-run/stepwise/otlpingest"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/eval"
	"github.com/stepwise-run/stepwise/graph"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
)

// wireSchemas pairs schemas of the OpenAPI document, by path ("Name", then
// ".property" to enter a property and "[]" to enter an array's items), with
// the Go type whose JSON they describe.
var wireSchemas = []struct {
	path string
	typ  any
}{
	{"Problem", wire.Problem{}},
	{"Problem", Problem{}}, // the server's, which carries a Retry-After besides
	{"Agent", wire.Agent{}},
	{"Agent.limits", wire.AgentLimits{}},
	{"Agent.tools[]", llm.ToolDef{}},
	{"AgentList", wire.AgentList{}},
	{"Health", Health{}},
	{"Run", steptype.Run{}},
	{"StepError", steptype.StepError{}},
	{"Step", steptype.Step{}},
	{"ToolCall", steptype.ToolCall{}},
	{"Session", steptype.Session{}},
	{"Progress", steptype.Progress{}},
	{"Invocation", wire.Invocation{}},
	{"RunCreated", wire.RunCreated{}},
	{"InitiateRequest", wire.InitiateRequest{}},
	{"Breakpoints", wire.Breakpoints{}},
	{"BreakpointPause", wire.BreakpointPause{}},
	{"CancelRequest", wire.CancelRequest{}},
	{"NextStep", wire.NextStep{}},
	{"PendingInput", wire.PendingInput{}},
	{"PendingInput.request", wire.InputRequest{}},
	{"PendingList", wire.PendingList{}},
	{"AnswerRequest", wire.AnswerRequest{}},
	{"AnswerResult", wire.AnswerResult{}},
	{"SessionPage", wire.SessionPage{}},
	{"SessionList", wire.SessionList{}},
	{"CreateSessionRequest", wire.CreateSessionRequest{}},
	{"ForkRequest", wire.ForkRequest{}},
	{"RetryRequest", wire.RetryRequest{}},
	{"ReplayRequest", wire.ReplayRequest{}},
	{"StepList", wire.StepList{}},
	{"IngestRequest", wire.IngestRequest{}},
	{"TruncateResult", wire.TruncateResult{}},
	{"Summary", wire.Summary{}},
	{"ForkTree", wire.ForkTree{}},
	{"ContextPreview", wire.ModelRequest{}},
	{"Event", wire.EventData{}},
	{"Event.delta", wire.Delta{}},
	{"Event.delta.tool_call", llm.ToolCallDelta{}},
	{"Event.yield", wire.Yield{}},
	{"Event.reset", wire.Reset{}},
	{"SearchResult", wire.SearchResult{}},
	{"SearchResult.steps[]", wire.SearchHit{}},
	{"EvalList", wire.EvalList{}},
	{"Eval", store.Eval{}},
	{"Metrics", wire.Metrics{}},
	{"Metrics.series[]", store.MetricsSeries{}},
	{"Metrics.series[].points[]", store.MetricsPoint{}},
	{"ScoreRequest", wire.ScoreRequest{}},
	{"Attachment", store.Attachment{}},
	{"AttachmentList", wire.AttachmentList{}},
	{"StepEvent", store.StepEvent{}},
	{"StepEventList", wire.StepEventList{}},
	{"AnnotationRequest", wire.AnnotationRequest{}},
	{"AnnotationView", wire.AnnotationView{}},
	{"Dataset", store.Dataset{}},
	{"DatasetList", wire.DatasetList{}},
	{"DatasetItem", store.DatasetItem{}},
	{"ImportResult", wire.ImportResult{}},
	{"ImportResult.errors[]", wire.LineError{}},
	{"Experiment", store.Experiment{}},
	{"ExperimentList", wire.ExperimentList{}},
	{"ExperimentSummary", eval.Summary{}},
	{"ExperimentItem", store.ExperimentItem{}},
	{"ExperimentReport", reportView{}},
	{"Comparison", comparisonView{}},
	{"Comparison.metrics[]", eval.MetricRow{}},
	{"Graph", graph.Graph{}},
	{"AgentOverview", wire.AgentOverview{}},
	{"AgentOverview.latency[]", wire.KindLatency{}},
	{"AgentOverview.resources[]", wire.KindResources{}},
	{"StepHitPage", wire.StepHitPage{}},
	{"StepHitPage.steps[]", wire.StepHit{}},
	{"RunList", wire.RunList{}},
	{"SessionRowPage", wire.SessionRowPage{}},
	{"SessionRow", wire.SessionRow{}},
	{"RunAgentInput", aguiInput{}},
	{"RunAgentInput.resume[]", aguiResume{}},
	{"A2AJSONRPCRequest", a2aRequest{}},
	{"A2AJSONRPCResponse", a2aResponse{}},
	{"A2AJSONRPCResponse.error", rpcError{}},
	{"LangSmithBatch", otlpingest.RunOps{}},
	{"LangGraphAssistantSearch", lgAssistantQuery{}},
	{"LangGraphThreadSearch", lgThreadQuery{}},
	{"LangGraphThreadCount", lgThreadCountQuery{}},
	{"LangGraphAssistantCount", lgAssistantCountQuery{}},
	{"LangGraphThreadCreate", lgThreadCreateRequest{}},
	{"LangGraphThreadUpdate", lgThreadUpdateRequest{}},
	{"LangGraphCheckpoint", lgCheckpointRef{}},
	{"LangGraphStateAt", lgStateAtRequest{}},
	{"LangGraphUpdateState", lgUpdateStateRequest{}},
	{"LangGraphHistory", lgHistoryRequest{}},
	{"LangGraphRunCreate", lgRunRequest{}},
	{"LangGraphRunCreate.command", lgCommand{}},
	{"Health", Health{}},
	{"WorkerRegister", wire.WorkerRegister{}},
	{"WorkerAgent", wire.WorkerAgent{}},
	{"WorkerAgent.steps[]", wire.WorkerStep{}},
	{"WorkerAgent.tools[]", wire.WorkerTool{}},
	{"WorkerRegistered", wire.WorkerRegistered{}},
	{"WorkerRegistered.agents[]", wire.RegisteredAgent{}},
	{"WorkerRegistered.limits", wire.WorkerProtocolLimit{}},
	{"TaskPoll", wire.TaskPoll{}},
	{"TaskBatch", wire.TaskBatch{}},
	{"Task", wire.Task{}},
	{"Task.input", wire.TaskInput{}},
	{"InputRequest", wire.InputRequest{}},
	{"TaskToken", wire.TaskToken{}},
	{"TaskLease", wire.TaskLease{}},
	{"TaskEvents", wire.TaskEvents{}},
	{"TaskEvents.events[]", wire.TaskEvent{}},
	{"TaskComplete", wire.TaskComplete{}},
	{"TaskComplete.decision", wire.TaskDecision{}},
	{"TaskComplete.usage[]", wire.TaskUsage{}},
	{"TaskComplete.attachments[]", wire.TaskAttachment{}},
	{"TaskFail", wire.TaskFail{}},
	{"TaskInputRequest", wire.TaskInputRequest{}},
	{"TaskRelease", wire.TaskRelease{}},
	{"TaskReleased", wire.TaskReleased{}},
	{"WorkerList", wire.WorkerList{}},
	{"WorkerStats", wire.WorkerStats{}},
	{"TaskResult", wire.TaskResult{}},
}

// notGoTyped are the schemas with no Go struct to check them against: the
// OTLP/HTTP bodies are protobuf messages in their JSON mapping; LangSmith's
// runs, info and error bodies are its API's open JSON objects, read and
// written as maps; MCP's JSON-RPC messages are the MCP SDK's.
var notGoTyped = []string{"ExportLogsServiceRequest", "ExportLogsServiceResponse", "ExportTraceServiceRequest",
	"ExportTraceServiceResponse", "OTLPStatus",
	"LangSmithRun", "LangSmithInfo", "LangSmithAccepted", "LangSmithDetail",
	"JSONRPCMessage", // MCP's messages, described by its specification
	"A2AAgentCard",   // A2A's agent card, described by its specification
	// LangGraph's responses: the Agent Protocol's open objects, built as maps.
	"LangGraphAssistant", "LangGraphAssistants", "LangGraphGraph", "LangGraphSchemas", "LangGraphCount", "LangGraphThread", "LangGraphThreads", "LangGraphThreadState",
	"LangGraphThreadStates", "LangGraphUpdated", "LangGraphRun", "LangGraphRuns", "LangGraphValues",
}

// TestOpenAPIMatchesWireTypes checks the OpenAPI document against the
// types the server encodes and the client decodes: every JSON field of a
// type is a property of its schema, and every property a JSON field.
func TestOpenAPIMatchesWireTypes(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(openAPIDocument())
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	checked := map[string]bool{}
	for _, w := range wireSchemas {
		name, _, _ := strings.Cut(w.path, ".")
		checked[strings.TrimSuffix(name, "[]")] = true
	}
	for name := range doc.Components.Schemas {
		if !checked[name] && !slices.Contains(notGoTyped, name) {
			t.Errorf("schema %s is checked against no Go type: add it to wireSchemas", name)
		}
	}
	for _, w := range wireSchemas {
		schema, err := schemaAt(doc.Components.Schemas, w.path)
		if err != nil {
			t.Errorf("%s: %v", w.path, err)
			continue
		}
		props := schemaProperties(doc.Components.Schemas, schema)
		typ := reflect.TypeOf(w.typ)
		fields := jsonFields(typ)
		if typ == reflect.TypeFor[steptype.Step]() {
			fields = stepJSONKeys(t) // steptype writes steps with an encoder of its own
		}
		for _, f := range fields {
			if _, ok := props[f]; !ok {
				t.Errorf("%s: field %q of %s is not in the schema", w.path, f, typ)
			}
		}
		for p := range props {
			if !slices.Contains(fields, p) {
				t.Errorf("%s: property %q is not a field of %s", w.path, p, typ)
			}
		}
	}
}

// schemaProperties returns the properties of an object schema, those of
// every part of an allOf included.
func schemaProperties(schemas map[string]map[string]any, s map[string]any) map[string]any {
	props := map[string]any{}
	if own, ok := s["properties"].(map[string]any); ok {
		maps.Copy(props, own)
	}
	parts, _ := s["allOf"].([]any)
	for _, p := range parts {
		m, _ := p.(map[string]any)
		if ref, ok := m["$ref"].(string); ok {
			m = schemas[strings.TrimPrefix(ref, "#/components/schemas/")]
		}
		maps.Copy(props, schemaProperties(schemas, m))
	}
	return props
}

// stepJSONKeys returns the top-level keys of a step with every field set.
func stepJSONKeys(t *testing.T) []string {
	frac := 0.5
	s := steptype.Step{ID: "i", SessionID: "s", RunID: "r", Sequence: 1, ParentID: "p", Hop: 1, Kind: steptype.KindLLM, Name: "n",
		Status: steptype.StepCompleted, Role: steptype.RoleAssistant, Content: "c", Reasoning: "r",
		ToolCalls: []steptype.ToolCall{{ID: "1", Name: "f", Arguments: json.RawMessage(`{}`)}}, ToolCallID: "t", ToolName: "f",
		Inputs: json.RawMessage(`1`), Outputs: json.RawMessage(`2`), StatePatch: json.RawMessage(`{}`),
		Error: &steptype.StepError{Message: "m"}, Vector: []float32{1}, Embedder: "e", Replay: "live", Fingerprint: "f",
		Metadata: map[string]any{"a": 1}, CreatedAt: time.Now(), Progress: &steptype.Progress{Fraction: &frac},
		Metrics: steptype.Metrics{InputTokens: 1}, Annotations: steptype.Annotations{Goal: "g"}}
	b, err := json.Marshal(&s)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range top {
		keys = append(keys, k)
	}
	return keys
}

// schemaAt returns the schema at path, following $refs.
func schemaAt(schemas map[string]map[string]any, path string) (map[string]any, error) {
	name, rest, _ := strings.Cut(path, ".")
	name, items := strings.CutSuffix(name, "[]")
	s, ok := schemas[name]
	if !ok {
		return nil, errString("no such schema")
	}
	if items {
		rest = "[]." + rest
	}
	resolve := func(v any) (map[string]any, error) {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, errString("not an object schema")
		}
		if ref, ok := m["$ref"].(string); ok {
			target, ok := schemas[strings.TrimPrefix(ref, "#/components/schemas/")]
			if !ok {
				return nil, errString("unresolved " + ref)
			}
			return target, nil
		}
		return m, nil
	}
	for seg := range strings.SplitSeq(rest, ".") {
		if seg == "" {
			continue
		}
		for seg != "" {
			var err error
			if seg == "[]" || strings.HasPrefix(seg, "[]") {
				seg = strings.TrimPrefix(seg, "[]")
				if s, err = resolve(s["items"]); err != nil {
					return nil, err
				}
				continue
			}
			prop, arr := strings.CutSuffix(seg, "[]")
			props, _ := s["properties"].(map[string]any)
			if s, err = resolve(props[prop]); err != nil {
				return nil, errString("property " + prop + ": " + err.Error())
			}
			seg = ""
			if arr {
				seg = "[]"
			}
		}
	}
	return s, nil
}

type errString string

func (e errString) Error() string { return string(e) }

// jsonFields lists the names encoding/json gives the fields of t (a struct
// or a pointer to one), embedded structs flattened.
func jsonFields(t reflect.Type) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []string
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			out = append(out, jsonFields(ft)...)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}
