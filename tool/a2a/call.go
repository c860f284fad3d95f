package a2a

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// messageID is the id of message n of the call with key: 0 the input, n
// the n-th answer.
func messageID(key string, n int) string {
	sum := sha256.Sum256([]byte("stepwise-a2a\x00" + key + "\x00" + strconv.Itoa(n)))
	return "sw-" + hex.EncodeToString(sum[:16])
}

// callRun is one call in progress.
type callRun struct {
	a      *Agent
	key    string
	taskID string // once known
}

func (r *callRun) userMessage(n int, parts []part, t *task) *message {
	m := &message{MessageID: r.messageIDOf(n), Role: "ROLE_USER", Parts: parts}
	if t != nil {
		m.TaskID, m.ContextID = t.ID, t.ContextID
	}
	if r.a.c.legacy {
		m.Role, m.Kind = "user", "message"
		for i := range m.Parts {
			if m.Parts[i].Text != nil {
				m.Parts[i].Kind = "text"
			} else {
				m.Parts[i].Kind = "data"
			}
		}
	}
	return m
}

func (r *callRun) messageIDOf(n int) string { return messageID(r.key, n) }

func textPart(s string) part { return part{Text: &s} }

// answerParts is an answer as message parts: a JSON string as text, any
// other value as a data part.
func answerParts(answer json.RawMessage) []part {
	var s string
	if json.Unmarshal(answer, &s) == nil {
		return []part{textPart(s)}
	}
	return []part{{Data: answer, MediaType: "application/json"}}
}

// run sends the input (again, after a crash: the same message) and the
// answers not yet delivered, and follows the task until it settles.
func (r *callRun) run(ctx context.Context, input string, answers []json.RawMessage) (*task, error) {
	first := r.userMessage(0, []part{textPart(input)}, nil)
	if len(answers) == 0 {
		return r.sendFollow(ctx, first)
	}
	// The task asked for input before: read it as it is now (by its id
	// when this process saw it ask, else by sending the input message
	// again without waiting), then send what it lacks.
	var ev *event
	var err error
	if r.taskID != "" {
		ev, err = r.a.c.call(ctx, "GetTask", map[string]any{"id": r.taskID}, true)
	} else {
		ev, err = r.a.c.call(ctx, "SendMessage", r.sendParams(first, false), true)
	}
	if err != nil {
		return nil, err
	}
	t, err := r.taskOf(ev)
	if err != nil || t.ID == "" {
		return t, err
	}
	for i := r.delivered(t, len(answers)); i < len(answers); i++ {
		if normState(t.Status.State) != stateInputRequired {
			break
		}
		if t, err = r.sendFollow(ctx, r.userMessage(i+1, answerParts(answers[i]), t)); err != nil {
			return nil, err
		}
	}
	if !settled(t.Status.State) {
		return r.poll(ctx, t)
	}
	return t, nil
}

// delivered is how many of the answers the task has received: its user
// messages after the first (a server that keeps no history: all but the
// last when it asks for input, else all).
func (r *callRun) delivered(t *task, answers int) int {
	if len(t.History) == 0 {
		if normState(t.Status.State) == stateInputRequired {
			return answers - 1
		}
		return answers
	}
	n := -1
	for _, m := range t.History {
		if isUser(m.Role) {
			n++
		}
	}
	return min(max(n, 0), answers)
}

func (r *callRun) sendParams(m *message, wait bool) map[string]any {
	p := map[string]any{"message": m}
	if !wait {
		if r.a.c.legacy {
			p["configuration"] = map[string]any{"blocking": false}
		} else {
			p["configuration"] = map[string]any{"returnImmediately": true}
		}
	}
	return p
}

// taskOf is the task of a send's result; a message answered with a
// message (no task) is a completed task without an id.
func (r *callRun) taskOf(ev *event) (*task, error) {
	switch {
	case ev.Task != nil:
		r.taskID = ev.Task.ID
		return ev.Task, nil
	case ev.Message != nil:
		return &task{Status: status{State: stateCompleted}, Artifacts: []artifact{{Parts: ev.Message.Parts}}}, nil
	}
	return nil, &Error{Agent: r.a.def.Name, Method: r.a.c.method("SendMessage"), Message: "the result is neither a task nor a message"}
}

