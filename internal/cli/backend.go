package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"

	"github.com/spf13/cobra"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/client"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/observe"
	"github.com/stepwise-run/stepwise/store"
)

// backend is what the commands need, served either in-process over a
// database (--db) or by a remote server (--server).
type backend interface {
	Sessions(ctx context.Context, q client.SessionQuery) (*client.SessionPage, error)
	Steps(ctx context.Context, sessionID string, from, to int64) ([]*stepwise.Step, error)
	Run(ctx context.Context, runID string) (*stepwise.Run, error)
	StartRun(ctx context.Context, p stepwise.StartParams) (*stepwise.Run, error)
	// Follow yields a run's events until it finishes or waits for input;
	// in-process it executes the run, remotely the server does.
	Follow(ctx context.Context, runID string) iter.Seq2[*stepwise.Event, error]
	Pending(ctx context.Context, runID string) ([]*stepwise.PendingInput, error)
	Answer(ctx context.Context, runID, requestID string, answer json.RawMessage) (*stepwise.Step, error)
	Cancel(ctx context.Context, runID, reason string) (*stepwise.Run, error)
	Fork(ctx context.Context, p stepwise.ForkParams) (*stepwise.Session, error)
	Tree(ctx context.Context, sessionID string) (*stepwise.ForkTree, error)
	Summary(ctx context.Context, sessionID string) (*stepwise.Summary, error)
	Context(ctx context.Context, sessionID, agent string) (*llm.Request, error)
	Retry(ctx context.Context, p stepwise.RetryParams) (*stepwise.Run, error)
	Replay(ctx context.Context, p stepwise.ReplayParams) (*stepwise.Run, error)
	// AgentName resolves an --agent value (a file is loaded locally only).
	AgentName(arg string) string
	Close() error
}

// backend opens the remote server when --server is set, else the database
// with the built-in agents and the agent file in agentArg.
func (e *env) backend(ctx context.Context, agentArg string) (backend, error) {
	if e.server != "" {
		if looksLikeFile(agentArg) {
			return nil, usagef("--agent %s: agent files are loaded by the server (stepwise serve --agents DIR); pass the agent's name", agentArg)
		}
		c, err := client.New(e.server, client.WithToken(e.token))
		if err != nil {
			return nil, err
		}
		return remote{c}, nil
	}
	rt, err := e.open(ctx, agentArg)
	if err != nil {
		return nil, err
	}
	if looksLikeFile(agentArg) {
		e.agentHint = " --agent " + shellWord(agentArg)
	}
	return local{rt}, nil
}

// local serves the commands in-process.
type local struct{ *runtime }

func (l local) Sessions(ctx context.Context, q client.SessionQuery) (*client.SessionPage, error) {
	p, err := l.st.SessionList(ctx, &store.SessionListParams{Agent: q.Agent, ParentID: q.Parent, Query: q.Query, Cursor: q.Cursor, Limit: q.Limit})
	if err != nil {
		return nil, err
	}
	return &client.SessionPage{Sessions: p.Sessions, Next: p.Next}, nil
}

func (l local) Steps(ctx context.Context, sessionID string, from, to int64) ([]*stepwise.Step, error) {
	if _, err := l.st.SessionGet(ctx, &store.SessionGetParams{ID: sessionID}); err != nil {
		return nil, err
	}
	steps, err := l.st.StepList(ctx, &store.StepListParams{SessionID: sessionID, StartSeq: from, EndSeq: to})
	if err != nil {
		return nil, err
	}
	return steps, observe.OverlayAnnotations(ctx, l.st, steps)
}

func (l local) Run(ctx context.Context, runID string) (*stepwise.Run, error) {
	return l.st.RunGet(ctx, &store.RunGetParams{ID: runID})
}

func (l local) StartRun(ctx context.Context, p stepwise.StartParams) (*stepwise.Run, error) {
	return l.eng.StartRun(ctx, p)
}

func (l local) Follow(ctx context.Context, runID string) iter.Seq2[*stepwise.Event, error] {
	return func(yield func(*stepwise.Event, error) bool) {
		for ev, err := range l.eng.Execute(ctx, runID) {
			if errors.Is(err, stepwise.ErrRunFinished) {
				return // report the final status, as for a run that just ended
			}
			if !yield(ev, err) {
				return
			}
		}
	}
}

func (l local) Pending(ctx context.Context, runID string) ([]*stepwise.PendingInput, error) {
	return l.eng.Pending(ctx, runID)
}

func (l local) Answer(ctx context.Context, runID, requestID string, answer json.RawMessage) (*stepwise.Step, error) {
	return l.eng.Answer(ctx, stepwise.AnswerParams{RunID: runID, RequestID: requestID, Answer: answer})
}

func (l local) Cancel(ctx context.Context, runID, reason string) (*stepwise.Run, error) {
	return l.eng.Cancel(ctx, runID, reason)
}

func (l local) Fork(ctx context.Context, p stepwise.ForkParams) (*stepwise.Session, error) {
	return l.eng.Fork(ctx, p)
}

func (l local) Tree(ctx context.Context, id string) (*stepwise.ForkTree, error) {
	return l.eng.Tree(ctx, id)
}

