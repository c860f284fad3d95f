package stepwise

import (
	"context"
	"errors"
	"fmt"

	"github.com/stepwise-run/stepwise/internal/runexec"

	"github.com/stepwise-run/stepwise/internal/convo"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// EstimateTokens is the token estimate used by context budgets: about four
// characters per token, plus a small per-message overhead.
func EstimateTokens(m llm.Message) int { return convo.EstimateTokens(m) }

// window returns the messages of the next request under the agent's token
// budget, and, when the trim point moved, the system step that records it.
func (x *execution) window(ctx context.Context) ([]llm.Message, *Step, error) {
	return x.Window(ctx, runexec.WindowPolicy{Budget: x.tokenBudget(), Strategy: x.agent.Context.Strategy, Model: x.agent.Model, Prices: x.e.cfg.Prices})
}

// ContextPreview returns the exact model request the next llm step of a
// session would send: the agent's instructions and tools, and the session's
// messages under the agent's token budget.
func (e *Engine) ContextPreview(ctx context.Context, sessionID, agentName string) (*llm.Request, error) {
	return e.ContextPreviewAt(ctx, sessionID, agentName, 0)
}

// ContextPreviewAt returns the model request rebuilt from the session as it
// was just before step at (at 0: the next request, as ContextPreview): the
// messages committed before it, in the context of that step's run (a
// sub-agent's step sees its own run's conversation), with the agent's
// instructions, tools and parameters. When the agent is not registered on
// this engine (a session recorded elsewhere) only the messages are
// rebuilt: System and Tools stay empty.
func (e *Engine) ContextPreviewAt(ctx context.Context, sessionID, agentName string, at int64) (*llm.Request, error) {
	sess, err := e.store.SessionGet(ctx, &store.SessionGetParams{ID: sessionID})
	if err != nil {
		return nil, fmt.Errorf("session %q: %w", sessionID, err)
	}
	if at < 0 || at > sess.LastSequence+1 {
		return nil, fmt.Errorf("%w: step %d is outside session %s (1..%d)", store.ErrInvalid, at, sessionID, sess.LastSequence)
	}
	run := &Run{SessionID: sessionID, Agent: agentName}
	if at > 0 && at <= sess.LastSequence {
		step, err := e.store.StepGet(ctx, &store.StepGetParams{SessionID: sessionID, Sequence: at})
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", at, err)
		}
		if step.Hop > 0 && step.RunID != "" {
			if r, err := e.store.RunGet(ctx, &store.RunGetParams{ID: step.RunID}); err == nil {
				run.ID, run.Hop = r.ID, r.Hop
				if agentName == "" {
					run.Agent = r.Agent
				}
			}
		}
	}
	if run.Agent == "" {
		run.Agent = sess.Agent
	}
	a, err := e.Agent(run.Agent)
	if err != nil {
		if at == 0 || !errors.Is(err, ErrUnknownAgent) {
			return nil, err
		}
		a = &Agent{Name: run.Agent}
	}
	x := e.newExec(a, run)
	x.Ctx, x.before = ctx, at
	if err := x.load(ctx); err != nil {
		return nil, err
	}
	// Calls without a result get one from a run that is still going; any
	// other next model call closes them (see closeCalls).
	busy, err := x.e.store.RunList(ctx, &store.RunListParams{SessionID: sessionID, Statuses: []steptype.RunStatus{steptype.RunQueued, steptype.RunRunning, steptype.RunWaiting}})
	if err != nil {
		return nil, err
	}
	if len(busy) == 0 {
		x.Conv.CloseCalls()
	}
	req := x.request()
	msgs, _, err := x.windowPreview()
	if err != nil {
		return nil, err
	}
	req.Messages = msgs
	return req, nil
}

