package steptype

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// WireVersion is the version of the step JSON format written by MarshalJSON.
const WireVersion = 1

// stepWire is the explicit JSON shape of a step, version 1. Field names and
// units are a contract (docs/step_format.md); never change one in place, add
// a field or bump WireVersion.
type stepWire struct {
	V           int             `json:"v"`
	ID          string          `json:"id"`
	SessionID   string          `json:"session_id"`
	RunID       string          `json:"run_id"`
	Sequence    int64           `json:"sequence"`
	ParentID    string          `json:"parent_id,omitempty"`
	Hop         int             `json:"hop"`
	Kind        Kind            `json:"kind"`
	Name        string          `json:"name,omitempty"`
	Status      StepStatus      `json:"status"`
	Role        Role            `json:"role,omitempty"`
	Content     string          `json:"content,omitempty"`
	Reasoning   string          `json:"reasoning,omitempty"`
	ToolCalls   []ToolCall      `json:"tool_calls,omitempty"`
	ToolCallID  string          `json:"tool_call_id,omitempty"`
	ToolName    string          `json:"tool_name,omitempty"`
	Inputs      json.RawMessage `json:"inputs,omitempty"`
	Outputs     json.RawMessage `json:"outputs,omitempty"`
	StatePatch  json.RawMessage `json:"state_patch,omitempty"`
	Error       *StepError      `json:"error,omitempty"`
	Metrics     *metricsWire    `json:"metrics,omitempty"`
	Annotations *Annotations    `json:"annotations,omitempty"`
	Vector      []float32       `json:"vector,omitempty"`
	Embedder    string          `json:"embedder,omitempty"`
	Replay      string          `json:"replay,omitempty"`
	Fingerprint string          `json:"fingerprint,omitempty"`
	Progress    *Progress       `json:"progress,omitempty"`
	Metadata    map[string]any  `json:"metadata,omitempty"`
	CreatedAt   time.Time       `json:"created_at"`
}

