package wire

import "github.com/stepwise-run/stepwise/steptype"

// SessionRow is a session with what the dashboard's sessions list shows at
// a glance.
type SessionRow struct {
	*steptype.Session
	// Status is the status of the session's latest top-level run, or
	// "idle" when it has none.
	Status string `json:"status"`
	// RunID is that run's id.
	RunID string `json:"run_id,omitempty"`
	// Runs counts the session's top-level runs (turns).
	Runs int `json:"runs"`
	// DurationMS is the time from creation to the last activity.
	DurationMS int64 `json:"duration_ms"`
}

// SessionRowPage is the body of GET /v1/dashboard/sessions.
type SessionRowPage struct {
	Sessions   []*SessionRow `json:"sessions"`
	NextCursor string        `json:"next_cursor,omitempty"`
}

// RunList is the body of GET /v1/sessions/{id}/runs.
type RunList struct {
	Runs []*steptype.Run `json:"runs"`
}

// StepHit is one step found by the dashboard's step search, with its
// session.
type StepHit struct {
	SessionID    string         `json:"session_id"`
	SessionTitle string         `json:"session_title,omitempty"`
	Agent        string         `json:"agent,omitempty"`
	Step         *steptype.Step `json:"step"`
}

// StepHitPage is the body of GET /v1/dashboard/steps.
type StepHitPage struct {
	Steps []*StepHit `json:"steps"`
	// Total counts the matches among the steps scanned.
	Total int `json:"total"`
	// ScannedSessions and ScannedSteps say how much was searched;
	// Truncated is set when the bounds stopped the scan before the oldest
	// session.
	ScannedSessions int  `json:"scanned_sessions"`
	ScannedSteps    int  `json:"scanned_steps"`
	Truncated       bool `json:"truncated,omitempty"`
}

// AgentOverview is the body of GET /v1/agents/{name}/overview.
type AgentOverview struct {
	Agent      string `json:"agent"`
	Registered bool   `json:"registered"`
	// Sessions counts the sessions the step statistics cover; Truncated
	// says older sessions were left out (raise ?sessions=), or older steps
	// (the newest 20,000 steps are read at most).
	Sessions  int  `json:"sessions"`
	Truncated bool `json:"truncated,omitempty"`
	// Runs counts every run of the agent by status (not only the sessions
	// covered); FailedRunRate is failed / finished.
	Runs          map[steptype.RunStatus]int `json:"runs"`
	RunsTotal     int                        `json:"runs_total"`
	FailedRunRate float64                    `json:"failed_run_rate"`
	// Steps, tokens and cost of the sessions covered.
	Steps        int     `json:"steps"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CachedTokens int64   `json:"cached_tokens"`
	Cost         float64 `json:"cost"`
	// ErrorSteps counts error steps and failed steps; ErrorRate is their
	// share of Steps.
	ErrorSteps int     `json:"error_steps"`
	ErrorRate  float64 `json:"error_rate"`
	// RepeatedStepRatio is the share of steps that revisit a state of the
	// workflow graph, in [0, 1]; Loops and StuckNodes come from the same
	// graph.
	RepeatedStepRatio float64 `json:"repeated_step_ratio"`
	GraphNodes        int     `json:"graph_nodes"`
	Loops             int     `json:"loops"`
	StuckNodes        int     `json:"stuck_nodes"`
	// Latency per step kind, in milliseconds (steps still waiting excluded).
	Latency []KindLatency `json:"latency"`
	// Resources is what the steps of each kind cost the machine (the
	// steps that recorded it; see steptype.Metrics.CPUTime).
	Resources []KindResources `json:"resources"`
}

// KindResources sums the resource use of the steps of one kind.
type KindResources struct {
	Kind         steptype.Kind `json:"kind"`
	Steps        int           `json:"steps"`
	CPUMS        float64       `json:"cpu_ms"`      // CPU time, in all
	MeanCPUMS    float64       `json:"mean_cpu_ms"` // per step
	AllocBytes   int64         `json:"alloc_bytes"`
	AllocObjects int64         `json:"alloc_objects"`
	// Overlapped counts the steps that ran beside others (their figures
	// are shared upper bounds).
	Overlapped int `json:"overlapped"`
}

// KindLatency summarizes the durations of the steps of one kind.
type KindLatency struct {
	Kind   steptype.Kind `json:"kind"`
	Count  int           `json:"count"`
	MeanMS float64       `json:"mean_ms"`
	P50MS  float64       `json:"p50_ms"`
	P90MS  float64       `json:"p90_ms"`
	P99MS  float64       `json:"p99_ms"`
	MaxMS  float64       `json:"max_ms"`
}
