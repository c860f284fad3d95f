package stepwisetest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/stepwisetest"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/tool"
)

type addArgs struct {
	A int `json:"a"`
	B int `json:"b"`
}

// adder is the agent under test: a model that calls an "add" tool, then
// answers.
func adder(model llm.Model) *stepwise.Agent {
	add := tool.New("add", "Adds two integers.", func(ctx context.Context, a addArgs) (int, error) {
		return a.A + a.B, nil
	})
	return &stepwise.Agent{Name: "adder", Instructions: "Add with the tool.", Model: model, Tools: []tool.Tool{add}}
}

// TestAdder is how a user tests an agent: script the model's turns, run
// the agent on a test engine, check what the model was asked, and compare
// the run's events with a golden transcript (go test -update rewrites it).
func TestAdder(t *testing.T) {
	model := stepwisetest.Replies(
		stepwisetest.ToolCalls(stepwisetest.Call("call_1", "add", `{"a":2,"b":3}`)),
		stepwisetest.Text("2 + 3 = 5."),
	)
	e := stepwisetest.NewEngine(t, stepwise.Config{Agents: []*stepwise.Agent{adder(model)}})
	events := stepwisetest.Collect(t, e.Run(t.Context(), stepwise.StartParams{Agent: "adder", Input: "What is 2 + 3?"}))

	last := events[len(events)-1]
	if last.Type != stepwise.EventRunFinished || last.Run.Output != "2 + 3 = 5." {
		t.Fatalf("last event %s, run %+v", last.Type, last.Run)
	}
	// The second call carries the tool's result back to the model.
	if reqs := model.Requests(); len(reqs) != 2 || reqs[1].Messages[len(reqs[1].Messages)-1].Content != "5" {
		t.Errorf("requests %+v", reqs)
	}
	stepwisetest.Golden(t, "testdata/adder.events.golden", events)
}

// TestAdderOnSQLite runs the same agent on the SQLite driver.
func TestAdderOnSQLite(t *testing.T) {
	model := stepwisetest.Replies(
		stepwisetest.ToolCalls(stepwisetest.Call("call_1", "add", `{"a":2,"b":3}`)),
		stepwisetest.Text("2 + 3 = 5."),
	)
	e := stepwisetest.NewEngine(t, stepwise.Config{Store: stepwisetest.SQLite(t), Agents: []*stepwise.Agent{adder(model)}})
	events := stepwisetest.Collect(t, e.Run(t.Context(), stepwise.StartParams{Agent: "adder", Input: "What is 2 + 3?"}))
	// The transcript does not depend on the driver.
	stepwisetest.Golden(t, "testdata/adder.events.golden", events)
}

// A transcript masks what changes from run to run: ids are numbered in the
// order they appear, times and durations are placeholders.
func ExampleTranscript() {
	e, err := stepwise.New(stepwise.Config{Store: memory.New(), Agents: []*stepwise.Agent{
		{Name: "echo", Model: stepwisetest.Replies(stepwisetest.Text("hello"))},
	}})
	if err != nil {
		panic(err)
	}
	defer e.Close()
	var events []*stepwise.Event
	for ev, err := range e.Run(context.Background(), stepwise.StartParams{Agent: "echo", Input: "hi"}) {
		if err != nil {
			panic(err)
		}
		events = append(events, ev)
	}
	out, err := stepwisetest.Transcript(events[len(events)-1:])
	if err != nil {
		panic(err)
	}
	fmt.Print(string(out))
	// Output:
	// {
	//   "position": "2:1",
	//   "run": {
	//     "agent": "echo",
	//     "created_at": "<time>",
	//     "cursor": "end",
	//     "hop": 0,
	//     "id": "<id1>",
	//     "input": "hi",
	//     "lease_expires": "<time>",
	//     "lease_owner": "<owner>",
	//     "options": {
	//       "agent_version": "084120b35301e9a5"
	//     },
	//     "output": "hello",
	//     "session_id": "<id2>",
	//     "status": "completed",
	//     "step_count": 2,
	//     "updated_at": "<time>"
	//   },
	//   "run_id": "<id1>",
	//   "session_id": "<id2>",
	//   "time": "<time>",
	//   "type": "run_finished"
	// }
}
