package convo

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/json"
	"slices"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// Conversation is the in-memory model context of an execution: the
// message-bearing steps of the run's thread, appended as steps commit, so
// building a request never re-reads the session.
type Conversation struct {
	// msgs are the messages from index base on: a conversation restored
	// from a context checkpoint under a token budget holds only the
	// messages the model can still see (see loadThread); base is 0 after a
	// full build.
	msgs []llm.Message
	seqs []int64 // the sequence of the step behind each message
	base int
	// baseTokens are the estimated tokens of the first base messages,
	// baseSeq the sequence of message base-1 and firstSeq that of message 0.
	baseTokens int
	baseSeq    int64
	firstSeq   int64
	// lastAssistant is the latest assistant step with tool calls, and
	// answered the tool-call ids that already have a result after it.
	lastAssistant *steptype.Step
	answered      map[string]bool
	// open is true while results of lastAssistant's calls may still come:
	// until a message of another role follows it (see closeCalls).
	open bool
	// prefix[i] is the estimated tokens of messages [0, base+i].
	prefix []int
	// users are the indices of the loaded user messages, ascending: the
	// turns a trim may cut at (PlanTrim searches them, not every message).
	users []int
	// trimmed messages at the front are left out under a token budget;
	// summary replaces them when the strategy is "summarize". trimmed < base
	// (-1 when the exact index is not known) only in a conversation whose
	// next window moves the trim point into the loaded messages.
	trimmed int
	trimSeq int64 // the ToSequence of the trim point (0: none)
	summary string
	// head hashes all messages (canonical JSON, chained: the hash of
	// messages[:i+1] is that of messages[:i] and message i), so a request
	// fingerprint costs O(1) per call instead of O(history). hashing is
	// false while a build replays messages a checkpoint already hashed.
	head    [sha256.Size]byte
	hashing bool
	// The results that directly follow an assistant tool-call message are
	// hashed in the order of its calls, not in the order they committed
	// (parallel calls finish in any order; the model does not care):
	// blockAt is the index of that assistant message (-1: none open),
	// blockHash the chain hash up to it, and block its results so far,
	// with their call positions.
	blockAt   int
	blockHash [sha256.Size]byte
	block     []blockResult
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

// Tokens returns the estimated tokens of the first n messages (n >= base,
// or n <= 0).
func (c *Conversation) Tokens(n int) int {
	switch {
	case n <= 0:
		return 0
	case n == c.base:
		return c.baseTokens
	}
	return c.prefix[n-c.base-1]
}

// Count is the number of messages, loaded or not.
func (c *Conversation) Count() int { return c.base + len(c.msgs) }

// SeqAt is the sequence of message i (i >= base-1).
func (c *Conversation) SeqAt(i int) int64 {
	if i < c.base {
		return c.baseSeq
	}
	return c.seqs[i-c.base]
}

// New returns an empty conversation.
func New() *Conversation {
	return &Conversation{answered: map[string]bool{}, blockAt: -1, hashing: true}
}

// inThread reports whether a step belongs to the model context of a run at
// hop `hop` (root runs see every hop-0 message of the session; child runs
// are loaded by run id).
func InContext(s *steptype.Step) bool {
	if !s.InMessageContext() {
		return false
	}
	return s.Status != steptype.StepWaiting && s.Status != steptype.StepCancelled
}

// Add appends a committed step if it is part of the context, keeping the
// messages a sequence every provider accepts (see closeCalls): a tool
// message that answers no open call of the latest assistant message (an
// orphan, or a second result for one call) is left out, and a message of
// another role closes the calls still without a result first.
func (c *Conversation) Add(s *steptype.Step) {
	if !InContext(s) {
		return
	}
	m := llm.MessageOf(s)
	if m.Role == steptype.RoleTool {
		if !c.open || c.answered[m.ToolCallID] || !c.calls(m.ToolCallID) {
			return
		}
	} else {
		c.CloseCalls()
	}
	c.Push(m, s.Sequence)
	if s.HasToolCalls() {
		c.lastAssistant, c.open = s, true
		clear(c.answered)
		clear(c.block) // reused: checkpoints copy it
		c.blockAt, c.blockHash, c.block = c.Count()-1, c.head, c.block[:0]
	}
	if m.Role == steptype.RoleTool {
		c.answered[m.ToolCallID] = true
	}
}

// Push appends a message with its token and hash bookkeeping.
func (c *Conversation) Push(m llm.Message, seq int64) {
	n := c.Count()
	if n == 0 {
		c.firstSeq = seq
	}
	c.msgs = appendDoubling(c.msgs, m)
	c.prefix = appendDoubling(c.prefix, c.Tokens(n)+EstimateTokens(m))
	if c.hashing {
		c.head = c.nextHash(m, n)
	}
	c.seqs = appendDoubling(c.seqs, seq)
	if m.Role == steptype.RoleUser {
		c.users = append(c.users, n)
	}
}

// appendDoubling is append that doubles a full slice's capacity. append
// grows a large slice by a quarter, so a conversation of n messages would
// have allocated and copied about 5n of them; doubling makes it about 2n.
func appendDoubling[T any](s []T, v T) []T {
	if len(s) == cap(s) {
		s = slices.Grow(s, max(len(s), 8))
	}
	return append(s, v)
}

// calls reports whether the latest assistant message has a call with id.
func (c *Conversation) calls(id string) bool {
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
const NotExecutedResult = "error: this tool call was not executed; the Conversation continued without its result"

// CloseCalls ends the tool calls of the latest assistant message: every call
// still without a result gets a NotExecutedResult tool message, in the
// model's call order, right after the results it has. It is a pure function
// of the step log, so a reloaded conversation (and its request fingerprints)
// is the same as the live one.
func (c *Conversation) CloseCalls() {
	if !c.open {
		return
	}
	c.open = false
	seq := c.SeqAt(c.Count() - 1)
	for _, tc := range c.lastAssistant.ToolCalls {
		if c.answered[tc.ID] {
			continue
		}
		c.answered[tc.ID] = true
		c.Push(llm.Message{Role: steptype.RoleTool, Content: NotExecutedResult, ToolCallID: tc.ID, ToolName: tc.Name}, seq)
	}
}

// Messages returns the loaded messages, oldest first.
func (c *Conversation) Messages() []llm.Message { return c.msgs }

// LastAssistant is the latest assistant step with tool calls (nil: none).
func (c *Conversation) LastAssistant() *steptype.Step { return c.lastAssistant }

// Open reports whether results of LastAssistant's calls may still come.
func (c *Conversation) Open() bool { return c.open }

// Partial reports whether only the tail of the conversation is loaded (it
// was restored from a context checkpoint under a token budget).
func (c *Conversation) Partial() bool { return c.base > 0 }

// PendingToolCalls appends to out the calls of the last assistant message
// that have no result yet, in the model's order.
func (c *Conversation) PendingToolCalls(out []steptype.ToolCall) []steptype.ToolCall {
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

// LastAssistantText returns the content of the latest assistant message;
// ok is false when no loaded message is one and messages before base are
// not loaded.
func (c *Conversation) LastAssistantText() (text string, ok bool) {
	for i := len(c.msgs) - 1; i >= 0; i-- {
		if c.msgs[i].Role == steptype.RoleAssistant {
			return c.msgs[i].Content, true
		}
	}
	return "", c.base == 0
}

// chainHash extends the message hash chain ending in prev (nil: empty)
// with m: sha256(prev ‖ JSON of m with canonical tool-call arguments).
func (c *Conversation) chainHash(prev []byte, m llm.Message) [sha256.Size]byte {
	if c.hashEnc == nil {
		c.hashEnc = json.NewEncoder(&c.hashBuf) // writes what json.Marshal does, plus "\n"
	}
	c.hashBuf.Reset()
	c.hashBuf.Write(prev)
	// The common message (plain text, canonical arguments) is written
	// directly; anything else goes through encoding/json.
	if b, ok := appendMessageJSON(c.hashBuf.AvailableBuffer(), &m); ok {
		c.hashBuf.Write(b)
		return sha256.Sum256(c.hashBuf.Bytes())
	}
	c.hashMsg = m
	c.hashMsg.ToolCalls = CanonicalCalls(m.ToolCalls)
	_ = c.hashEnc.Encode(&c.hashMsg)
	c.hashMsg = llm.Message{}
	b := c.hashBuf.Bytes()
	return sha256.Sum256(b[:len(b)-1])
}

// nextHash is the chain hash after appending m as message n: a tool result
// that continues the results of the last tool-call message re-hashes that
// block in call order.
func (c *Conversation) nextHash(m llm.Message, n int) [sha256.Size]byte {
	pos := -1
	if m.Role == steptype.RoleTool && c.blockAt >= 0 && n == c.blockAt+1+len(c.block) {
		for i, tc := range c.lastAssistant.ToolCalls {
			if tc.ID == m.ToolCallID {
				pos = i
			}
		}
	}
	if pos < 0 {
		c.blockAt = -1 // anything else closes the block
		if n == 0 {
			return c.chainHash(nil, m)
		}
		return c.chainHash(c.head[:], m)
	}
	c.block = append(c.block, blockResult{pos: pos, msg: m})
	slices.SortStableFunc(c.block, func(a, b blockResult) int { return cmp.Compare(a.pos, b.pos) })
	out := c.blockHash
	for _, r := range c.block {
		out = c.chainHash(out[:], r.msg)
	}
	return out
}

// HeadBytes is the hash of the whole conversation (nil when empty).
func (c *Conversation) HeadBytes() []byte {
	if c.Count() == 0 {
		return nil
	}
	h := c.head
	return h[:]
}