// windowPreview is window without side effects or model calls.
func (x *execution) windowPreview() ([]llm.Message, *Step, error) {
	saved := *x.Conv
	defer func() { *x.Conv = saved }()
	a := *x.agent
	a.Context.Strategy = "trim"
	keep := x.agent
	x.agent = &a
	defer func() { x.agent = keep }()
	msgs, _, err := x.window(context.Background())
	if err != nil {
		return nil, nil, err
	}
	if saved.Summary() != "" && x.Conv.Summary() == "" {
		msgs = append([]llm.Message{convo.SummaryMessage(saved.Summary())}, msgs...)
	}
	return append([]llm.Message(nil), msgs...), nil, nil
}

// loadThread builds the context of a top-level run: the session's hop-0
// messages up to x.before, from the session's context checkpoints (see
// convo.Loader.Load).
func (x *execution) loadThread(ctx context.Context, sess *Session) error {
	conv, allowed, err := x.contextLoader().Load(ctx, sess, x.threadEnd(sess))
	if err != nil {
		return err
	}
	x.Conv, x.allowed = conv, allowed
	return nil
}

// tokenBudget is the token budget of the execution's agent (0: none).
func (x *execution) tokenBudget() int {
	if x.agent.budgeted {
		return x.agent.budget
	}
	return budgetOf(x.agent, x.e.cfg.ContextWindows)
}

// contextLoader is the context builder of the execution's agent.
func (x *execution) contextLoader() *convo.Loader {
	return &convo.Loader{Store: x.e.store, Budget: x.tokenBudget(),
		Summarize: x.agent.Context.Strategy == "summarize" && x.agent.Model != nil, Allowed: allowedBy}
}

// threadEnd is the last step of the session the run's context holds.
func (x *execution) threadEnd(sess *Session) int64 {
	end := sess.LastSequence
	if x.before > 0 {
		end = min(end, x.before-1)
	}
	return end
}

// fullConversation rebuilds the whole conversation when only its tail was
// loaded (Scope.Messages, a last answer before the loaded messages).
func (x *execution) fullConversation() *convo.Conversation {
	if !x.Conv.Partial() {
		return x.Conv
	}
	sess, err := x.e.store.SessionGet(x.Ctx, &store.SessionGetParams{ID: x.Run.SessionID})
	if err != nil {
		return x.Conv
	}
	full, err := x.contextLoader().Full(x.Ctx, sess, x.threadEnd(sess))
	if err == nil && full.Open() && !x.Conv.Open() {
		full.CloseCalls() // as the model call did on x.Conv
	}
	if err != nil || full.HeadBytes() == nil || string(full.HeadBytes()) != string(x.Conv.HeadBytes()) {
		return x.Conv // the tail is all there is
	}
	full.SetTrimState(x.Conv.TrimState())
	x.Conv = full
	return x.Conv
}

// allMessages returns every message of the run's context.
func (x *execution) allMessages() []llm.Message { return x.fullConversation().Messages() }

// lastAssistantText returns the content of the latest assistant message.
func (x *execution) LastAssistantText() string {
	if t, ok := x.Conv.LastAssistantText(); ok {
		return t
	}
	t, _ := x.fullConversation().LastAssistantText()
	return t
}

// NotExecutedResult is the content of the tool message the context builder
// adds for a tool call that has no result when the conversation moves on
// without it (a fork or retry cut inside a parallel tool call, a new user
// turn after one, a cancelled request): providers refuse an assistant tool
// call without its result.
const NotExecutedResult = convo.NotExecutedResult

// NoTokenBudget, as ContextPolicy.TokenBudget, sends the model every
// message of the session, whatever its context window.
const NoTokenBudget = -1

// budgetOf is the token budget of agent a's context: its
// Context.TokenBudget when set, none for NoTokenBudget or an agent without
// a model, and otherwise three quarters of its model's context window (the
// rest leaves room for the instructions, the tool definitions, the answer
// and the error of the four-characters-per-token estimate).
func budgetOf(a *Agent, windows llm.ContextWindows) int {
	switch b := a.Context.TokenBudget; {
	case b > 0:
		return b
	case b < 0 || a.Model == nil:
		return 0
	}
	return windows.Of(a.Model) / 4 * 3
}
