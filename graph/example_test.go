package graph_test

import (
	"fmt"

	"github.com/stepwise-run/stepwise/graph"
	"github.com/stepwise-run/stepwise/steptype"
)

// A model calls the same tool with the same arguments three times: the
// tool's state is flagged stuck, and the way back to the model is a loop.
func ExampleBuild() {
	c := newChain("s1", "run1")
	c.add(user("book a table"))
	for range 3 {
		c.add(llmCall("search"))
		c.add(toolStep("search", `{"q":"tables tonight"}`))
	}
	c.add(&steptype.Step{Kind: steptype.KindLLM, Name: "llm", Role: steptype.RoleAssistant, Content: "No table is free."})
	g := graph.Build(c.steps, graph.Options{})
	for _, n := range g.Nodes {
		fmt.Printf("%s/%s visits=%d repeated=%v stuck=%v\n", n.Name, n.Label, n.Visits, n.Repeated, n.Stuck)
	}
	for _, e := range g.Edges {
		fmt.Printf("%s %s×%d\n", e.Direction, e.Actions[0].Label, e.Count)
	}
	fmt.Printf("share of steps revisiting a state %.3f\n", g.RepeatedStepRatio)
	// Output:
	// user/user visits=1 repeated=false stuck=false
	// llm/llm visits=4 repeated=true stuck=true
	// tools/search visits=3 repeated=true stuck=true
	// forward → llm×1
	// forward call search×3
	// backward → llm×3
	// share of steps revisiting a state 0.625
}