// sendFollow sends a message and follows its task until it settles: as a
// stream when the card says the agent streams, else by a blocking send
// and GetTask.
func (r *callRun) sendFollow(ctx context.Context, m *message) (*task, error) {
	answering := m.TaskID != ""
	if !r.a.stream {
		// A new task is sent without waiting, so that its id is known at
		// once (to cancel it); an answer waits, since a task answered
		// without waiting may still show the question.
		ev, err := r.a.c.call(ctx, "SendMessage", r.sendParams(m, answering), false)
		if err != nil {
			return nil, err
		}
		t, err := r.taskOf(ev)
		if err != nil || t.ID == "" || settled(t.Status.State) {
			return t, err
		}
		return r.poll(ctx, t)
	}
	// The stream outlives a cancellation of ctx until it has named the
	// task (at most the request timeout), so that the task can be
	// cancelled too.
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	named := make(chan struct{})
	var once sync.Once
	go func() {
		select {
		case <-ctx.Done():
			t := time.NewTimer(r.a.cfg.Timeout)
			defer t.Stop()
			select {
			case <-named:
			case <-t.C:
			case <-sctx.Done():
			}
			stop()
		case <-sctx.Done():
		}
	}()
	var t *task
	var failed error
	// The task a stream starts with, answering a task that asked, may
	// still show the question: it is working on the answer, and only an
	// update (or, if the stream ends first, GetTask) settles it.
	err := r.a.c.stream(sctx, "SendStreamingMessage", r.sendParams(m, true), func(ev *event) bool {
		switch {
		case ev.Task != nil:
			t = ev.Task
			r.taskID = t.ID
			once.Do(func() { close(named) })
			if answering && normState(t.Status.State) == stateInputRequired {
				t.Status = status{State: "working"}
			}
		case ev.Message != nil:
			if t == nil {
				t, failed = r.taskOf(ev)
				return false
			}
		case t == nil:
			failed = &Error{Agent: r.a.def.Name, Method: r.a.c.method("SendStreamingMessage"), Message: "the stream did not start with the task"}
			return false
		case ev.StatusUpdate != nil:
			t.Status = ev.StatusUpdate.Status
		case ev.ArtifactUpdate != nil:
			t.Artifacts = mergeArtifact(t.Artifacts, ev.ArtifactUpdate)
		}
		return t == nil || !settled(t.Status.State)
	})
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err == nil {
		err = failed
	}
	if errors.Is(err, errStreamIdle) {
		if t != nil && t.ID != "" {
			return r.poll(ctx, t)
		}
		err = &Error{Agent: r.a.def.Name, Method: r.a.c.method("SendStreamingMessage"), Message: fmt.Sprintf("no event within %v", r.a.cfg.StreamIdle), Transient: true, Err: err}
	}
	if err != nil {
		return nil, err
	}
	if t == nil {
		return nil, &Error{Agent: r.a.def.Name, Method: r.a.c.method("SendStreamingMessage"), Message: "the stream ended without a task", Transient: true}
	}
	if t.ID != "" && (!settled(t.Status.State) || (normState(t.Status.State) == stateCompleted && len(t.Artifacts) == 0)) {
		// The stream ended early, or the artifacts were not streamed:
		// read the task.
		return r.poll(ctx, t)
	}
	return t, nil
}

func mergeArtifact(arts []artifact, u *artifactUpdate) []artifact {
	for i := range arts {
		if arts[i].ArtifactID == u.Artifact.ArtifactID && u.Artifact.ArtifactID != "" {
			if u.Append {
				arts[i].Parts = append(arts[i].Parts, u.Artifact.Parts...)
			} else {
				arts[i] = u.Artifact
			}
			return arts
		}
	}
	return append(arts, u.Artifact)
}

// poll reads the task with GetTask until it settles.
func (r *callRun) poll(ctx context.Context, t *task) (*task, error) {
	tick := time.NewTicker(r.a.cfg.PollInterval)
	defer tick.Stop()
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-tick.C:
			}
		}
		ev, err := r.a.c.call(ctx, "GetTask", map[string]any{"id": t.ID}, true)
		if err != nil {
			return nil, err
		}
		if ev.Task == nil {
			return nil, &Error{Agent: r.a.def.Name, Method: r.a.c.method("GetTask"), Message: "the result is not a task"}
		}
		if settled(ev.Task.Status.State) {
			return ev.Task, nil
		}
	}
}