func (l local) Summary(ctx context.Context, id string) (*stepwise.Summary, error) {
	return l.eng.Summarize(ctx, id)
}

// Context rebuilds the next request as GET /v1/sessions/{id}/context does:
// the request before the step after the last, so that a session of an agent
// this engine does not run gets its messages (without system prompt and
// tools) instead of an error.
func (l local) Context(ctx context.Context, id, agent string) (*llm.Request, error) {
	sess, err := l.st.SessionGet(ctx, &store.SessionGetParams{ID: id})
	if err != nil {
		return nil, fmt.Errorf("session %q: %w", id, err)
	}
	if agent == "" && sess.Agent == "" {
		return nil, usagef("session %s has no agent; name one with --agent", id)
	}
	return l.eng.ContextPreviewAt(ctx, id, agent, sess.LastSequence+1)
}

func (l local) Retry(ctx context.Context, p stepwise.RetryParams) (*stepwise.Run, error) {
	return l.eng.Retry(ctx, p)
}

func (l local) Replay(ctx context.Context, p stepwise.ReplayParams) (*stepwise.Run, error) {
	return l.eng.Replay(ctx, p)
}

func (l local) AgentName(arg string) string { return l.agentName(arg) }

// remote serves the commands through a stepwise server.
type remote struct{ c *client.Client }

func (r remote) Sessions(ctx context.Context, q client.SessionQuery) (*client.SessionPage, error) {
	return r.c.Sessions(ctx, q)
}

func (r remote) Steps(ctx context.Context, sessionID string, from, to int64) ([]*stepwise.Step, error) {
	return r.c.Steps(ctx, client.StepQuery{SessionID: sessionID, StartSeq: from, EndSeq: to})
}

func (r remote) Run(ctx context.Context, runID string) (*stepwise.Run, error) {
	return r.c.Run(ctx, runID)
}

func (r remote) StartRun(ctx context.Context, p stepwise.StartParams) (*stepwise.Run, error) {
	var opts []stepwise.InitiateOption
	if p.SessionID != "" {
		opts = append(opts, stepwise.InSession(p.SessionID))
	}
	if len(p.Metadata) > 0 {
		opts = append(opts, stepwise.WithMetadata(p.Metadata))
	}
	if p.Breakpoints != nil {
		opts = append(opts, stepwise.WithBreakpoints(p.Breakpoints))
	}
	run, _, err := r.c.StartRun(ctx, p.Agent, p.Input, opts...)
	return run, err
}

func (r remote) Follow(ctx context.Context, runID string) iter.Seq2[*stepwise.Event, error] {
	return func(yield func(*stepwise.Event, error) bool) {
		for ev, err := range r.c.Subscribe(ctx, stepwise.SubscribeParams{RunID: runID}) {
			if !yield(ev, err) || err != nil {
				return
			}
			if ev.RunID == runID && (ev.Type == stepwise.EventRunWaiting || ev.Type == stepwise.EventRunFinished) {
				return
			}
		}
	}
}

func (r remote) Pending(ctx context.Context, runID string) ([]*stepwise.PendingInput, error) {
	return r.c.Pending(ctx, runID)
}

func (r remote) Answer(ctx context.Context, runID, requestID string, answer json.RawMessage) (*stepwise.Step, error) {
	return r.c.Answer(ctx, runID, requestID, answer)
}

func (r remote) Cancel(ctx context.Context, runID, reason string) (*stepwise.Run, error) {
	return r.c.Cancel(ctx, runID, reason)
}

func (r remote) Fork(ctx context.Context, p stepwise.ForkParams) (*stepwise.Session, error) {
	return r.c.Fork(ctx, p)
}

func (r remote) Tree(ctx context.Context, id string) (*stepwise.ForkTree, error) {
	return r.c.Tree(ctx, id)
}

func (r remote) Summary(ctx context.Context, id string) (*stepwise.Summary, error) {
	return r.c.Summary(ctx, id)
}

func (r remote) Context(ctx context.Context, id, agent string) (*llm.Request, error) {
	return r.c.Context(ctx, id, agent)
}

func (r remote) Retry(ctx context.Context, p stepwise.RetryParams) (*stepwise.Run, error) {
	return r.c.Retry(ctx, p)
}

func (r remote) Replay(ctx context.Context, p stepwise.ReplayParams) (*stepwise.Run, error) {
	return r.c.Replay(ctx, p)
}

func (r remote) AgentName(arg string) string { return arg }

func (r remote) Close() error { return nil }

// runWith adapts a command body that needs a backend: it opens one (with
// the agent file or name in *agent, when agent is not nil) and closes it
// when the body returns.
func (e *env) runWith(agent *string, body func(cmd *cobra.Command, b backend, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		a := ""
		if agent != nil {
			a = *agent
		}
		b, err := e.backend(cmd.Context(), a)
		if err != nil {
			return err
		}
		defer b.Close()
		return body(cmd, b, args)
	}
}

// readWith is runWith for read-only commands: the backend is e.reader's,
// so the command creates no database and works beside a writer.
func (e *env) readWith(body func(cmd *cobra.Command, b backend, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		b, err := e.reader(cmd)
		if err != nil {
			return err
		}
		defer b.Close()
		return body(cmd, b, args)
	}
}
