package graph_test

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/graph"
	"github.com/stepwise-run/stepwise/steptype"
)

// chain builds steps of one run, linked by parent_id, in sequence order.
type chain struct {
	session, run string
	steps        []*steptype.Step
	seq          int64
}

func newChain(session, run string) *chain { return &chain{session: session, run: run} }

func (c *chain) add(s *steptype.Step) *steptype.Step {
	c.seq++
	s.ID = fmt.Sprintf("%s-%s-%d", c.session, c.run, c.seq)
	s.SessionID, s.RunID, s.Sequence = c.session, c.run, c.seq
	if s.Status == "" {
		s.Status = steptype.StepCompleted
	}
	if n := len(c.steps); n > 0 {
		s.ParentID = c.steps[n-1].ID
	}
	c.steps = append(c.steps, s)
	return s
}

func user(text string) *steptype.Step {
	return &steptype.Step{Kind: steptype.KindUser, Name: "user", Role: steptype.RoleUser, Content: text}
}

func llmCall(tools ...string) *steptype.Step {
	s := &steptype.Step{Kind: steptype.KindLLM, Name: "llm", Role: steptype.RoleAssistant}
	for i, t := range tools {
		s.ToolCalls = append(s.ToolCalls, steptype.ToolCall{ID: fmt.Sprint("c", i), Name: t, Arguments: json.RawMessage(`{}`)})
	}
	if len(tools) == 0 {
		s.Content = "done"
	}
	return s
}

func toolStep(name, args string) *steptype.Step {
	return &steptype.Step{Kind: steptype.KindTool, Name: "tools", Role: steptype.RoleTool, ToolName: name, ToolCallID: "c0",
		Inputs: json.RawMessage(args), Fingerprint: name + args, Metrics: steptype.Metrics{InputTokens: 1, Cost: 0.5}}
}

func nodeBy(t *testing.T, g *graph.Graph, name, label string) *graph.Node {
	t.Helper()
	for _, n := range g.Nodes {
		if n.Name == name && n.Label == label {
			return n
		}
	}
	t.Fatalf("no node %s/%s in %v", name, label, labels(g))
	return nil
}

func edgeBy(t *testing.T, g *graph.Graph, from, to *graph.Node) *graph.Edge {
	t.Helper()
	for _, e := range g.Edges {
		if e.From == from.ID && e.To == to.ID {
			return e
		}
	}
	t.Fatalf("no edge %s → %s", from.Label, to.Label)
	return nil
}

func labels(g *graph.Graph) []string {
	var out []string
	for _, n := range g.Nodes {
		out = append(out, n.Name+"/"+n.Label)
	}
	return out
}

// A ReAct run: the model calls search twice, then answers.
func reactSession(session string) []*steptype.Step {
	c := newChain(session, session+"-run")
	c.add(user("find it"))
	c.add(llmCall("search"))
	c.add(toolStep("search", `{"q":"a"}`))
	c.add(llmCall("search"))
	c.add(toolStep("search", `{"q":"b"}`))
	c.add(llmCall())
	return c.steps
}

func TestReactLoop(t *testing.T) {
	t.Parallel()
	g := graph.Build(reactSession("s1"), graph.Options{})
	if g.Steps != 6 || g.Sessions != 1 || g.Runs != 1 || len(g.Nodes) != 3 {
		t.Fatalf("steps=%d sessions=%d runs=%d nodes=%v", g.Steps, g.Sessions, g.Runs, labels(g))
	}
	u, l, s := nodeBy(t, g, "user", "user"), nodeBy(t, g, "llm", "llm"), nodeBy(t, g, "tools", "search")
	if l.Visits != 3 || s.Visits != 2 || l.MaxRunVisits != 3 || !l.Repeated || s.Repeated {
		t.Fatalf("llm %+v search %+v", l, s)
	}
	if s.Cost != 1 || s.Tokens != 2 || len(s.Steps) != 2 || s.Steps[0].Sequence != 3 {
		t.Fatalf("search metrics %+v", s)
	}
	if u.Entries != 1 || l.Entries != 0 {
		t.Fatalf("entries user=%d llm=%d", u.Entries, l.Entries)
	}
	call := edgeBy(t, g, l, s)
	if call.Direction != graph.Forward || call.Count != 2 || call.Actions[0] != (graph.Action{Label: "call search", Count: 2}) {
		t.Fatalf("llm→search %+v", call)
	}
	back := edgeBy(t, g, s, l)
	if back.Direction != graph.Backward || !back.Loop || back.Count != 2 || back.Actions[0].Label != "→ llm" || !l.Loop {
		t.Fatalf("search→llm %+v", back)
	}
	if edgeBy(t, g, u, l).Direction != graph.Forward || g.Loops != 1 {
		t.Fatalf("loops = %d", g.Loops)
	}
	if g.RepeatedStepRatio != float64(g.Steps-3)/float64(g.Steps) || g.RepeatedStepRatio < 0 || g.RepeatedStepRatio > 1 {
		t.Fatalf("ratio = %v", g.RepeatedStepRatio)
	}
	if s.Stuck || g.StuckNodes != 0 {
		t.Fatal("different arguments flagged as stuck")
	}
}

