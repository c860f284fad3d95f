package stepwise

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// EstimateTokens is the token estimate used by context budgets: about four
// characters per token, plus a small per-message overhead.
func EstimateTokens(m llm.Message) int {
	n := len(m.Content) + len(m.Reasoning)
	for _, tc := range m.ToolCalls {
		n += len(tc.Name) + len(tc.Arguments)
	}
	return n/4 + 4
}

// contextTrim is what a "context" system step records.
type contextTrim struct {
	Strategy     string `json:"strategy"`
	Messages     int    `json:"trimmed_messages"` // messages dropped from the front
	FromSequence int64  `json:"from_sequence"`
	ToSequence   int64  `json:"to_sequence"`
	Tokens       int    `json:"trimmed_tokens"`
	Budget       int    `json:"budget"`
}

// window returns the messages of the next request under the agent's token
// budget, and, when the trim point moved, the system step that records it.
func (x *execution) window(ctx context.Context) ([]llm.Message, *Step, error) {
	c := x.conv
	msgs := c.messages()
	budget := x.agent.Context.TokenBudget
	if budget <= 0 || c.count() == 0 {
		return msgs, nil, nil
	}
	start := x.e.now()
	n := c.count()
	total := c.tokens(n)
	cut := c.trimmed
	// The summary of earlier messages is part of the context: it counts
	// against the budget.
	extra := 0
	if c.summary != "" {
		extra = EstimateTokens(summaryMessage(c.summary))
	}
	// A trim point before the loaded messages is over the budget (see
	// conversation.sufficient).
	if cut < c.base || total-c.tokens(cut)+extra > budget {
		// Drop whole turns from the front: cut at the first user message
		// that brings the rest under the budget, keeping the last turn.
		for i := max(cut+1, c.base); i < n; i++ {
			if msgs[i-c.base].Role != steptype.RoleUser {
				continue
			}
			cut = i
			if total-c.tokens(i)+extra <= budget {
				break
			}
		}
	}
	var rec *Step
	if cut > c.trimmed {
		t := contextTrim{Strategy: x.agent.Context.Strategy, Messages: cut, FromSequence: c.firstSeq,
			ToSequence: c.seqAt(cut - 1), Tokens: c.tokens(cut), Budget: budget}
		if t.Strategy == "" {
			t.Strategy = "trim"
		}
		out, _ := json.Marshal(t)
		rec = &Step{Kind: steptype.KindSystem, Name: "context", Outputs: out,
			Content: fmt.Sprintf("context over budget (%d tokens): %d oldest messages (sequences %d..%d, ~%d tokens) left out of the model context", budget, cut, t.FromSequence, t.ToSequence, t.Tokens)}
		if t.Strategy == "summarize" && x.agent.Model != nil {
			// Incremental: the previous summary and the newly trimmed
			// messages, never everything since the start. The call is
			// recorded on the context step (tokens, cost, model), so it
			// counts in the run's and session's totals. (A conversation
			// of an agent that summarizes is loaded from its trim point.)
			if err := x.summarize(ctx, rec, c.summary, msgs[c.trimmed-c.base:cut-c.base]); err != nil {
				return nil, nil, fmt.Errorf("summarize trimmed context: %w", err)
			}
		}
		rec.Metrics.StartedAt, rec.Metrics.FinishedAt = start, x.e.now()
		rec.Metrics.Duration = rec.Metrics.FinishedAt.Sub(rec.Metrics.StartedAt)
		c.trimmed, c.trimSeq, c.summary = cut, t.ToSequence, ""
		if t.Strategy == "summarize" {
			c.summary = rec.Content
		}
	}
	out := msgs[c.trimmed-c.base:]
	if out == nil {
		out = []llm.Message{} // none loaded: empty as a full build's, not null
	}
	if c.summary != "" {
		out = append([]llm.Message{summaryMessage(c.summary)}, out...)
	}
	return out, rec, nil
}

// summaryMessage is the message that stands for the trimmed messages.
func summaryMessage(summary string) llm.Message {
	return llm.Message{Role: steptype.RoleUser, Content: "Summary of the earlier conversation:\n" + summary}
}

// summarize asks the agent's model to fold newly trimmed messages into the
// previous summary, and records the call on the context step rec: its
// content is the summary, its metrics the call's usage, cost and duration.
func (x *execution) summarize(ctx context.Context, rec *Step, previous string, msgs []llm.Message) error {
	var b strings.Builder
	if previous != "" {
		fmt.Fprintf(&b, "Summary so far:\n%s\n\nNew messages:\n", previous)
	}
	for _, m := range msgs {
		fmt.Fprintf(&b, "%s: %s\n", m.Role, m.Content)
	}
	req := &llm.Request{System: "Summarize the conversation below in a few sentences, keeping facts, decisions and open questions. When a summary so far is given, return one summary that covers it and the new messages.",
		Messages: []llm.Message{{Role: steptype.RoleUser, Content: b.String()}}}
	model := x.agent.Model
	m := &rec.Metrics
	m.StartedAt, m.Model = x.e.now(), model.Name()
	if p, ok := model.(llm.Provider); ok {
		m.Provider = p.Provider()
	}
	final, err := llm.Complete(ctx, model, req)
	if err != nil {
		return err
	}
	m.FinishedAt = x.e.now()
	m.Duration = m.FinishedAt.Sub(m.StartedAt)
	m.InputTokens, m.OutputTokens = final.Usage.InputTokens, final.Usage.OutputTokens
	m.CachedTokens, m.ReasoningTokens = final.Usage.CachedTokens, final.Usage.ReasoningTokens
	if price, ok := x.e.cfg.Prices.Lookup(model.Name()); ok {
		m.Cost = price.Cost(m.InputTokens, m.OutputTokens, m.CachedTokens)
	}
	rec.Content = final.Content
	return nil
}

// restoreTrim re-applies the latest context trim recorded in the session.
func (c *conversation) restoreTrim(s *Step) {
	var t contextTrim
	if json.Unmarshal(s.Outputs, &t) != nil {
		return
	}
	// The trim point is the first message after ToSequence; before the
	// loaded messages its index is not known (-1, see trimmed).
	c.trimmed, c.trimSeq, c.summary = -1, t.ToSequence, ""
	if c.base == 0 || t.ToSequence >= c.baseSeq {
		c.trimmed = c.base + sort.Search(len(c.seqs), func(i int) bool { return c.seqs[i] > t.ToSequence })
	}
	if t.Strategy == "summarize" {
		c.summary = s.Content
	}
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
	x := &execution{e: e, agent: a, run: run, ctx: ctx, before: at}
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
		x.conv.closeCalls()
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
	saved := *x.conv
	defer func() { *x.conv = saved }()
	a := *x.agent
	a.Context.Strategy = "trim"
	keep := x.agent
	x.agent = &a
	defer func() { x.agent = keep }()
	msgs, _, err := x.window(context.Background())
	if err != nil {
		return nil, nil, err
	}
	if saved.summary != "" && x.conv.summary == "" {
		msgs = append([]llm.Message{summaryMessage(saved.summary)}, msgs...)
	}
	return append([]llm.Message(nil), msgs...), nil, nil
}
