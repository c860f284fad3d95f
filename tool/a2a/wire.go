package a2a

import (
	"encoding/json"
	"strings"
)

// The A2A data model as this client reads it. It accepts both JSON
// bindings in use: v1.0's (states TASK_STATE_*, roles ROLE_*, a
// StreamResponse wrapping one of task, message, statusUpdate,
// artifactUpdate) and v0.3's (lower-case states and roles, objects
// discriminated by a kind member).

type part struct {
	Kind      string          `json:"kind,omitempty"`
	Text      *string         `json:"text,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	MediaType string          `json:"mediaType,omitempty"`
}

type message struct {
	Kind      string         `json:"kind,omitempty"`
	MessageID string         `json:"messageId"`
	ContextID string         `json:"contextId,omitempty"`
	TaskID    string         `json:"taskId,omitempty"`
	Role      string         `json:"role"`
	Parts     []part         `json:"parts"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

type status struct {
	State   string   `json:"state"`
	Message *message `json:"message,omitempty"`
}

type artifact struct {
	ArtifactID string `json:"artifactId"`
	Name       string `json:"name,omitempty"`
	Parts      []part `json:"parts"`
}

type task struct {
	ID        string     `json:"id"`
	ContextID string     `json:"contextId"`
	Status    status     `json:"status"`
	Artifacts []artifact `json:"artifacts,omitempty"`
	History   []message  `json:"history,omitempty"`
}

type statusUpdate struct {
	TaskID    string `json:"taskId"`
	ContextID string `json:"contextId"`
	Status    status `json:"status"`
}

type artifactUpdate struct {
	TaskID    string   `json:"taskId"`
	ContextID string   `json:"contextId"`
	Artifact  artifact `json:"artifact"`
	Append    bool     `json:"append,omitempty"`
}

// event is one result: a SendMessage answer, a GetTask answer or one
// event of a stream. At most one member is set.
type event struct {
	Task           *task
	Message        *message
	StatusUpdate   *statusUpdate
	ArtifactUpdate *artifactUpdate
}

// parseEvent reads a result in either binding.
func parseEvent(raw json.RawMessage) (*event, error) {
	var probe struct {
		Kind           string          `json:"kind"`
		ID             string          `json:"id"`
		Status         json.RawMessage `json:"status"`
		Task           json.RawMessage `json:"task"`
		Message        json.RawMessage `json:"message"`
		StatusUpdate   json.RawMessage `json:"statusUpdate"`
		ArtifactUpdate json.RawMessage `json:"artifactUpdate"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, err
	}
	ev := &event{}
	var err error
	switch {
	case probe.Kind == "task" || (probe.Kind == "" && probe.ID != "" && len(probe.Status) > 0):
		ev.Task = new(task)
		err = json.Unmarshal(raw, ev.Task)
	case probe.Kind == "message":
		ev.Message = new(message)
		err = json.Unmarshal(raw, ev.Message)
	case probe.Kind == "status-update":
		ev.StatusUpdate = new(statusUpdate)
		err = json.Unmarshal(raw, ev.StatusUpdate)
	case probe.Kind == "artifact-update":
		ev.ArtifactUpdate = new(artifactUpdate)
		err = json.Unmarshal(raw, ev.ArtifactUpdate)
	case len(probe.Task) > 0:
		ev.Task = new(task)
		err = json.Unmarshal(probe.Task, ev.Task)
	case len(probe.Message) > 0:
		ev.Message = new(message)
		err = json.Unmarshal(probe.Message, ev.Message)
	case len(probe.StatusUpdate) > 0:
		ev.StatusUpdate = new(statusUpdate)
		err = json.Unmarshal(probe.StatusUpdate, ev.StatusUpdate)
	case len(probe.ArtifactUpdate) > 0:
		ev.ArtifactUpdate = new(artifactUpdate)
		err = json.Unmarshal(probe.ArtifactUpdate, ev.ArtifactUpdate)
	}
	return ev, err
}

// Task states, normalised to v0.3's spelling.
const (
	stateInputRequired = "input-required"
	stateAuthRequired  = "auth-required"
	stateCompleted     = "completed"
	stateFailed        = "failed"
	stateCanceled      = "canceled"
	stateRejected      = "rejected"
)

// normState maps TASK_STATE_INPUT_REQUIRED and input-required alike to
// input-required.
func normState(s string) string {
	s = strings.ToLower(strings.TrimPrefix(s, "TASK_STATE_"))
	s = strings.ReplaceAll(s, "_", "-")
	if s == "cancelled" {
		s = stateCanceled
	}
	return s
}

// settled reports whether a task in state s waits for nothing but its
// client: a terminal state or a request for input.
func settled(s string) bool {
	switch normState(s) {
	case stateInputRequired, stateAuthRequired, stateCompleted, stateFailed, stateCanceled, stateRejected:
		return true
	}
	return false
}

func isUser(role string) bool { return strings.EqualFold(strings.TrimPrefix(role, "ROLE_"), "user") }

// partsText is the text of parts: text parts as they are, data parts as
// JSON, one per line.
func partsText(parts []part) string {
	var b strings.Builder
	for _, p := range parts {
		var s string
		switch {
		case p.Text != nil:
			s = *p.Text
		case len(p.Data) > 0:
			s = string(p.Data)
		default:
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(s)
	}
	return b.String()
}

// promptOf is the text of an input-required status message, without its
// data parts, and its schema. A Stepwise server describes its pending
// requests in a data part ({"stepwise": {"requests": […]}}) and takes an
// answer for the first: then that request's prompt and schema.
func promptOf(m *message) (string, json.RawMessage) {
	if m == nil {
		return "", nil
	}
	var texts []string
	for _, p := range m.Parts {
		if p.Text != nil {
			texts = append(texts, *p.Text)
			continue
		}
		var d struct {
			Stepwise struct {
				Requests []struct {
					Prompt string          `json:"prompt"`
					Schema json.RawMessage `json:"schema"`
				} `json:"requests"`
			} `json:"stepwise"`
		}
		if json.Unmarshal(p.Data, &d) == nil && len(d.Stepwise.Requests) > 0 && d.Stepwise.Requests[0].Prompt != "" {
			return d.Stepwise.Requests[0].Prompt, d.Stepwise.Requests[0].Schema
		}
	}
	return strings.Join(texts, "\n"), nil
}
