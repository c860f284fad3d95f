package stepwise

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/json"
	"slices"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// conversation is the in-memory model context of an execution: the
// message-bearing steps of the run's thread, appended as steps commit, so
// building a request never re-reads the session.
type conversation struct {
	msgs []llm.Message
	seqs []int64 // the sequence of the step behind each message
	// lastAssistant is the latest assistant step with tool calls, and
	// answered the tool-call ids that already have a result after it.
	lastAssistant *Step
	answered      map[string]bool
	// open is true while results of lastAssistant's calls may still come:
	// until a message of another role follows it (see closeCalls).
	open bool
	// prefix[i] is the estimated tokens of msgs[:i].
	prefix []int
	// trimmed messages at the front are left out under a token budget;
	// summary replaces them when the strategy is "summarize".
	trimmed int
	summary string
	// chain[i] hashes messages[:i+1] (canonical JSON, chained), so a
	// request fingerprint costs O(1) per call instead of O(history).
	chain [][sha256.Size]byte
	// The results that directly follow an assistant tool-call message are
	// hashed in the order of its calls, not in the order they committed
	// (parallel calls finish in any order; the model does not care):
	// blockAt is the index of that assistant message (-1: none open) and
	// block its results so far, with their call positions.
	blockAt int
	block   []blockResult
	// hashBuf, hashEnc and hashMsg are reused by chainHash, so that
	// hashing a message allocates nothing.
	hashBuf bytes.Buffer
	hashEnc *json.Encoder
	hashMsg llm.Message
}

// blockResult is a tool result of the open block and its call's position.
type blockResult struct {
	pos int
	msg llm.Message
}

// tokens returns the estimated tokens of the first n messages.
func (c *conversation) tokens(n int) int {
	if n <= 0 {
		return 0
	}
	return c.prefix[n-1]
}

func newConversation() *conversation { return &conversation{answered: map[string]bool{}, blockAt: -1} }

// inThread reports whether a step belongs to the model context of a run at
// hop `hop` (root runs see every hop-0 message of the session; child runs
// are loaded by run id).
func inContext(s *Step) bool {
	if !s.InMessageContext() {
		return false
	}
	return s.Status != steptype.StepWaiting && s.Status != steptype.StepCancelled
}

// add appends a committed step if it is part of the context, keeping the
// messages a sequence every provider accepts (see closeCalls): a tool
// message that answers no open call of the latest assistant message (an
// orphan, or a second result for one call) is left out, and a message of
// another role closes the calls still without a result first.
func (c *conversation) add(s *Step) {
	if !inContext(s) {
		return
	}
	m := llm.MessageOf(s)
	if m.Role == steptype.RoleTool {
		if !c.open || c.answered[m.ToolCallID] || !c.calls(m.ToolCallID) {
			return
		}
	} else {
		c.closeCalls()
	}
	c.push(m, s.Sequence)
	if s.HasToolCalls() {
		c.lastAssistant, c.open = s, true
		clear(c.answered)
		c.blockAt, c.block = len(c.msgs)-1, c.block[:0]
	}
	if m.Role == steptype.RoleTool {
		c.answered[m.ToolCallID] = true
	}
}

// push appends a message with its token and hash bookkeeping.
func (c *conversation) push(m llm.Message, seq int64) {
	c.msgs = append(c.msgs, m)
	c.prefix = append(c.prefix, c.tokens(len(c.prefix))+EstimateTokens(m))
	c.chain = append(c.chain, c.nextHash(m))
	c.seqs = append(c.seqs, seq)
}

// calls reports whether the latest assistant message has a call with id.
func (c *conversation) calls(id string) bool {
	if c.lastAssistant == nil {
		return false
	}
	for _, tc := range c.lastAssistant.ToolCalls {
		if tc.ID == id {
			return true
		}
	}
	return false
}

// NotExecutedResult is the content of the tool message the context builder
// adds for a tool call that has no result when the conversation moves on
// without it (a fork or retry cut inside a parallel tool call, a new user
// turn after one, a cancelled request): providers refuse an assistant tool
// call without its result.
const NotExecutedResult = "error: this tool call was not executed; the conversation continued without its result"

// closeCalls ends the tool calls of the latest assistant message: every call
// still without a result gets a NotExecutedResult tool message, in the
// model's call order, right after the results it has. It is a pure function
// of the step log, so a reloaded conversation (and its request fingerprints)
// is the same as the live one.
func (c *conversation) closeCalls() {
	if !c.open {
		return
	}
	c.open = false
	seq := c.seqs[len(c.seqs)-1]
	for _, tc := range c.lastAssistant.ToolCalls {
		if c.answered[tc.ID] {
			continue
		}
		c.answered[tc.ID] = true
		c.push(llm.Message{Role: steptype.RoleTool, Content: NotExecutedResult, ToolCallID: tc.ID, ToolName: tc.Name}, seq)
	}
}

func (c *conversation) messages() []llm.Message { return c.msgs }

// pendingToolCalls appends to out the calls of the last assistant message
// that have no result yet, in the model's order.
func (c *conversation) pendingToolCalls(out []ToolCall) []ToolCall {
	if c.lastAssistant == nil || !c.open {
		return out
	}
	for _, tc := range c.lastAssistant.ToolCalls {
		if !c.answered[tc.ID] {
			out = append(out, tc)
		}
	}
	return out
}

// lastAssistantText returns the content of the latest assistant message.
func (c *conversation) lastAssistantText() string {
	for i := len(c.msgs) - 1; i >= 0; i-- {
		if c.msgs[i].Role == steptype.RoleAssistant {
			return c.msgs[i].Content
		}
	}
	return ""
}

// chainHash extends the message hash chain ending in prev (nil: empty)
// with m: sha256(prev ‖ JSON of m with canonical tool-call arguments).
func (c *conversation) chainHash(prev []byte, m llm.Message) [sha256.Size]byte {
	if c.hashEnc == nil {
		c.hashEnc = json.NewEncoder(&c.hashBuf) // writes what json.Marshal does, plus "\n"
	}
	c.hashMsg = m
	c.hashMsg.ToolCalls = canonicalCalls(m.ToolCalls)
	c.hashBuf.Reset()
	c.hashBuf.Write(prev)
	_ = c.hashEnc.Encode(&c.hashMsg)
	c.hashMsg = llm.Message{}
	b := c.hashBuf.Bytes()
	return sha256.Sum256(b[:len(b)-1])
}

// nextHash is the chain hash after appending m: a tool result that
// continues the results of the last tool-call message re-hashes that block
// in call order.
func (c *conversation) nextHash(m llm.Message) [sha256.Size]byte {
	pos := -1
	if m.Role == steptype.RoleTool && c.blockAt >= 0 && len(c.chain) == c.blockAt+1+len(c.block) {
		for i, tc := range c.lastAssistant.ToolCalls {
			if tc.ID == m.ToolCallID {
				pos = i
			}
		}
	}
	if pos < 0 {
		c.blockAt = -1 // anything else closes the block
		return c.chainHash(c.head(), m)
	}
	c.block = append(c.block, blockResult{pos: pos, msg: m})
	slices.SortStableFunc(c.block, func(a, b blockResult) int { return cmp.Compare(a.pos, b.pos) })
	out := c.chain[c.blockAt]
	for _, r := range c.block {
		out = c.chainHash(out[:], r.msg)
	}
	return out
}

// head is the hash of the whole conversation.
func (c *conversation) head() []byte {
	if len(c.chain) == 0 {
		return nil
	}
	return c.chain[len(c.chain)-1][:]
}
