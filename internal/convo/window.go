package convo

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
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

// trimRecord is what a "context" system step records.
type trimRecord struct {
	Strategy     string `json:"strategy"`
	Messages     int    `json:"trimmed_messages"` // messages dropped from the front
	FromSequence int64  `json:"from_sequence"`
	ToSequence   int64  `json:"to_sequence"`
	Tokens       int    `json:"trimmed_tokens"`
	Budget       int    `json:"budget"`
}

// SummaryMessage is the message that stands for the trimmed messages.
func SummaryMessage(summary string) llm.Message {
	return llm.Message{Role: steptype.RoleUser, Content: "Summary of the earlier conversation:\n" + summary}
}

// summaryTokens are the estimated tokens of the conversation's summary (0
// without one): the summary is part of the context and counts against the
// budget.
func (c *Conversation) summaryTokens() int {
	if c.summary == "" {
		return 0
	}
	return EstimateTokens(SummaryMessage(c.summary))
}

// Trim is a move of the trim point that the next window needs: the
// messages it leaves out and the "context" system step that records it.
type Trim struct {
	c   *Conversation
	cut int
	rec trimRecord
}

// PlanTrim returns the move of the trim point the next window under budget
// needs (strategy "trim" or "summarize"; empty means "trim"), nil when the
// trim point stays. It changes nothing; ApplyTrim does.
func (c *Conversation) PlanTrim(budget int, strategy string) *Trim {
	n := c.Count()
	total := c.Tokens(n)
	cut := c.trimmed
	extra := c.summaryTokens()
	// A trim point before the loaded messages is over the budget (see
	// Sufficient).
	if cut < c.base || total-c.Tokens(cut)+extra > budget {
		// Drop whole turns from the front: cut at the first user message
		// that brings the rest under the budget, else at the last one
		// (keeping the last turn). The tokens before a message only grow
		// with its index, so the first is found by binary search among
		// the user messages after the trim point: a plan costs
		// O(log turns), not a scan of the session.
		users := c.users[sort.SearchInts(c.users, max(cut+1, c.base)):]
		if len(users) > 0 {
			need := total + extra - budget // the tokens to leave out
			k := sort.Search(len(users), func(k int) bool { return c.Tokens(users[k]) >= need })
			cut = users[min(k, len(users)-1)]
		}
	}
	if cut <= c.trimmed {
		return nil
	}
	if strategy == "" {
		strategy = "trim"
	}
	return &Trim{c: c, cut: cut, rec: trimRecord{Strategy: strategy, Messages: cut, FromSequence: c.firstSeq,
		ToSequence: c.SeqAt(cut - 1), Tokens: c.Tokens(cut), Budget: budget}}
}

// Strategy is the trim's strategy: "trim" or "summarize".
func (t *Trim) Strategy() string { return t.rec.Strategy }

// Previous is the summary of the messages trimmed before this move.
func (t *Trim) Previous() string { return t.c.summary }

// Dropped returns the messages this move leaves out. Only a conversation
// loaded from its trim point has them all (one of an agent that
// summarizes is).
func (t *Trim) Dropped() []llm.Message {
	return t.c.msgs[t.c.trimmed-t.c.base : t.cut-t.c.base]
}

// Step returns the "context" system step that records the move, without
// metrics.
func (t *Trim) Step() *steptype.Step {
	out, _ := json.Marshal(t.rec)
	return &steptype.Step{Kind: steptype.KindSystem, Name: "context", Outputs: out,
		Content: fmt.Sprintf("context over budget (%d tokens): %d oldest messages (sequences %d..%d, ~%d tokens) left out of the model context", t.rec.Budget, t.cut, t.rec.FromSequence, t.rec.ToSequence, t.rec.Tokens)}
}

// ApplyTrim moves the trim point as t says. content is the content of the
// trim's step: under "summarize" it becomes the conversation's summary.
func (c *Conversation) ApplyTrim(t *Trim, content string) {
	c.trimmed, c.trimSeq, c.summary = t.cut, t.rec.ToSequence, ""
	if t.rec.Strategy == "summarize" {
		c.summary = content
	}
}

// Window returns the messages after the trim point, preceded by the
// summary of those before it when there is one.
func (c *Conversation) Window() []llm.Message {
	out := c.msgs[c.trimmed-c.base:]
	if out == nil {
		out = []llm.Message{} // none loaded: empty as a full build's, not null
	}
	if c.summary != "" {
		out = append([]llm.Message{SummaryMessage(c.summary)}, out...)
	}
	return out
}

// RestoreTrim re-applies the latest context trim recorded in the session
// (s is a "context" system step).
func (c *Conversation) RestoreTrim(s *steptype.Step) {
	var t trimRecord
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

// Trimmed is the index of the first message the model sees (-1: before
// the loaded messages, exact index unknown).
func (c *Conversation) Trimmed() int { return c.trimmed }

// Summary is the summary that stands for the trimmed messages ("" when
// none).
func (c *Conversation) Summary() string { return c.summary }

// TrimState is the trim point and summary of a conversation, as
// SetTrimState takes it.
type TrimState struct {
	Trimmed int    // see Conversation.Trimmed
	Seq     int64  // the last sequence left out (0: none)
	Summary string // see Conversation.Summary
}

// TrimState returns the conversation's trim point and summary.
func (c *Conversation) TrimState() TrimState {
	return TrimState{Trimmed: c.trimmed, Seq: c.trimSeq, Summary: c.summary}
}

// SetTrimState gives the conversation the trim point and summary of
// another one of the same messages.
func (c *Conversation) SetTrimState(t TrimState) {
	c.trimmed, c.trimSeq, c.summary = t.Trimmed, t.Seq, t.Summary
}
