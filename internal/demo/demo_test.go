package demo_test

import (
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/internal/demo"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/stepwisetest"
)

// now is the demo clock's time in the transcripts.
var now = func() time.Time { return time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC) }

// TestAnalystTranscript runs the demo question and compares its events
// with testdata/analyst.events.golden (go test -update rewrites it).
func TestAnalystTranscript(t *testing.T) {
	t.Parallel()
	analyst, err := demo.Agents(demo.Options{Fast: true, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	e := stepwisetest.NewEngine(t, stepwise.Config{Agents: []*stepwise.Agent{analyst}})
	events := stepwisetest.Collect(t, e.Run(t.Context(), stepwise.StartParams{Agent: "analyst", Input: demo.Input}))
	last := events[len(events)-1]
	if last.Type != stepwise.EventRunFinished || last.Run.Status != steptype.RunCompleted {
		t.Fatalf("last event %s, run %+v", last.Type, last.Run)
	}
	stepwisetest.Golden(t, "testdata/analyst.events.golden", events)
}
