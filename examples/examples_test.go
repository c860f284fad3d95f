// Package examples_test runs every example agent under examples/ and
// compares its events with the golden transcript in testdata/ (go test
// -update rewrites them).
package examples_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/internal/agentload"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/stepwisetest"
)

// inputs are the user messages of the examples, as their docs run them.
var inputs = map[string]string{
	"assistant": "What is 12*34 + 56*78?",
}

func TestExampleTranscripts(t *testing.T) {
	files, err := filepath.Glob("*/agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no examples found")
	}
	for _, file := range files {
		name := filepath.Dir(file)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			input, ok := inputs[name]
			if !ok {
				t.Fatalf("examples/%s has no input in inputs", name)
			}
			st := stepwisetest.Memory(t)
			l, err := agentload.Load(t.Context(), file, agentload.Options{Store: st})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			e := stepwisetest.NewEngine(t, stepwise.Config{Store: st, Agents: []*stepwise.Agent{l.Agent}})
			events := stepwisetest.Collect(t, e.Run(t.Context(), stepwise.StartParams{Agent: l.Agent.Name, Input: input}))
			if last := events[len(events)-1]; last.Type != stepwise.EventRunFinished || last.Run.Status != steptype.RunCompleted {
				t.Fatalf("last event %s, run %+v", last.Type, last.Run)
			}
			stepwisetest.Golden(t, filepath.Join("testdata", name+".events.golden"), events)
		})
	}
	// Every golden file belongs to an example.
	goldens, _ := filepath.Glob("testdata/*.events.golden")
	for _, g := range goldens {
		name := filepath.Base(g)
		name = name[:len(name)-len(".events.golden")]
		if _, err := os.Stat(filepath.Join(name, "agent.yaml")); err != nil {
			t.Errorf("%s has no example %s/agent.yaml", g, name)
		}
	}
}
