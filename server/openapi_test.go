package server

import (
	"encoding/json"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
)

// TestOpenAPIMatchesRoutes checks the served document against the routes
// registered on the mux: every route documented, every documented
// operation routed, path parameters declared, references resolvable.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	env := newEnv(t, nil)
	status, body := env.call("GET", "/v1/openapi.json", "")
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["openapi"] != "3.1.0" {
		t.Fatalf("openapi %v", doc["openapi"])
	}
	var documented, routed []string
	ids := map[string]bool{}
	paramRE := regexp.MustCompile(`\{([^}]+)\}`)
	for path, item := range doc["paths"].(map[string]any) {
		for method, o := range item.(map[string]any) {
			documented = append(documented, strings.ToUpper(method)+" "+path)
			op := o.(map[string]any)
			id, _ := op["operationId"].(string)
			if id == "" || ids[id] {
				t.Errorf("%s %s: operationId %q missing or duplicated", method, path, id)
			}
			ids[id] = true
			if len(op["responses"].(map[string]any)) == 0 {
				t.Errorf("%s %s: no responses", method, path)
			}
			declared := map[string]bool{}
			params, _ := op["parameters"].([]any)
			for _, p := range params {
				pm := p.(map[string]any)
				if pm["in"] == "path" {
					declared[pm["name"].(string)] = true
					if pm["required"] != true {
						t.Errorf("%s %s: path parameter %v not required", method, path, pm["name"])
					}
				}
			}
			var inPath []string
			for _, m := range paramRE.FindAllStringSubmatch(path, -1) {
				inPath = append(inPath, m[1])
				if !declared[m[1]] {
					t.Errorf("%s %s: path parameter %s not declared", method, path, m[1])
				}
			}
			if len(inPath) != len(declared) {
				t.Errorf("%s %s: declares %v, path has %v", method, path, declared, inPath)
			}
		}
	}
	for _, r := range env.srv.routes {
		routed = append(routed, r.method+" "+r.pattern)
	}
	sort.Strings(documented)
	sort.Strings(routed)
	for _, r := range routed {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is not documented", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(routed, d) {
			t.Errorf("documented %s is not routed", d)
		}
	}
	// Every reference resolves.
	comps := doc["components"].(map[string]any)
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok {
				parts := strings.Split(strings.TrimPrefix(ref, "#/components/"), "/")
				group, _ := comps[parts[0]].(map[string]any)
				if len(parts) != 2 || group == nil || group[parts[1]] == nil {
					t.Errorf("unresolved $ref %s", ref)
				}
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(doc)
}

// TestStepWireKeys keeps the ingest field check in step with the step
// encoder: every field steptype writes is accepted.
func TestStepWireKeys(t *testing.T) {
	t.Parallel()
	now := time.Now()
	frac := 0.5
	s := stepwise.Step{ID: "i", SessionID: "s", RunID: "r", Sequence: 1, ParentID: "p", Hop: 1, Kind: steptype.KindLLM, Name: "n",
		Status: steptype.StepCompleted, Role: steptype.RoleAssistant, Content: "c", Reasoning: "r",
		ToolCalls: []steptype.ToolCall{{ID: "1", Name: "f", Arguments: json.RawMessage(`{}`)}}, ToolCallID: "t", ToolName: "f",
		Inputs: json.RawMessage(`1`), Outputs: json.RawMessage(`2`), StatePatch: json.RawMessage(`{}`),
		Error: &steptype.StepError{Message: "m", Cause: "c", Class: "transient", Attempt: 1, Recoverable: true, Code: "x"}, Vector: []float32{1}, Embedder: "e",
		Replay: "live", Fingerprint: "f", Metadata: map[string]any{"a": 1}, CreatedAt: now, Progress: &steptype.Progress{Fraction: &frac, Message: "m"},
		Annotations: steptype.Annotations{State: "a", StateSummary: "b", Goal: "c", GoalSummary: "d", Action: "e", ActionSummary: "f"}}
	// Fill every metric through reflection, so a new metric field is seen.
	mv := reflect.ValueOf(&s.Metrics).Elem()
	for i := range mv.NumField() {
		f := mv.Field(i)
		switch f.Kind() {
		case reflect.Int, reflect.Int64:
			f.SetInt(1_000_000) // also 1ms for durations
		case reflect.Float64:
			f.SetFloat(1)
		case reflect.String:
			f.SetString("x")
		case reflect.Struct:
			f.Set(reflect.ValueOf(now))
		}
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkStepKeys(b); err != nil {
		t.Fatalf("the encoder writes a field ingest refuses: %v\n%s", err, b)
	}
	var top map[string]json.RawMessage
	_ = json.Unmarshal(b, &top)
	for k := range stepWireKeys {
		if _, ok := top[k]; !ok {
			t.Errorf("ingest accepts %q, which the encoder does not write", k)
		}
	}
	for field, keys := range stepNestedKeys {
		var nested map[string]json.RawMessage
		_ = json.Unmarshal(top[field], &nested)
		for k := range keys {
			if _, ok := nested[k]; !ok {
				t.Errorf("ingest accepts %s.%s, which the encoder does not write", field, k)
			}
		}
	}
}
