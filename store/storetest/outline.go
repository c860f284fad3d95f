package storetest

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// outlineSteps are steps of every shape the outline treats specially.
func outlineSteps(sessionID, prefix string) []*steptype.Step {
	m := steptype.Metrics{Duration: 2 * time.Second, InputTokens: 7, OutputTokens: 3, Cost: 0.5, Model: "m"}
	big := json.RawMessage(`{"result":"long \"quoted\" result é"}`)
	return []*steptype.Step{
		{ID: prefix + "u", SessionID: sessionID, Kind: steptype.KindUser, Status: steptype.StepCompleted, Role: steptype.RoleUser, Content: "same"},
		{ID: prefix + "l", SessionID: sessionID, Kind: steptype.KindLLM, Name: "llm", Status: steptype.StepCompleted, Content: "same", Reasoning: "why",
			ToolCalls: []steptype.ToolCall{{ID: "c", Name: "search", Arguments: json.RawMessage(`{"q":"x"}`)}}, Metrics: m, Fingerprint: "f1"},
		{ID: prefix + "t", SessionID: sessionID, Kind: steptype.KindTool, Name: "tools", Status: steptype.StepFailed, ToolName: "search", ToolCallID: "c",
			Inputs: json.RawMessage(`{"q":"x"}`), Outputs: big, Error: &steptype.StepError{Message: "boom", Code: "timeout"}, Metrics: m},
		{ID: prefix + "i", SessionID: sessionID, Kind: steptype.KindInput, Status: steptype.StepCompleted, Inputs: json.RawMessage(`{"approval":{"id":"c","name":"pay"}}`), Outputs: json.RawMessage(`{"approved":true}`)},
		{ID: prefix + "d", SessionID: sessionID, Kind: steptype.KindDecision, Name: "route", Status: steptype.StepCompleted, Outputs: json.RawMessage(`{"choice":"left"}`),
			StatePatch: json.RawMessage(`{"a":1}`), Metadata: map[string]any{"k": "v"}, Annotations: steptype.Annotations{State: "routing"}},
		{ID: prefix + "x", SessionID: sessionID, Kind: steptype.KindLLM, Status: steptype.StepCompleted, Content: "different"},
	}
}

// testOutline: a store.StepOutliner reads the same steps as StepList, for
// every filter, outlined: bulky members digested, small ones whole.
func testOutline(t *testing.T, h *harness) {
	h.sub(t, "SameStepsOutlined", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		mustSession(t, st, "p")
		mustRun(t, st, &steptype.Run{ID: "r", SessionID: "p", Agent: "agent", Status: steptype.RunRunning})
		steps := outlineSteps("p", "p-")
		for _, s := range steps {
			s.RunID = "r"
		}
		mustAppend(t, st, steps...)
		mustFork(t, st, "f", "p", 4)
		mustAppend(t, st, outlineSteps("f", "f-")...)
		for _, p := range []*store.StepListParams{
			{SessionID: "p"}, {SessionID: "f"}, {SessionID: "f", StartSeq: 3, EndSeq: 8}, {SessionID: "f", Desc: true, Limit: 5},
			{SessionID: "f", Kinds: []steptype.Kind{steptype.KindLLM}}, {RunID: "r"}, {SessionID: "p", Status: steptype.StepFailed},
			{SessionID: "f", StartSeq: 9, EndSeq: 2},
		} {
			full, err := st.StepList(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			got, err := st.StepOutline(ctx, p)
			if err != nil {
				t.Fatalf("StepOutline(%+v): %v", p, err)
			}
			if got == nil || len(got) != len(full) {
				t.Fatalf("StepOutline(%+v): %d steps (nil %v), StepList %d", p, len(got), got == nil, len(full))
			}
			for i := range full {
				if want := rules.OutlineOf(full[i]); !reflect.DeepEqual(got[i], want) {
					t.Errorf("StepOutline(%+v)[%d]:\n got %+v\nwant %+v", p, i, got[i], want)
				}
			}
		}
		got, err := st.StepOutline(ctx, &store.StepListParams{SessionID: "p"})
		if err != nil {
			t.Fatal(err)
		}
		u, l, tool, in, dec, x := got[0], got[1], got[2], got[3], got[4], got[5]
		if u.Content == "same" || u.Content != l.Content || l.Content == x.Content || l.Reasoning == "why" {
			t.Errorf("content digests: user %q llm %q other %q reasoning %q", u.Content, l.Content, x.Content, l.Reasoning)
		}
		if l.ToolCalls[0].Name != "search" || string(l.ToolCalls[0].Arguments) == `{"q":"x"}` || string(l.ToolCalls[0].Arguments) != string(tool.Inputs) {
			t.Errorf("tool call %+v, tool inputs %s: want the name and the arguments' digest", l.ToolCalls[0], tool.Inputs)
		}
		if tool.ToolName != "search" || tool.Error == nil || tool.Error.Code != "timeout" || tool.Metrics.Cost != 0.5 || tool.Metrics.Duration != 2*time.Second || len(tool.Outputs) > 40 {
			t.Errorf("tool outline %+v", tool)
		}
		if string(in.Inputs) != `{"approval":{"id":"c","name":"pay"}}` || string(dec.Outputs) != `{"choice":"left"}` || dec.Annotations.State != "routing" {
			t.Errorf("kept payloads: input %s decision %s", in.Inputs, dec.Outputs)
		}
		if dec.StatePatch != nil || dec.Metadata != nil {
			t.Errorf("decision outline keeps %s %v", dec.StatePatch, dec.Metadata)
		}
		if _, err := st.StepOutline(ctx, &store.StepListParams{SessionID: "nope"}); err == nil {
			t.Error("StepOutline of an unknown session: no error")
		}
	})
}