func TestStuckSameToolCall(t *testing.T) {
	t.Parallel()
	c := newChain("s", "r")
	c.add(user("go"))
	for range 3 {
		c.add(llmCall("click"))
		c.add(toolStep("click", `{"x":1}`))
	}
	g := graph.Build(c.steps, graph.Options{})
	click := nodeBy(t, g, "tools", "click")
	if !click.Stuck || !click.Repeated || g.StuckNodes < 1 {
		t.Fatalf("click %+v stuck nodes %d", click, g.StuckNodes)
	}
	// A higher threshold no longer flags it.
	g = graph.Build(c.steps, graph.Options{RepeatThreshold: 4})
	if nodeBy(t, g, "tools", "click").Stuck {
		t.Fatal("stuck below the threshold")
	}
}

func TestAnnotatedStatesDecisionsAndSelfEdges(t *testing.T) {
	t.Parallel()
	c := newChain("s", "r")
	page := func(state, action string) *steptype.Step {
		return &steptype.Step{Kind: steptype.KindCustom, Name: "browse", Annotations: steptype.Annotations{State: state, Action: action}}
	}
	c.add(page("login page", "type password"))
	c.add(page("login page", "submit")) // same state again: a self edge
	c.add(page("inbox", "open mail"))
	c.add(&steptype.Step{Kind: steptype.KindDecision, Name: "route", Outputs: json.RawMessage(`{"choice":"retry"}`)})
	c.add(page("login page", "submit"))
	g := graph.Build(c.steps, graph.Options{})
	login, inbox := nodeBy(t, g, "browse", "login page"), nodeBy(t, g, "browse", "inbox")
	route := nodeBy(t, g, "route", "choice: retry")
	if login.Visits != 3 || inbox.Visits != 1 || login.Order != 0 || inbox.Order != 1 {
		t.Fatalf("login %+v inbox %+v", login, inbox)
	}
	self := edgeBy(t, g, login, login)
	if self.Direction != graph.Self || !self.Loop || self.Actions[0].Label != "type password" || len(self.Points) < 2 {
		t.Fatalf("self %+v", self)
	}
	if e := edgeBy(t, g, login, inbox); e.Actions[0].Label != "submit" || e.Direction != graph.Forward {
		t.Fatalf("login→inbox %+v", e)
	}
	if e := edgeBy(t, g, route, login); e.Actions[0].Label != "choose retry" || e.Direction != graph.Backward {
		t.Fatalf("route→login %+v", e)
	}
	if g.Loops != 2 {
		t.Fatalf("loops %d", g.Loops)
	}
}

