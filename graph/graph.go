// Package graph builds the workflow graph of an agent's step log.
//
// Nodes are states: steps clustered by step name plus a state fingerprint
// (a hash of annotations.state when a step sets it, else of the tool name,
// the decision choice, or the kind). Edges are the actions that moved the
// agent from one state to the next (the tool calls a model asked for, a
// decision's choice, an annotated action, else the next step), labelled
// with how often each was taken. Edges are classified as forward, backward
// (back to a state first seen earlier) or self; states visited again and
// again within one run, and identical actions repeated within one run, are
// flagged — the stuck-agent heuristic.
//
// A graph can be built from one session or merged across many sessions of
// an agent (steps shared through a fork lineage are counted once), and is
// laid out in Go with github.com/nulab/autog into node boxes and edge
// polylines that a client draws as SVG:
//
//	b := graph.NewBuilder(graph.Options{})
//	b.Add(steps) // one session's steps, in sequence order
//	g := b.Graph()
//	for _, n := range g.Nodes {
//		fmt.Println(n.Name, n.Label, n.Visits, n.X, n.Y)
//	}
package graph

import "github.com/stepwise-run/stepwise/steptype"

// Direction classifies an edge by where it leads.
type Direction string

// Edge directions.
const (
	// Forward edges lead to a state first seen after the source state.
	Forward Direction = "forward"
	// Backward edges lead back to a state first seen before the source
	// state: they close a loop.
	Backward Direction = "backward"
	// Self edges stay in the same state.
	Self Direction = "self"
)

// Options tune a graph. Zero values take the defaults.
type Options struct {
	// RepeatThreshold is how many visits of one state within one run flag
	// the state as repeated, and how many identical actions (same tool and
	// arguments, same model output, same choice) within one run flag it as
	// stuck. Default 3; values below 2 are raised to 2.
	RepeatThreshold int
	// MaxStepRefs bounds the step references kept per node (Node.Steps);
	// Node.Visits still counts every step. Default 200.
	MaxStepRefs int
	// MaxNodes bounds the number of nodes: beyond it, the least visited
	// states of each step name are merged into one "other states" node per
	// name so the graph stays readable and its layout fast. Default 80.
	MaxNodes int
	// NodeWidth and NodeHeight are the size of a node box in layout units
	// (CSS pixels). Defaults 200 and 56.
	NodeWidth, NodeHeight float64
	// SkipLayout leaves coordinates at zero (for callers that only want
	// the structure and statistics).
	SkipLayout bool
}

func (o Options) withDefaults() Options {
	if o.RepeatThreshold == 0 {
		o.RepeatThreshold = 3
	}
	o.RepeatThreshold = max(o.RepeatThreshold, 2)
	if o.MaxStepRefs <= 0 {
		o.MaxStepRefs = 200
	}
	if o.MaxNodes <= 0 {
		o.MaxNodes = 80
	}
	if o.NodeWidth <= 0 {
		o.NodeWidth = 200
	}
	if o.NodeHeight <= 0 {
		o.NodeHeight = 56
	}
	return o
}

// Graph is a laid-out workflow graph. It marshals to the JSON served by
// GET /v1/sessions/{id}/graph and GET /v1/agents/{name}/graph.
type Graph struct {
	// Sessions, Runs and Steps count what the graph was built from.
	Sessions int `json:"sessions"`
	Runs     int `json:"runs"`
	Steps    int `json:"steps"`
	// RepeatedStepRatio is the share of steps that revisit a state, in
	// [0, 1]: (steps − distinct states) / steps; 0 when every step reached
	// a new state, towards 1 when the run goes round in circles.
	RepeatedStepRatio float64 `json:"repeated_step_ratio"`
	// Loops counts backward and self edges; StuckNodes counts nodes flagged
	// stuck; Merged counts states folded into "other states" nodes.
	Loops      int `json:"loops"`
	StuckNodes int `json:"stuck_nodes"`
	Merged     int `json:"merged_states,omitempty"`
	// Width and Height bound the layout.
	Width  float64 `json:"width"`
	Height float64 `json:"height"`
	Nodes  []*Node `json:"nodes"`
	Edges  []*Edge `json:"edges"`
}

