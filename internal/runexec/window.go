package runexec

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/stepwise-run/stepwise/internal/ids"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// WindowPolicy is how the context of a model request is kept under a token
// budget: Budget (0: no budget), Strategy ("trim" or "summarize"), and the
// Model that summarizes with its Prices.
type WindowPolicy struct {
	Budget   int
	Strategy string
	Model    llm.Model
	Prices   llm.PriceTable
}

// Window returns the messages of the next request under the policy's token
// budget, and, when the trim point moved, the system step that records it.
func (c *Core) Window(ctx context.Context, p WindowPolicy) ([]llm.Message, *steptype.Step, error) {
	cv := c.Conv
	if p.Budget <= 0 || cv.Count() == 0 {
		return cv.Messages(), nil, nil
	}
	var rec *steptype.Step
	if t := cv.PlanTrim(p.Budget, p.Strategy); t != nil {
		// The clock is read only for a trim: a window under its budget
		// costs no reading.
		start := c.Env.Now()
		rec = t.Step()
		if t.Strategy() == "summarize" && p.Model != nil {
			// Incremental: the previous summary and the newly trimmed
			// messages, never everything since the start. The call is
			// recorded on the context step (tokens, cost, model), so it
			// counts in the run's and session's totals. (A conversation
			// of an agent that summarizes is loaded from its trim point.)
			if err := c.summarize(ctx, p, rec, t.Previous(), t.Dropped()); err != nil {
				return nil, nil, fmt.Errorf("summarize trimmed context: %w", err)
			}
		}
		rec.Metrics.StartedAt, rec.Metrics.FinishedAt = start, c.Env.Now()
		rec.Metrics.Duration = rec.Metrics.FinishedAt.Sub(rec.Metrics.StartedAt)
		cv.ApplyTrim(t, rec.Content)
	}
	return cv.Window(), rec, nil
}

// summarize asks the policy's model to fold newly trimmed messages into the
// previous summary, and records the call on the context step rec: its
// content is the summary, its metrics the call's usage, cost and duration.
func (c *Core) summarize(ctx context.Context, p WindowPolicy, rec *steptype.Step, previous string, msgs []llm.Message) error {
	var b strings.Builder
	if previous != "" {
		fmt.Fprintf(&b, "Summary so far:\n%s\n\nNew messages:\n", previous)
	}
	for _, m := range msgs {
		fmt.Fprintf(&b, "%s: %s\n", m.Role, m.Content)
	}
	req := &llm.Request{System: "Summarize the conversation below in a few sentences, keeping facts, decisions and open questions. When a summary so far is given, return one summary that covers it and the new messages.",
		Messages: []llm.Message{{Role: steptype.RoleUser, Content: b.String()}}}
	model := p.Model
	m := &rec.Metrics
	m.StartedAt, m.Model = c.Env.Now(), model.Name()
	if pv, ok := model.(llm.Provider); ok {
		m.Provider = pv.Provider()
	}
	// The call's request and response (and its HTTP exchange) are events
	// of the context step, as an llm step's are of it: the step gets its
	// id now, and commit keeps it.
	if rec.ID == "" && c.Unit.RecordsEvents() {
		rec.ID = ids.At(time.Now())
	}
	final, err := llm.Complete(ctx, c.Unit.ObserveModel(model, rec), req)
	if err != nil {
		return err
	}
	m.FinishedAt = c.Env.Now()
	m.Duration = m.FinishedAt.Sub(m.StartedAt)
	m.InputTokens, m.OutputTokens = final.Usage.InputTokens, final.Usage.OutputTokens
	m.CachedTokens, m.ReasoningTokens = final.Usage.CachedTokens, final.Usage.ReasoningTokens
	if price, ok := p.Prices.Lookup(model.Name()); ok {
		m.Cost = price.Cost(m.InputTokens, m.OutputTokens, m.CachedTokens)
	}
	rec.Content = final.Content
	return nil
}