// testRunLatest: a store.LatestRunReader finds each session's newest
// top-level run, as RunList orders them, and counts the top-level runs.
func testRunLatest(t *testing.T, h *harness) {
	h.sub(t, "NewestTopLevel", func(t *testing.T, st store.Store) {
		ctx := t.Context()
		for _, s := range []string{"a", "b", "c"} {
			mustSession(t, st, s)
		}
		at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
		for _, r := range []*steptype.Run{
			{ID: "a1", SessionID: "a", Status: steptype.RunCompleted, CreatedAt: at},
			{ID: "a2", SessionID: "a", Status: steptype.RunFailed, CreatedAt: at.Add(time.Minute)},
			{ID: "a3", SessionID: "a", Status: steptype.RunRunning, CreatedAt: at.Add(2 * time.Minute), Hop: 1, ParentRunID: "a2"},
			// Same time: the higher id is newer (RunList's order).
			{ID: "b1", SessionID: "b", Status: steptype.RunCancelled, CreatedAt: at},
			{ID: "b2", SessionID: "b", Status: steptype.RunWaiting, CreatedAt: at},
		} {
			r.Agent = "agent"
			mustRun(t, st, r)
		}
		got, err := st.RunLatest(ctx, &store.RunLatestParams{SessionIDs: []string{"a", "b", "c", "unknown"}})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]store.LatestRun{"a": {RunID: "a2", Status: steptype.RunFailed, Runs: 2}, "b": {RunID: "b2", Status: steptype.RunWaiting, Runs: 2}}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("RunLatest = %v, want %v", got, want)
		}
		for sid, l := range want {
			runs, err := st.RunList(ctx, &store.RunListParams{SessionID: sid})
			if err != nil || runs[0].ID != l.RunID && runs[1].ID != l.RunID {
				t.Errorf("RunList(%s) = %v, %v: disagrees with RunLatest %v", sid, runs, err, l)
			}
		}
		if got, err := st.RunLatest(ctx, &store.RunLatestParams{}); err != nil || len(got) != 0 {
			t.Errorf("RunLatest(none) = %v, %v", got, err)
		}
		if _, err := st.RunLatest(ctx, &store.RunLatestParams{SessionIDs: make([]string, store.MaxRunLatest+1)}); err == nil {
			t.Error("RunLatest over the bound: no error")
		}
	})
}
