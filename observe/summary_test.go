package observe_test

import (
	"context"
	"github.com/stepwise-run/stepwise/stepwisetest"
	"iter"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/observe"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// counted counts the calls of a model.
type counted struct {
	llm.Model
	n atomic.Int64
}

func (c *counted) Generate(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Response, error] {
	c.n.Add(1)
	return c.Model.Generate(ctx, req)
}

func TestSummarizer(t *testing.T) {
	t.Parallel()
	stepwisetest.ForEachStore(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		annotated := &steptype.Step{ID: "a", Annotations: steptype.Annotations{
			State: "The browser shows the checkout page with two items in the cart", GoalSummary: "buy", Goal: "Buy milk and bread",
			Action: "Click the pay button"}}
		plain := &steptype.Step{ID: "b"}
		seed(t, st, annotated, plain)
		model := &counted{Model: scripted.New("sum", scripted.Script{Turns: []scripted.Turn{
			{Text: "Here you go:\n```json\n{\"state\": \"checkout, 2 items\", \"action\": \"pay\"}\n```"},
		}})}
		sum, err := observe.NewSummarizer(observe.SummarizerConfig{Store: st, Model: model, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		run := &stepwise.Run{ID: "r"}
		sum.StepCommitted(ctx, run, plain)
		sum.StepCommitted(ctx, run, annotated)
		if n := model.n.Load(); n != 1 {
			t.Errorf("model called %d times, want once (plain step has nothing to summarize)", n)
		}
		steps, _ := st.StepList(ctx, &store.StepListParams{SessionID: "s"})
		if err := observe.ApplyAnnotations(ctx, st, steps); err != nil {
			t.Fatal(err)
		}
		got := steps[0].Annotations
		if got.StateSummary != "checkout, 2 items" || got.ActionSummary != "pay" || got.GoalSummary != "buy" || got.State != annotated.Annotations.State {
			t.Errorf("annotations = %+v", got)
		}

		// An answer without summaries stores nothing.
		bad, _ := observe.NewSummarizer(observe.SummarizerConfig{Store: st, Logger: slog.New(slog.DiscardHandler),
			Model: scripted.New("bad", scripted.Script{Turns: []scripted.Turn{{Text: "I cannot help with that."}}})})
		if _, err := bad.Summarize(ctx, "b", steptype.Annotations{Goal: "g"}); err == nil {
			t.Error("Summarize with a prose answer: no error")
		}
		rows, _ := st.AnnotationList(ctx, &store.AnnotationListParams{StepIDs: []string{"b"}})
		if len(rows) != 0 {
			t.Errorf("annotation stored from a bad answer: %+v", rows[0])
		}
	})
}

func TestNewSummarizerNeedsModel(t *testing.T) {
	t.Parallel()
	if _, err := observe.NewSummarizer(observe.SummarizerConfig{Store: stepwisetest.Memory(t)}); err == nil {
		t.Error("no error without a model")
	}
}