func TestMergeSessionsAndForks(t *testing.T) {
	t.Parallel()
	a := reactSession("a")
	b := reactSession("b")
	// A fork of a at sequence 3 reads a's first three steps through its
	// lineage (with a's ids), then has its own.
	fork := newChain("f", "rf")
	fork.seq = 3
	tail := fork.add(llmCall())
	tail.ParentID = a[2].ID
	forkSteps := append(append([]*steptype.Step{}, a[:3]...), tail)

	bld := graph.NewBuilder(graph.Options{})
	bld.Add(a)
	bld.Add(b)
	bld.Add(forkSteps)
	g := bld.Graph()
	if g.Steps != 13 || g.Sessions != 3 || g.Runs != 3 || len(g.Nodes) != 3 {
		t.Fatalf("steps=%d sessions=%d runs=%d nodes=%v", g.Steps, g.Sessions, g.Runs, labels(g))
	}
	l, s := nodeBy(t, g, "llm", "llm"), nodeBy(t, g, "tools", "search")
	if l.Visits != 7 || l.Sessions != 3 || l.MaxRunVisits != 3 || s.Visits != 4 {
		t.Fatalf("llm %+v", l)
	}
	// The fork's own step continues from the shared tool step.
	if e := edgeBy(t, g, s, l); e.Count != 5 || e.MaxRunCount != 2 {
		t.Fatalf("search→llm %+v", e)
	}
}

func TestFoldBeyondMaxNodes(t *testing.T) {
	t.Parallel()
	c := newChain("s", "r")
	for i := range 50 {
		c.add(&steptype.Step{Kind: steptype.KindCustom, Name: "visit", Annotations: steptype.Annotations{State: fmt.Sprint("page ", i)}})
		if i%10 == 0 {
			c.add(&steptype.Step{Kind: steptype.KindCustom, Name: "visit", Annotations: steptype.Annotations{State: "home"}})
		}
	}
	g := graph.Build(c.steps, graph.Options{MaxNodes: 10})
	if len(g.Nodes) > 10 || g.Merged == 0 || g.Steps != 55 {
		t.Fatalf("nodes=%d merged=%d", len(g.Nodes), g.Merged)
	}
	total, other := 0, 0
	for _, n := range g.Nodes {
		total += n.Visits
		if n.Other {
			other++
		}
	}
	if total != 55 || other != 1 || nodeBy(t, g, "visit", "home").Visits != 5 {
		t.Fatalf("visits=%d other=%d", total, other)
	}
}

func TestLayoutGeometry(t *testing.T) {
	t.Parallel()
	c := newChain("s", "r")
	c.add(user("go"))
	for i := range 6 {
		c.add(llmCall("t" + fmt.Sprint(i%3)))
		c.add(toolStep("t"+fmt.Sprint(i%3), fmt.Sprintf(`{"i":%d}`, i)))
	}
	c.add(llmCall())
	g := graph.Build(c.steps, graph.Options{})
	if g.Width <= 0 || g.Height <= 0 {
		t.Fatalf("size %vx%v", g.Width, g.Height)
	}
	for i, a := range g.Nodes {
		if a.W != 200 || a.H != 56 || a.X < 0 || a.Y < 0 || a.X+a.W > g.Width || a.Y+a.H > g.Height {
			t.Fatalf("node %s out of bounds: %+v in %vx%v", a.Label, a, g.Width, g.Height)
		}
		for _, b := range g.Nodes[i+1:] {
			if a.X < b.X+b.W && b.X < a.X+a.W && a.Y < b.Y+b.H && b.Y < a.Y+a.H {
				t.Fatalf("nodes overlap: %+v %+v", a, b)
			}
		}
	}
	byID := map[string]*graph.Node{}
	for _, n := range g.Nodes {
		byID[n.ID] = n
	}
	for _, e := range g.Edges {
		if len(e.Points) < 2 {
			t.Fatalf("edge %s has %d points", e.ID, len(e.Points))
		}
		from, to := byID[e.From], byID[e.To]
		if d := distToBox(e.Points[0], from); d > 2 {
			t.Fatalf("edge %s starts %.1f away from its source", e.ID, d)
		}
		if d := distToBox(e.Points[len(e.Points)-1], to); d > 2 {
			t.Fatalf("edge %s ends %.1f away from its target", e.ID, d)
		}
	}
}

// distToBox is the distance from p to the node's box (0 inside).
func distToBox(p [2]float64, n *graph.Node) float64 {
	dx := math.Max(0, math.Max(n.X-p[0], p[0]-(n.X+n.W)))
	dy := math.Max(0, math.Max(n.Y-p[1], p[1]-(n.Y+n.H)))
	return math.Hypot(dx, dy)
}

