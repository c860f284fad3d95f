package steptype

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

func fullStep() Step {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	return Step{
		ID: "01a2-step", SessionID: "sess", RunID: "run", Sequence: 7, ParentID: "01a2-prev", Hop: 1,
		Kind: KindLLM, Name: "llm", Status: StepCompleted,
		Role: RoleAssistant, Content: "Let me check.", Reasoning: "need a tool",
		ToolCalls:  []ToolCall{{ID: "c1", Name: "calculator", Arguments: json.RawMessage(`{"expression":"1+1"}`)}},
		ToolCallID: "", ToolName: "",
		Inputs: json.RawMessage(`{"purpose":"demo"}`), Outputs: json.RawMessage(`{"ok":true}`), StatePatch: json.RawMessage(`{"n":1}`),
		Error: &StepError{Message: "m", Cause: "c", Class: ErrorTransient, Attempt: 2, Recoverable: true, Code: "rate_limited"},
		Metrics: Metrics{StartedAt: t0, FinishedAt: t0.Add(1500 * time.Millisecond), Duration: 1500 * time.Millisecond,
			FirstTokenLatency: 120 * time.Millisecond, InputTokens: 100, OutputTokens: 20, CachedTokens: 50, ReasoningTokens: 5,
			Cost: 0.00123, Model: "openai:gpt-4o-mini", Provider: "openai", Attempt: 2},
		Annotations: Annotations{State: "s", StateSummary: "ss", Goal: "g", GoalSummary: "gs", Action: "a", ActionSummary: "as"},
		Vector:      []float32{0.25, -1}, Embedder: "lexical-256",
		Replay: "reused", Fingerprint: "abcd",
		Metadata:  map[string]any{"k": "v"},
		CreatedAt: t0.Add(2 * time.Second),
	}
}

func TestWireGolden(t *testing.T) {
	s := fullStep()
	got, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "step_v1.golden.json")
	if *update {
		if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(want)) {
		t.Fatalf("wire format changed (run with -update if intended):\n%s", got)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, want); err != nil {
		t.Fatal(err)
	}
	var back Step
	if err := json.Unmarshal(compact.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, s) {
		t.Fatalf("round trip differs:\n got %+v\nwant %+v", back, s)
	}
}

func TestWireMinimalAndVersion(t *testing.T) {
	s := Step{ID: "x", SessionID: "s", RunID: "r", Sequence: 1, Kind: KindUser, Status: StepCompleted, Role: RoleUser, Content: "hi"}
	b, _ := json.Marshal(s)
	if !strings.HasPrefix(string(b), `{"v":1,`) || strings.Contains(string(b), "metrics") || strings.Contains(string(b), "annotations") {
		t.Fatalf("minimal = %s", b)
	}
	var back Step
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, s) {
		t.Fatalf("round trip: %v %+v", err, back)
	}
	if err := json.Unmarshal([]byte(`{"v":2,"id":"x"}`), &back); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("v2 accepted: %v", err)
	}
	if err := json.Unmarshal([]byte(`{"v":1,"id":`), &back); err == nil {
		t.Fatal("malformed accepted")
	}
	if _, err := ParseKind("nope"); err == nil {
		t.Fatal("unknown kind accepted")
	}
}

func FuzzStepUnmarshal(f *testing.F) {
	b, _ := json.Marshal(fullStep())
	f.Add(b)
	f.Add([]byte(`{"v":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s Step
		if json.Unmarshal(data, &s) != nil {
			return
		}
		out, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("re-marshal: %v", err)
		}
		var again Step
		if err := json.Unmarshal(out, &again); err != nil {
			t.Fatalf("re-read own output: %v", err)
		}
	})
}

// AppendJSON writes exactly what MarshalJSON returns, after what b holds.
func TestAppendJSON(t *testing.T) {
	for _, s := range []Step{fullStep(), {ID: "x", Content: "<a & b>\u2028"}} {
		want, err := s.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.AppendJSON([]byte(`{"step":`))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != `{"step":`+string(want) {
			t.Fatalf("AppendJSON:\n%s\nwant the prefix and\n%s", got, want)
		}
	}
}
