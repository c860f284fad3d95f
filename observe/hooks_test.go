package observe_test

import (
	"context"
	"encoding/json"
	"github.com/stepwise-run/stepwise/stepwisetest"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/observe"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/tool"
)

type lookupArgs struct {
	Email string `json:"email"`
}

// A run through a real engine: masking before persistence, events inside
// the llm and tool steps, background summaries of annotations.
func TestEngineObservation(t *testing.T) {
	t.Parallel()
	stepwisetest.ForEachStore(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		var seen string
		lookup := tool.New("lookup", "Finds a customer.", func(ctx context.Context, a lookupArgs) (string, error) {
			seen = a.Email
			stepwise.RecordStepEvent(ctx, &stepwise.StepEvent{Type: "api_call", Name: "GET /customers", Payload: map[string]string{"authorization": "Bearer abcdefghijklmnop"}})
			return "customer " + a.Email + " has card 4111 1111 1111 1111", nil
		})
		note := stepwise.StepFunc(func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
			s.Annotate(stepwise.Annotations{State: "customer found", Goal: "help the customer", Action: "answer"})
			return &stepwise.Next{Step: stepwise.StepEnd, Output: map[string]string{"contact": "ann@example.com"}}, nil
		})
		agent := &stepwise.Agent{Name: "support", Tools: []stepwise.Tool{lookup}, AfterLLM: "note",
			Steps: map[string]stepwise.Handler{"note": note},
			Model: scripted.New("support", scripted.Script{Strict: true, Turns: []scripted.Turn{
				{ToolCalls: []steptype.ToolCall{{Name: "lookup", Arguments: json.RawMessage(`{"email":"ann@example.com"}`)}}},
				{Text: "Found ann@example.com."},
			}})}
		e := stepwisetest.NewEngine(t, stepwise.Config{Store: st, Agents: []*stepwise.Agent{agent}})
		masker := observe.NewMasker(observe.MaskConfig{})
		e.Mask(masker.Step)
		rec, err := observe.NewRecorder(observe.RecorderConfig{Store: st, Mask: masker.Text})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Observe(rec)()
		sum, err := observe.NewSummarizer(observe.SummarizerConfig{Store: st, Model: scripted.New("sum", scripted.Script{Strict: true,
			Turns: []scripted.Turn{{Text: `{"state":"found","goal":"help","action":"answer"}`}}})})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Observe(sum)()

		r, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "support", Input: "I am ann@example.com, help"}))
		if err != nil || r.Status != steptype.RunCompleted {
			t.Fatalf("run = %+v, %v", r, err)
		}
		if err := e.FlushObservers(ctx); err != nil {
			t.Fatal(err)
		}
		if seen != "ann@example.com" {
			t.Errorf("the tool got %q: tool arguments must not be masked by default", seen)
		}
		steps, _ := st.StepList(ctx, &store.StepListParams{SessionID: r.SessionID})
		body, _ := json.Marshal(steps)
		// Only the model's tool-call arguments keep the address (what the
		// tools step executes); everything else is masked.
		if strings.Count(string(body), "ann@example.com") != 1 || !strings.Contains(string(body), `"arguments":{"email":"ann@example.com"}`) ||
			strings.Contains(string(body), "4111 1111") {
			t.Errorf("unmasked content persisted: %s", body)
		}
		if !strings.HasPrefix(r.Input, "I am [email]") {
			t.Errorf("run input = %q, want masked", r.Input)
		}
		kinds := map[string]string{}
		for _, s := range steps {
			got, _ := events(t, st, s.ID)
			kinds[string(s.Kind)] += got + ";"
		}
		if kinds["llm"] != "provider_request scripted:support\nprovider_response scripted:support;provider_request scripted:support\nprovider_response scripted:support;" {
			t.Errorf("llm step events = %q", kinds["llm"])
		}
		if kinds["tool"] != "api_call GET /customers\ntool_invocation lookup;" {
			t.Errorf("tool step events = %q", kinds["tool"])
		}
		evs, _ := st.StepEventList(ctx, &store.StepEventListParams{RunID: r.ID})
		all, _ := json.Marshal(evs)
		if strings.Contains(string(all), "abcdefghijklmnop") || strings.Contains(string(all), "4111 1111") || strings.Contains(string(all), "ann@example.com") {
			t.Errorf("secret or personal data in events: %s", all)
		}
		if err := observe.ApplyAnnotations(ctx, st, steps); err != nil {
			t.Fatal(err)
		}
		last := steps[len(steps)-1]
		if last.Name != "note" || last.Annotations.StateSummary != "found" || last.Annotations.ActionSummary != "answer" {
			t.Errorf("annotations of %q = %+v", last.Name, last.Annotations)
		}
	})
}