func TestDeterministicAndJSON(t *testing.T) {
	t.Parallel()
	steps := reactSession("s")
	a, _ := json.Marshal(graph.Build(steps, graph.Options{}))
	b, _ := json.Marshal(graph.Build(steps, graph.Options{}))
	if string(a) != string(b) {
		t.Fatal("two builds differ")
	}
	for _, k := range []string{`"nodes":[`, `"edges":[`, `"direction":"backward"`, `"repeated_step_ratio":0.5`, `"points":[[`} {
		if !strings.Contains(string(a), k) {
			t.Fatalf("JSON lacks %s: %s", k, a)
		}
	}
}

func TestEmptyAndOddInput(t *testing.T) {
	t.Parallel()
	g := graph.Build(nil, graph.Options{})
	if len(g.Nodes) != 0 || len(g.Edges) != 0 || g.Steps != 0 || g.RepeatedStepRatio != 0 {
		t.Fatalf("empty graph %+v", g)
	}
	if b, _ := json.Marshal(g); !strings.Contains(string(b), `"nodes":[]`) {
		t.Fatalf("empty graph JSON %s", b)
	}
	// One step, a nil step, a step without id or run, a duplicate id.
	one := &steptype.Step{ID: "x", SessionID: "s", Kind: steptype.KindUser, Name: "user"}
	g = graph.Build([]*steptype.Step{one, nil, {SessionID: "s", Kind: steptype.KindError, Name: "llm", Status: steptype.StepFailed,
		Error: &steptype.StepError{Message: "boom", Code: "http_500"}}, one}, graph.Options{})
	if g.Steps != 2 || len(g.Nodes) != 2 || len(g.Edges) != 1 {
		t.Fatalf("odd input: steps=%d nodes=%v edges=%d", g.Steps, labels(g), len(g.Edges))
	}
	if n := nodeBy(t, g, "llm", "error: http_500"); n.Errors != 1 {
		t.Fatalf("error node %+v", n)
	}
	// A single isolated state is still placed.
	g = graph.Build([]*steptype.Step{one}, graph.Options{})
	if len(g.Nodes) != 1 || g.Nodes[0].X <= 0 || g.Width < 200 {
		t.Fatalf("single node %+v %vx%v", g.Nodes[0], g.Width, g.Height)
	}
}

func TestLabelsAreClipped(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("state ", 100)
	g := graph.Build([]*steptype.Step{{ID: "a", SessionID: "s", Kind: steptype.KindCustom, Name: "x", Annotations: steptype.Annotations{State: long}}}, graph.Options{})
	if n := []rune(g.Nodes[0].Label); len(n) != 80 || n[79] != '…' {
		t.Fatalf("label %q", g.Nodes[0].Label)
	}
}

// TestAddDerivedIsAdd: a graph built from steps with their Derived values
// computed beforehand (and Grow) equals the one Add builds, forks and
// annotated states included.
func TestAddDerivedIsAdd(t *testing.T) {
	t.Parallel()
	a, b := reactSession("a"), longSession(300, 7, 11)
	fork := newChain("f", "rf")
	fork.seq = 3
	tail := fork.add(llmCall())
	tail.ParentID = a[2].ID
	forkSteps := append(append([]*steptype.Step{}, a[:3]...), tail)
	sessions := [][]*steptype.Step{a, b, forkSteps}
	want := graph.NewBuilder(graph.Options{MaxNodes: 5})
	got := graph.NewBuilder(graph.Options{MaxNodes: 5})
	got.Grow(len(a) + len(b) + len(forkSteps))
	for _, steps := range sessions {
		want.Add(steps)
		d := make([]graph.Derived, len(steps))
		for i, s := range steps {
			d[i] = graph.Derive(s)
		}
		got.AddDerived(steps, d)
	}
	gj, _ := json.Marshal(got.Graph())
	wj, _ := json.Marshal(want.Graph())
	if string(gj) != string(wj) {
		t.Fatalf("AddDerived:\n%.800s\nAdd:\n%.800s", gj, wj)
	}
}
