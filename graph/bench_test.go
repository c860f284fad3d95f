package graph_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stepwise-run/stepwise/graph"
	"github.com/stepwise-run/stepwise/steptype"
)

// longSession is a 10,000-step ReAct session over `tools` distinct tools
// (plus `states` annotated states on every fifth step).
func longSession(steps, tools, states int) []*steptype.Step {
	c := newChain("s", "r")
	c.add(user("go"))
	for i := 0; len(c.steps) < steps; i++ {
		name := fmt.Sprint("tool", i%tools)
		l := c.add(llmCall(name))
		if states > 0 && i%5 == 0 {
			l.Annotations.State = fmt.Sprint("state ", i%states)
		}
		c.add(toolStep(name, fmt.Sprintf(`{"i":%d}`, i)))
	}
	return c.steps
}

func benchBuild(b *testing.B, steps []*steptype.Step) {
	b.ReportAllocs()
	var g *graph.Graph
	for b.Loop() {
		g = graph.Build(steps, graph.Options{})
	}
	b.ReportMetric(float64(len(g.Nodes)), "nodes")
	b.ReportMetric(float64(len(g.Edges)), "edges")
}

// BenchmarkBuild10kSteps: a 10,000-step session with 20 tools.
func BenchmarkBuild10kSteps(b *testing.B) { benchBuild(b, longSession(10_000, 20, 0)) }

// BenchmarkBuild10kSteps100States: the same with 100 annotated states.
func BenchmarkBuild10kSteps100States(b *testing.B) { benchBuild(b, longSession(10_000, 20, 100)) }

// BenchmarkBuild10kStepsMaxNodes: 1,000 distinct states, folded to 300 nodes.
func BenchmarkBuild10kStepsMaxNodes(b *testing.B) { benchBuild(b, longSession(10_000, 40, 1000)) }

// BenchmarkMarshal10k: JSON of the 10,000-step graph.
func BenchmarkMarshal10k(b *testing.B) {
	g := graph.Build(longSession(10_000, 20, 100), graph.Options{})
	b.ReportAllocs()
	for b.Loop() {
		out, _ := json.Marshal(g)
		b.SetBytes(int64(len(out)))
	}
}
