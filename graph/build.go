package graph

import (
	"cmp"
	"slices"

	"github.com/stepwise-run/stepwise/steptype"
)

// Builder accumulates steps, of one session or of many, into a graph. It is
// not safe for concurrent use.
type Builder struct {
	opts      Options
	byID      map[string]int // step id → visit index
	lastOfRun map[string]int // run key → its latest visit
	visits    []visit
}

// visit is one step as the graph sees it.
type visit struct {
	key    string // hop, name and fingerprint
	name   string
	kind   steptype.Kind
	hop    int
	label  string
	fp     string
	run    string // run id, or the session for steps without one
	ref    StepRef
	prev   int    // index of the previous visit, -1 for none
	action string // what the step did, "" when it names nothing
	sig    string // "the same thing again" signature
	failed bool
	tokens int64
	cost   float64
	durMS  int64
}

// NewBuilder returns an empty builder.
func NewBuilder(opts Options) *Builder {
	return &Builder{opts: opts.withDefaults(), byID: map[string]int{}, lastOfRun: map[string]int{}}
}

// Build is NewBuilder(opts), Add(steps), Graph().
func Build(steps []*steptype.Step, opts Options) *Graph {
	b := NewBuilder(opts)
	b.Add(steps)
	return b.Graph()
}

// Add adds steps in sequence order (one session's steps, or a page of
// them; call it again for more sessions). A step whose id was added before,
// such as a step a fork shares with its parent, is counted once. A step's
// predecessor is its parent_id when that step was added, else the previous
// step added for the same run.
func (b *Builder) Add(steps []*steptype.Step) {
	for _, s := range steps {
		if s != nil && !b.added(s) {
			b.add(s, Derive(s))
		}
	}
}

// Derived is what a graph takes from one step on its own: its state
// (fingerprint and label), the action it took and its "the same thing
// again" signature. A caller that keeps steps between graphs can keep their
// Derived values too (Derive once, AddDerived each time) instead of having
// Add compute them for every graph.
type Derived struct {
	key, label, fp, action, sig string
}

// Derive returns what a graph takes from s on its own.
func Derive(s *steptype.Step) Derived {
	fp, label := stateOf(s)
	return Derived{key: nodeKey(s.Hop, s.Name, fp), label: label, fp: fp, action: actionOf(s), sig: signatureOf(s)}
}

// Size returns the bytes d holds beyond its own size.
func (d *Derived) Size() int {
	return len(d.key) + len(d.label) + len(d.fp) + len(d.action) + len(d.sig)
}

// AddDerived is Add with derived[i] = Derive(steps[i]) given (it panics
// when the lengths differ).
func (b *Builder) AddDerived(steps []*steptype.Step, derived []Derived) {
	if len(steps) != len(derived) {
		panic("graph: AddDerived: steps and derived values differ in length")
	}
	for i, s := range steps {
		if s != nil && !b.added(s) {
			b.add(s, derived[i])
		}
	}
}

// Grow makes room for n more steps.
func (b *Builder) Grow(n int) {
	b.visits = slices.Grow(b.visits, n)
	if len(b.byID) == 0 {
		b.byID = make(map[string]int, n)
	}
}

// added reports whether a step with s's id was added before.
func (b *Builder) added(s *steptype.Step) bool {
	_, dup := b.byID[s.ID]
	return dup && s.ID != ""
}

// add adds s, not added before, with its derived values.
func (b *Builder) add(s *steptype.Step, d Derived) {
	run := s.RunID
	if run == "" {
		run = "session:" + s.SessionID
	}
	v := visit{
		key: d.key, name: s.Name, kind: s.Kind, hop: s.Hop, label: d.label, fp: d.fp, run: run,
		ref:    StepRef{SessionID: s.SessionID, RunID: s.RunID, StepID: s.ID, Sequence: s.Sequence, Kind: s.Kind, Status: s.Status},
		prev:   -1,
		action: d.action, sig: d.sig,
		failed: s.Kind == steptype.KindError || s.Status == steptype.StepFailed || s.Error != nil,
		tokens: s.Metrics.InputTokens + s.Metrics.OutputTokens, cost: s.Metrics.Cost, durMS: s.Metrics.Duration.Milliseconds(),
	}
	if i, ok := b.byID[s.ParentID]; ok && s.ParentID != "" {
		v.prev = i
	} else if i, ok := b.lastOfRun[run]; ok {
		v.prev = i
	}
	idx := len(b.visits)
	b.visits = append(b.visits, v)
	if s.ID != "" {
		b.byID[s.ID] = idx
	}
	b.lastOfRun[run] = idx
}