// Node is a state: the steps with one step name and one state fingerprint.
type Node struct {
	// ID is stable for a given name and fingerprint (safe in URLs and DOM
	// ids).
	ID string `json:"id"`
	// Name is the graph step name ("llm", "tools", a custom step).
	Name string `json:"name"`
	// Kind is the step kind of the node's first step.
	Kind steptype.Kind `json:"kind"`
	// Hop is the nesting depth (0 for the root agent).
	Hop int `json:"hop"`
	// Label describes the state: the annotated state, the tool name, the
	// decision choice, or the kind.
	Label string `json:"label"`
	// Fingerprint is the hash the steps were clustered by.
	Fingerprint string `json:"fingerprint"`
	// Order is the position of the node's first visit (0 = first state).
	Order int `json:"order"`
	// Visits counts the node's steps; Runs and Sessions count where they
	// come from; MaxRunVisits is the most visits within one run; Entries
	// counts runs that start in this state.
	Visits       int `json:"visits"`
	Runs         int `json:"runs"`
	Sessions     int `json:"sessions"`
	MaxRunVisits int `json:"max_run_visits"`
	Entries      int `json:"entries,omitempty"`
	// Errors counts failed steps and error steps.
	Errors int `json:"errors,omitempty"`
	// Tokens, Cost and DurationMS sum the node's steps.
	Tokens     int64   `json:"tokens,omitempty"`
	Cost       float64 `json:"cost,omitempty"`
	DurationMS int64   `json:"duration_ms,omitempty"`
	// Repeated: visited at least Options.RepeatThreshold times in one run.
	Repeated bool `json:"repeated,omitempty"`
	// Stuck: the same action repeated at least Options.RepeatThreshold
	// times in one run (the stuck-agent heuristic).
	Stuck bool `json:"stuck,omitempty"`
	// Loop: the node has a self edge or is the target of a backward edge.
	Loop bool `json:"loop,omitempty"`
	// Other marks a node that merges states beyond Options.MaxNodes.
	Other bool `json:"other,omitempty"`
	// Steps references the node's steps (at most Options.MaxStepRefs, in
	// the order they were added).
	Steps []StepRef `json:"steps"`
	// X, Y (top-left corner), W and H place the node box.
	X float64 `json:"x"`
	Y float64 `json:"y"`
	W float64 `json:"w"`
	H float64 `json:"h"`
}

// StepRef points at one step of a node.
type StepRef struct {
	SessionID string              `json:"session_id"`
	RunID     string              `json:"run_id,omitempty"`
	StepID    string              `json:"step_id"`
	Sequence  int64               `json:"sequence"`
	Kind      steptype.Kind       `json:"kind"`
	Status    steptype.StepStatus `json:"status"`
}

// Edge is a transition between two states, with the actions that took it.
type Edge struct {
	ID   string `json:"id"`
	From string `json:"from"` // node id
	To   string `json:"to"`   // node id
	// Direction is forward, backward or self.
	Direction Direction `json:"direction"`
	// Count is how many times the transition happened; MaxRunCount the most
	// within one run.
	Count       int `json:"count"`
	MaxRunCount int `json:"max_run_count"`
	// Actions are the labelled actions, most frequent first.
	Actions []Action `json:"actions"`
	// Loop: a backward or self edge (it closes a cycle).
	Loop bool `json:"loop,omitempty"`
	// Points is the polyline from the source box to the target box.
	Points [][2]float64 `json:"points"`
}

// Action is one labelled action of an edge.
type Action struct {
	Label string `json:"label"`
	Count int    `json:"count"`
}