// metricsWire carries durations as integer microseconds and times as RFC 3339.
type metricsWire struct {
	StartedAt           *time.Time `json:"started_at,omitempty"`
	FinishedAt          *time.Time `json:"finished_at,omitempty"`
	DurationUS          int64      `json:"duration_us,omitempty"`
	FirstTokenLatencyUS int64      `json:"first_token_latency_us,omitempty"`
	InputTokens         int64      `json:"input_tokens,omitempty"`
	OutputTokens        int64      `json:"output_tokens,omitempty"`
	CachedTokens        int64      `json:"cached_tokens,omitempty"`
	ReasoningTokens     int64      `json:"reasoning_tokens,omitempty"`
	Cost                float64    `json:"cost,omitempty"`
	Model               string     `json:"model,omitempty"`
	Provider            string     `json:"provider,omitempty"`
	Attempt             int        `json:"attempt,omitempty"`
	CPUTimeNS           int64      `json:"cpu_time_ns,omitempty"`
	AllocBytes          int64      `json:"alloc_bytes,omitempty"`
	AllocObjects        int64      `json:"alloc_objects,omitempty"`
	OverlappingSteps    int        `json:"overlapping_steps,omitempty"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func (m Metrics) wire() *metricsWire {
	if m == (Metrics{}) {
		return nil
	}
	return &metricsWire{
		StartedAt:           timePtr(m.StartedAt),
		FinishedAt:          timePtr(m.FinishedAt),
		DurationUS:          m.Duration.Microseconds(),
		FirstTokenLatencyUS: m.FirstTokenLatency.Microseconds(),
		InputTokens:         m.InputTokens,
		OutputTokens:        m.OutputTokens,
		CachedTokens:        m.CachedTokens,
		ReasoningTokens:     m.ReasoningTokens,
		Cost:                m.Cost,
		Model:               m.Model,
		Provider:            m.Provider,
		Attempt:             m.Attempt,
		CPUTimeNS:           m.CPUTime.Nanoseconds(),
		AllocBytes:          m.AllocBytes,
		AllocObjects:        m.AllocObjects,
		OverlappingSteps:    m.OverlappingSteps,
	}
}

func (w *metricsWire) metrics() Metrics {
	if w == nil {
		return Metrics{}
	}
	m := Metrics{
		Duration:          time.Duration(w.DurationUS) * time.Microsecond,
		FirstTokenLatency: time.Duration(w.FirstTokenLatencyUS) * time.Microsecond,
		InputTokens:       w.InputTokens,
		OutputTokens:      w.OutputTokens,
		CachedTokens:      w.CachedTokens,
		ReasoningTokens:   w.ReasoningTokens,
		Cost:              w.Cost,
		Model:             w.Model,
		Provider:          w.Provider,
		Attempt:           w.Attempt,
		CPUTime:           time.Duration(w.CPUTimeNS),
		AllocBytes:        w.AllocBytes,
		AllocObjects:      w.AllocObjects,
		OverlappingSteps:  w.OverlappingSteps,
	}
	if w.StartedAt != nil {
		m.StartedAt = *w.StartedAt
	}
	if w.FinishedAt != nil {
		m.FinishedAt = *w.FinishedAt
	}
	return m
}

// MarshalJSON writes the version-1 wire format: what encoding/json writes
// for the stepWire shape, written without reflection (appendWire); a step
// it cannot encode goes through encoding/json, for the same error.
func (s Step) MarshalJSON() ([]byte, error) {
	var v bool
	if b, ok := s.appendWire(make([]byte, 0, s.wireSizeHint()), &v); ok {
		return b, nil
	}
	return json.Marshal(s.toWire())
}

// AppendJSON appends what MarshalJSON returns to b, without the copy of
// the encoding MarshalJSON allocates (for encoders that write many steps
// into one reused buffer, such as the server's event streams).
func (s *Step) AppendJSON(b []byte) ([]byte, error) {
	out, _, err := s.AppendJSONVerbatim(b)
	return out, err
}

// AppendJSONVerbatim is AppendJSON that also reports whether the JSON
// holds s verbatim: every string and every key of its metadata valid
// UTF-8, every raw JSON value (tool call arguments, inputs, outputs, state
// patch) already compact and free of what encoding/json escapes, so
// written as it is, its metadata of the types JSON decodes to, and no
// annotations nor any empty slice, map or raw value that is not nil: what
// decoding the JSON gives back is s, normalized as decoding normalizes
// (its times in UTC), so a store may return s instead of decoding what it
// just encoded. False says nothing: the store decodes. The check is made
// while the text is written, in the same pass.
func (s *Step) AppendJSONVerbatim(b []byte) (_ []byte, verbatim bool, err error) {
	verbatim = true
	if out, ok := s.appendWire(b, &verbatim); ok {
		return out, verbatim, nil
	}
	buf := bytes.NewBuffer(b)
	if err := json.NewEncoder(buf).Encode(s.toWire()); err != nil {
		return b, false, err
	}
	out := buf.Bytes()
	return out[:len(out)-1], false, nil // Encode ends with a newline
}

// wireSizeHint is a capacity for the wire form of s: its variable-length
// parts and room for the fixed ones.
func (s *Step) wireSizeHint() int {
	n := 320 + len(s.ID) + len(s.SessionID) + len(s.RunID) + len(s.ParentID) + len(s.Name) + len(s.Content) + len(s.Reasoning) +
		len(s.ToolCallID) + len(s.ToolName) + len(s.Inputs) + len(s.Outputs) + len(s.StatePatch) + len(s.Fingerprint) + len(s.Replay) +
		len(s.Metrics.Model) + len(s.Metrics.Provider) + 12*len(s.Vector)
	for _, c := range s.ToolCalls {
		n += 32 + len(c.ID) + len(c.Name) + len(c.Arguments)
	}
	return n
}

func (s *Step) toWire() stepWire {
	w := stepWire{
		V: WireVersion, ID: s.ID, SessionID: s.SessionID, RunID: s.RunID, Sequence: s.Sequence,
		ParentID: s.ParentID, Hop: s.Hop, Kind: s.Kind, Name: s.Name, Status: s.Status,
		Role: s.Role, Content: s.Content, Reasoning: s.Reasoning, ToolCalls: s.ToolCalls,
		ToolCallID: s.ToolCallID, ToolName: s.ToolName,
		Inputs: s.Inputs, Outputs: s.Outputs, StatePatch: s.StatePatch, Error: s.Error,
		Metrics: s.Metrics.wire(), Vector: s.Vector, Embedder: s.Embedder,
		Replay: s.Replay, Fingerprint: s.Fingerprint, Progress: s.Progress, Metadata: s.Metadata, CreatedAt: s.CreatedAt,
	}
	if !s.Annotations.IsZero() {
		a := s.Annotations
		w.Annotations = &a
	}
	return w
}

// UnmarshalJSON reads the wire format. A missing "v" is read as version 1; a
// newer version is refused rather than half-read.
func (s *Step) UnmarshalJSON(b []byte) error {
	var w stepWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	if w.V > WireVersion {
		return fmt.Errorf("stepwise: step wire version %d is newer than supported version %d", w.V, WireVersion)
	}
	*s = Step{
		ID: w.ID, SessionID: w.SessionID, RunID: w.RunID, Sequence: w.Sequence,
		ParentID: w.ParentID, Hop: w.Hop, Kind: w.Kind, Name: w.Name, Status: w.Status,
		Role: w.Role, Content: w.Content, Reasoning: w.Reasoning, ToolCalls: w.ToolCalls,
		ToolCallID: w.ToolCallID, ToolName: w.ToolName,
		Inputs: w.Inputs, Outputs: w.Outputs, StatePatch: w.StatePatch, Error: w.Error,
		Metrics: w.Metrics.metrics(), Vector: w.Vector, Embedder: w.Embedder,
		Replay: w.Replay, Fingerprint: w.Fingerprint, Progress: w.Progress, Metadata: w.Metadata, CreatedAt: w.CreatedAt,
	}
	if w.Annotations != nil {
		s.Annotations = *w.Annotations
	}
	return nil
}