// Graph computes the graph of the steps added so far: nodes, edges, flags
// and, unless Options.SkipLayout, the layout.
func (b *Builder) Graph() *Graph {
	o := b.opts
	final := b.foldKeys()
	g := &Graph{Steps: len(b.visits), Nodes: []*Node{}, Edges: []*Edge{}}
	nodes := map[string]*Node{}
	runVisits := map[[2]string]int{} // (run, node key) → visits
	sigCount := map[[3]string]int{}  // (run, node key, signature) → count
	nodeRuns := map[string]map[string]bool{}
	nodeSessions := map[string]map[string]bool{}
	runs, sessions := map[string]bool{}, map[string]bool{}
	for i := range b.visits {
		v := &b.visits[i]
		k := final[v.key]
		n := nodes[k]
		if n == nil {
			n = &Node{ID: hash(k)[:12], Name: v.name, Kind: v.kind, Hop: v.hop, Label: v.label, Fingerprint: v.fp, Order: len(g.Nodes), Steps: []StepRef{}}
			if k != v.key {
				n.Label, n.Fingerprint, n.Other = "other states", "", true
			}
			nodes[k] = n
			g.Nodes = append(g.Nodes, n)
			nodeRuns[k], nodeSessions[k] = map[string]bool{}, map[string]bool{}
		}
		n.Visits++
		if len(n.Steps) < o.MaxStepRefs {
			n.Steps = append(n.Steps, v.ref)
		}
		if v.failed {
			n.Errors++
		}
		n.Tokens += v.tokens
		n.Cost += v.cost
		n.DurationMS += v.durMS
		nodeRuns[k][v.run] = true
		nodeSessions[k][v.ref.SessionID] = true
		runs[v.run], sessions[v.ref.SessionID] = true, true
		rv := [2]string{v.run, k}
		runVisits[rv]++
		n.MaxRunVisits = max(n.MaxRunVisits, runVisits[rv])
		sk := [3]string{v.run, k, v.sig}
		sigCount[sk]++
		if sigCount[sk] >= o.RepeatThreshold {
			n.Stuck = true
		}
		if v.prev < 0 || b.visits[v.prev].run != v.run {
			n.Entries++
		}
	}
	for k, n := range nodes {
		n.Runs, n.Sessions = len(nodeRuns[k]), len(nodeSessions[k])
		n.Repeated = n.MaxRunVisits >= o.RepeatThreshold
		if n.Stuck {
			g.StuckNodes++
		}
	}
	g.Runs, g.Sessions = len(runs), len(sessions)
	if g.Steps > 0 && len(final) > 0 {
		// Share of steps that revisit a state: every step but the first
		// visit of each distinct state (counted before folding).
		g.RepeatedStepRatio = float64(g.Steps-len(final)) / float64(g.Steps)
	}
	g.Edges = b.edges(final, nodes)
	for _, e := range g.Edges {
		if e.Loop {
			g.Loops++
		}
	}
	for k, to := range final {
		if k != to {
			g.Merged++
		}
	}
	if !o.SkipLayout {
		layout(g, o)
	}
	return g
}

// edges aggregates the transitions between the final nodes.
func (b *Builder) edges(final map[string]string, nodes map[string]*Node) []*Edge {
	type agg struct {
		edge    *Edge
		actions map[string]int
		order   []string
		perRun  map[string]int
	}
	byPair := map[[2]string]*agg{}
	var list []*agg
	for i := range b.visits {
		v := &b.visits[i]
		if v.prev < 0 {
			continue
		}
		p := &b.visits[v.prev]
		from, to := nodes[final[p.key]], nodes[final[v.key]]
		pair := [2]string{from.ID, to.ID}
		a := byPair[pair]
		if a == nil {
			dir := Forward
			switch {
			case from == to:
				dir = Self
			case to.Order < from.Order:
				dir = Backward
			}
			a = &agg{edge: &Edge{ID: from.ID + "-" + to.ID, From: from.ID, To: to.ID, Direction: dir, Loop: dir != Forward}, actions: map[string]int{}, perRun: map[string]int{}}
			byPair[pair] = a
			list = append(list, a)
			if a.edge.Loop {
				to.Loop = true
			}
		}
		label := p.action
		if label == "" {
			label = "→ " + cmp.Or(v.name, string(v.kind))
		}
		if a.actions[label] == 0 {
			a.order = append(a.order, label)
		}
		a.actions[label]++
		a.edge.Count++
		a.perRun[v.run]++
		a.edge.MaxRunCount = max(a.edge.MaxRunCount, a.perRun[v.run])
	}
	out := make([]*Edge, 0, len(list))
	for _, a := range list {
		for _, l := range a.order {
			a.edge.Actions = append(a.edge.Actions, Action{Label: l, Count: a.actions[l]})
		}
		slices.SortStableFunc(a.edge.Actions, func(x, y Action) int { return y.Count - x.Count })
		out = append(out, a.edge)
	}
	return out
}

// foldKeys maps every node key to itself, or, beyond Options.MaxNodes, the
// least visited keys to one "other states" key per hop and step name.
func (b *Builder) foldKeys() map[string]string {
	visits := map[string]int{}
	first := map[string]int{}
	var keys []string
	group := map[string]string{}
	for i := range b.visits {
		v := &b.visits[i]
		if _, ok := visits[v.key]; !ok {
			keys = append(keys, v.key)
			first[v.key] = i
			group[v.key] = nodeKey(v.hop, v.name, "\x00other")
		}
		visits[v.key]++
	}
	final := make(map[string]string, len(keys))
	for _, k := range keys {
		final[k] = k
	}
	maxN := b.opts.MaxNodes
	if len(keys) <= maxN {
		return final
	}
	ranked := slices.Clone(keys)
	slices.SortStableFunc(ranked, func(x, y string) int {
		if c := visits[y] - visits[x]; c != 0 {
			return c
		}
		return first[x] - first[y]
	})
	keep := maxN
	for range 8 {
		groups := map[string]bool{}
		for _, k := range ranked[keep:] {
			groups[group[k]] = true
		}
		next := max(0, maxN-len(groups))
		if next >= keep {
			break
		}
		keep = next
	}
	for _, k := range ranked[keep:] {
		final[k] = group[k]
	}
	return final
}
