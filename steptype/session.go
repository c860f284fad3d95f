package steptype

import (
	"encoding/json"
	"time"
)

// Session is an ordered, gap-free log of steps. A fork reads its first
// ForkSequence steps through its parent and stores only its own.
type Session struct {
	ID              string `json:"id"`
	Agent           string `json:"agent,omitempty"`
	Title           string `json:"title,omitempty"`
	ParentSessionID string `json:"parent_session_id,omitempty"`
	ForkSequence    int64  `json:"fork_sequence,omitempty"`
	LastSequence    int64  `json:"last_sequence"` // highest sequence visible in this session
	// Totals over the session's own steps, maintained by the store on append.
	InputTokens  int64           `json:"input_tokens"`
	OutputTokens int64           `json:"output_tokens"`
	Cost         float64         `json:"cost"`
	Metadata     json.RawMessage `json:"metadata,omitempty"`
	CreatedAt    time.Time       `json:"created_at"`
	UpdatedAt    time.Time       `json:"updated_at"`
}

// Run is one invocation of an agent in a session.
type Run struct {
	ID           string          `json:"id"`
	SessionID    string          `json:"session_id"`
	Agent        string          `json:"agent"`
	ParentRunID  string          `json:"parent_run_id,omitempty"`
	ParentStepID string          `json:"parent_step_id,omitempty"`
	Hop          int             `json:"hop"`
	Status       RunStatus       `json:"status"`
	Cursor       string          `json:"cursor"` // name of the next step to execute
	State        json.RawMessage `json:"state,omitempty"`
	Input        string          `json:"input,omitempty"`
	Output       string          `json:"output,omitempty"`
	Error        *StepError      `json:"error,omitempty"`
	StepCount    int64           `json:"step_count"`
	Options      json.RawMessage `json:"options,omitempty"` // engine-owned per-run options (replay source, limits)
	LeaseOwner   string          `json:"lease_owner,omitempty"`
	LeaseExpires time.Time       `json:"lease_expires,omitzero"`
	CreatedAt    time.Time       `json:"created_at"`
	UpdatedAt    time.Time       `json:"updated_at"`
	FinishedAt   time.Time       `json:"finished_at,omitzero"`
}
