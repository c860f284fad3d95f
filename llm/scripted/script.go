package scripted

import (
	"time"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// DefaultChunk is the number of characters per streamed delta when a turn
// does not say.
const DefaultChunk = 8

// ExhaustedText is the reply to a call past the end of a script that does
// not loop. It is an ordinary final text (finish reason "stop"), so an agent
// loop ends normally and the transcript shows what happened.
const ExhaustedText = "(script exhausted)"

// Script is the content of a script file. Set exactly one of Turns (the flat
// form) and UserTurns (the grouped form); when both are set, UserTurns wins.
// See docs/scripted_model.md for the selection rules.
type Script struct {
	// Turns is the flat form: the model call that sees p assistant messages
	// in its request (the whole request, every user turn) gets the turn at
	// position p, where a turn occupies Repeat consecutive positions.
	Turns []Turn
	// UserTurns is the grouped form: an entry answers one user message, and
	// the call that sees k assistant messages after the last user message
	// gets the entry's turn at position k.
	UserTurns []UserTurn
	// Loop makes the script cycle instead of running out: flat turns start
	// again at the first turn; in the grouped form, the entries without
	// Match are reused in order.
	Loop bool
	// Strict makes the model refuse, like a real provider, a request whose
	// messages break the tool-call sequence rules (see llm.CheckSequence):
	// the call fails with a permanent *llm.Error, status 400, code
	// "invalid_sequence".
	Strict bool
}

// UserTurn is an entry of the grouped form: the replies to one user message.
type UserTurn struct {
	// Match, when set, selects the entry for every user message that
	// contains it (first matching entry in script order wins). Entries
	// without Match answer the user messages no Match claimed, in order.
	Match string
	// Turns are the model calls of this user turn.
	Turns []Turn
	// Loop makes Turns cycle instead of running out.
	Loop bool
}

// Turn is one scripted model response.
type Turn struct {
	// Text is the assistant content.
	Text string
	// Reasoning is the reasoning (thinking) text, streamed before Text.
	Reasoning string
	// ToolCalls are the calls the model asks for. An empty ID becomes
	// "call_<p>_<i>", p being the number of assistant messages in the
	// request and i the index of the call; empty Arguments become {}.
	ToolCalls []steptype.ToolCall
	// Usage is reported as given, except that a zero InputTokens,
	// OutputTokens or ReasoningTokens is estimated as ceil(bytes/4) of the
	// request (system prompt and messages), of the output (text, reasoning,
	// tool names and arguments) and of the reasoning.
	Usage llm.Usage
	// Chunk is the number of characters per streamed delta: 0 means
	// DefaultChunk, a negative value streams each text in one delta.
	Chunk int
	// Delay is the latency before the first delta (or the error).
	Delay time.Duration
	// ChunkDelay is the latency between two deltas and before the final
	// response.
	ChunkDelay time.Duration
	// Fail, when set, makes the turn fail like a provider would.
	Fail *Failure
	// Match, when set, is a guard: the last user message must contain it,
	// else the call fails with a permanent error (code "script_mismatch").
	Match string
	// Repeat is how many consecutive positions the turn occupies; values
	// below 1 count as 1.
	Repeat int
	// Line is the line of the turn in its script file, used in messages;
	// 0 for scripts built in Go.
	Line int
}

// Failure is a simulated provider error, returned as an *llm.Error whose
// Class and Code come from llm.ClassifyHTTP(Status).
type Failure struct {
	// Status is the HTTP status, 400–599.
	Status int
	// Message is the provider message; default: the status text.
	Message string
	// RetryAfter is the Retry-After hint carried by the error.
	RetryAfter time.Duration
	// Times is how many calls fail before the turn succeeds; 0 means every
	// call fails. Failures are counted in memory, per Model and per distinct
	// request: every conversation reaching the turn sees them, a retried
	// call (same request) eventually succeeds, and a restarted process
	// counts afresh.
	Times int
	// After streams the first After characters (runes) of the turn's text
	// before the error, like a provider stream cut mid-message; 0 fails
	// before any delta.
	After int
}
