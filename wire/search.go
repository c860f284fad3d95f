package wire

import (
	"time"

	"github.com/stepwise-run/stepwise/steptype"
)

// SearchQuery is a search over past steps (GET /v1/search, and the
// arguments of the past_steps_search tool). Texts and K are required; the
// filters combine with AND and empty ones match everything.
type SearchQuery struct {
	// Texts are the query texts. Each is embedded and searched; a step
	// found by several keeps its best score.
	Texts []string `json:"queries"`
	// K is how many steps to return at most, 1..store.MaxVectorK.
	K int `json:"k"`
	// MaxDistance drops steps whose cosine distance (1 − score) to every
	// query exceeds it, in (0, 2]; 0 means no limit.
	MaxDistance float64 `json:"max_distance,omitempty"`
	// Agent keeps steps of sessions of this agent.
	Agent string `json:"agent,omitempty"`
	// SessionIDs keeps steps stored in these sessions (a fork's inherited
	// steps are stored in its parent).
	SessionIDs []string `json:"session_ids,omitempty"`
	// ExcludeRunIDs drops steps of these runs.
	ExcludeRunIDs []string `json:"exclude_run_ids,omitempty"`
	// Kinds keeps steps of these kinds.
	Kinds []steptype.Kind `json:"kinds,omitempty"`
	// After and Before keep steps committed in [After, Before).
	After  time.Time `json:"after,omitzero"`
	Before time.Time `json:"before,omitzero"`
}

// SearchHit is a step found by a search.
type SearchHit struct {
	Step *steptype.Step `json:"step"`
	// Score is the cosine similarity to the closest query, in [-1, 1].
	Score float64 `json:"score"`
	// Distance is 1 − Score.
	Distance float64 `json:"distance"`
	// Query is the index in SearchQuery.Texts of the closest query.
	Query int `json:"query"`
}

// SearchResult is the body of GET /v1/search: the queries and the steps
// found, best first.
type SearchResult struct {
	Queries  []string     `json:"queries"`
	Embedder string       `json:"embedder"`
	Steps    []*SearchHit `json:"steps"`
}
