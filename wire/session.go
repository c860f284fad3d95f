package wire

import (
	"encoding/json"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// SessionQuery filters and pages GET /v1/sessions.
type SessionQuery struct {
	Agent  string // only sessions of this agent
	Parent string // only direct forks of this session
	Query  string // substring of id, title or agent
	Cursor string // SessionPage.Next of the previous page
	Limit  int    // page size, 1..1000; 0 means the server default (50)
}

// SessionPage is one page of sessions, the body of GET /v1/sessions.
type SessionPage struct {
	Sessions []*steptype.Session `json:"sessions"`
	Next     string              `json:"next_cursor,omitempty"` // empty on the last page
}

// SessionList is the body of GET /v1/sessions/{id}/forks.
type SessionList struct {
	Sessions []*steptype.Session `json:"sessions"`
}

// CreateSessionRequest is the body of POST /v1/sessions.
type CreateSessionRequest struct {
	Agent    string          `json:"agent,omitempty"`
	Title    string          `json:"title,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// ForkRequest is the body of POST /v1/sessions/{id}/fork.
type ForkRequest struct {
	Sequence int64   `json:"sequence"`
	Edit     *string `json:"edit,omitempty"`
	Title    string  `json:"title,omitempty"`
}

// RetryRequest is the body of POST /v1/sessions/{id}/retry.
type RetryRequest struct {
	Sequence    int64  `json:"sequence"`
	Destructive bool   `json:"destructive,omitempty"`
	Agent       string `json:"agent,omitempty"`
}

// ReplayRequest is the body of POST /v1/sessions/{id}/replay.
type ReplayRequest struct {
	LiveTools    []string `json:"live_tools,omitempty"`
	AllToolsLive bool     `json:"all_tools_live,omitempty"`
	Agent        string   `json:"agent,omitempty"`
}

// StepQuery selects steps of a session by sequence range (GET
// /v1/sessions/{id}/steps).
type StepQuery struct {
	SessionID string
	StartSeq  int64 // inclusive; 0 means from the start
	EndSeq    int64 // inclusive; 0 means to the end
	Limit     int   // 0 means no limit
}

// StepList is the body of the endpoints that list steps, and of POST
// /v1/sessions/{id}/steps (the steps to ingest).
type StepList struct {
	Steps []*steptype.Step `json:"steps"`
}

// IngestRequest is the body of POST /v1/sessions/{id}/steps as the server
// reads it: each step is checked against the step wire format before it
// is decoded.
type IngestRequest struct {
	Steps []json.RawMessage `json:"steps"`
}

// TruncateResult answers DELETE /v1/sessions/{id}/steps.
type TruncateResult struct {
	Deleted int64 `json:"deleted"`
}

// Summary describes a session (GET /v1/sessions/{id}/summary).
type Summary struct {
	SessionID     string                     `json:"session_id"`
	TotalSteps    int64                      `json:"total_steps"`
	ByKind        map[steptype.Kind]int      `json:"by_kind"`
	ByRole        map[steptype.Role]int      `json:"by_role"`
	SequenceRange [2]int64                   `json:"sequence_range"`
	InputTokens   int64                      `json:"input_tokens"`
	OutputTokens  int64                      `json:"output_tokens"`
	CachedTokens  int64                      `json:"cached_tokens"`
	Cost          float64                    `json:"cost"`
	DurationMS    int64                      `json:"duration_ms"`
	Errors        int                        `json:"errors"`
	Runs          map[steptype.RunStatus]int `json:"runs"`
	Forks         int                        `json:"forks"`
	ParentID      string                     `json:"parent_session_id,omitempty"`
	ForkSequence  int64                      `json:"fork_sequence,omitempty"`
}

// ForkTree is a session and its forks, recursively (GET
// /v1/sessions/{id}/tree).
type ForkTree struct {
	Session *steptype.Session `json:"session"`
	Forks   []*ForkTree       `json:"forks,omitempty"`
}

// ForkParams fork a session.
type ForkParams struct {
	SessionID string
	// At is the sequence the fork keeps: steps 1..At are shared with the
	// parent (read through the lineage, not copied).
	At int64
	// Edit, when set, replaces the content of step At in the fork: the
	// fork keeps 1..At-1 and gets a copy of step At with this content (an
	// edited user message, or a rewritten assistant answer).
	Edit  *string
	Title string
}

// RetryParams regenerate a session from a step.
type RetryParams struct {
	SessionID string
	// From is the first step to regenerate. If it is a user step, the
	// agent runs again on that user message; otherwise it runs again from
	// the context before it.
	From int64
	// Destructive deletes steps >= From in place instead of forking;
	// refused while a fork depends on those steps.
	Destructive bool
	// Agent overrides the session's agent.
	Agent string
}

// ReplayParams replay a session with recorded outputs.
type ReplayParams struct {
	SessionID string // the recorded session
	Agent     string // default: the session's agent
	// LiveTools always execute, never reuse (e.g. a tool whose
	// implementation changed); AllToolsLive re-executes every tool.
	LiveTools    []string
	AllToolsLive bool
}

// IngestParams record steps produced by an agent running elsewhere.
type IngestParams struct {
	SessionID string
	Steps     []*steptype.Step
	// Runs are updated in the same transaction as the steps (e.g. an
	// ingested run's status and step count); optional, in process only
	// (the HTTP API takes steps).
	Runs []*store.RunUpdateParams
}
