// Package record lets a Go program that is not a Stepwise agent record its
// steps: wrap its model and tools, and every model call and tool call of
// its own agent loop becomes a step of a Stepwise session — on a server
// (a *client.Client) or in process (a *stepwise.Engine) — with the same
// log, dashboard, graph, evals and search as a Stepwise agent:
//
//	rec := record.New(c, "my-agent") // c is a *client.Client or a *stepwise.Engine
//	model, tools = record.Model(model, rec), record.Tools(tools, rec)
//
// See docs/record.md.
package record

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// Destination is where steps go: *client.Client (a Stepwise server) and
// *stepwise.Engine (in process) implement it.
type Destination interface {
	CreateSession(ctx context.Context, agent, title string) (*stepwise.Session, error)
	Ingest(ctx context.Context, p stepwise.IngestParams) ([]*stepwise.Step, error)
}

// Recorder appends the steps of one session. It is safe for concurrent
// use; steps are recorded in the order their calls finish.
type Recorder struct {
	dst   Destination
	agent string

	mu        sync.Mutex
	sessionID string
	err       error
	toolCalls map[string]bool // tool-call ids recorded by a wrapped tool
	seenUser  map[string]bool // user messages recorded, by anchor and offset
	lastStep  string
}

// New returns a recorder that creates its session (named after agent) on
// the first step.
func New(dst Destination, agent string) *Recorder {
	return &Recorder{dst: dst, agent: agent, toolCalls: map[string]bool{}, seenUser: map[string]bool{}}
}

// InSession returns a recorder that appends to an existing session.
func InSession(dst Destination, sessionID string) *Recorder {
	r := New(dst, "")
	r.sessionID = sessionID
	return r
}

// SessionID returns the session's id ("" before the first step).
func (r *Recorder) SessionID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sessionID
}

// Err returns the first recording failure. Recording never fails the
// wrapped calls: the agent loop goes on, and Err says what was lost.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Record appends steps (e.g. a custom step of the program's own) to the
// session, creating it first when needed.
func (r *Recorder) Record(ctx context.Context, steps ...*stepwise.Step) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.record(ctx, steps)
}

func (r *Recorder) record(ctx context.Context, steps []*stepwise.Step) error {
	if len(steps) == 0 {
		return nil
	}
	if r.sessionID == "" {
		s, err := r.dst.CreateSession(ctx, r.agent, r.agent)
		if err != nil {
			return r.fail(err)
		}
		r.sessionID = s.ID
	}
	for _, s := range steps {
		if s.ID == "" {
			s.ID = stepwise.NewID()
		}
		if s.ParentID == "" {
			s.ParentID = r.lastStep
		}
		r.lastStep = s.ID
		if s.Metadata == nil {
			s.Metadata = map[string]any{}
		}
		s.Metadata["recorded_by"] = "stepwise/record"
	}
	if _, err := r.dst.Ingest(context.WithoutCancel(ctx), stepwise.IngestParams{SessionID: r.sessionID, Steps: steps}); err != nil {
		return r.fail(err)
	}
	return nil
}

func (r *Recorder) fail(err error) error {
	err = errors.Join(errors.New("stepwise: record"), err)
	if r.err == nil {
		r.err = err
	}
	return err
}

// newMessages returns the user steps of a request that are not recorded
// yet: the user messages after its last assistant message. Tool messages
// are recorded by wrapped tools; a tool result the program made without a
// wrapped tool is recorded here.
func (r *Recorder) newMessages(req *llm.Request, at time.Time) []*stepwise.Step {
	last := -1
	for i, m := range req.Messages {
		if m.Role == steptype.RoleAssistant {
			last = i
		}
	}
	anchor := "start"
	if last >= 0 {
		anchor = assistantKey(req.Messages[last])
	}
	var out []*stepwise.Step
	for off, m := range req.Messages[last+1:] {
		key := anchor + "/" + itoa(off)
		switch {
		case m.Role == steptype.RoleUser && !r.seenUser[key]:
			r.seenUser[key] = true
			st := &stepwise.Step{Kind: steptype.KindUser, Name: "user", Role: steptype.RoleUser, Content: m.Content}
			st.Metrics.StartedAt, st.Metrics.FinishedAt = at, at
			out = append(out, st)
		case m.Role == steptype.RoleTool && m.ToolCallID != "" && !r.toolCalls[m.ToolCallID]:
			r.toolCalls[m.ToolCallID] = true
			st := &stepwise.Step{Kind: steptype.KindTool, Name: "tools", Role: steptype.RoleTool, Content: m.Content,
				ToolCallID: m.ToolCallID, ToolName: m.ToolName}
			st.Metrics.StartedAt, st.Metrics.FinishedAt = at, at
			out = append(out, st)
		}
	}
	return out
}

func assistantKey(m llm.Message) string {
	if len(m.ToolCalls) > 0 {
		k := "calls"
		for _, c := range m.ToolCalls {
			k += ":" + c.ID
		}
		return k
	}
	return "text:" + m.Content
}

func itoa(n int) string {
	const digits = "0123456789"
	if n < 10 {
		return digits[n : n+1]
	}
	return itoa(n/10) + digits[n%10:n%10+1]
}
