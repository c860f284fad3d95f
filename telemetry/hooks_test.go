package telemetry_test

import (
	"log/slog"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/telemetry"
)

// Registered as an observer, the exporter turns each committed step into a
// span as the run goes, and the run into the root span when it ends.
func TestLiveExport(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := memory.New()
	e, err := stepwise.New(stepwise.Config{Store: st, Agents: agents(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	mem := tracetest.NewInMemoryExporter()
	x, err := telemetry.New(ctx, telemetry.Config{Exporter: mem, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Shutdown(ctx)
	defer e.Observe(x)()
	r, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "boss", Input: "what is 2+2?"}))
	if err != nil || r.Status != steptype.RunCompleted {
		t.Fatalf("run = %+v, %v", r, err)
	}
	if err := e.FlushObservers(ctx); err != nil {
		t.Fatal(err)
	}
	if err := x.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	steps, _ := st.StepList(ctx, &store.StepListParams{SessionID: r.SessionID})
	spans := mem.GetSpans()
	if len(spans) != len(steps)+2 {
		t.Errorf("%d spans, want %d", len(spans), len(steps)+2)
	}
	roots := 0
	for _, s := range spans {
		if s.SpanContext.TraceID() != telemetry.TraceID(r.ID) {
			t.Errorf("span %q outside the run's trace", s.Name)
		}
		if !s.Parent.IsValid() {
			roots++
		}
	}
	if roots != 1 {
		t.Errorf("%d root spans, want 1", roots)
	}
}
