package scripted

import (
	"weak"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// tally is what selection and usage need to know about a request's
// messages: sums over the messages, so a longer request that extends the
// same messages extends the tally.
type tally struct {
	assistants int // assistant messages
	lastUser   int // index of the last user message, -1 if none
	after      int // assistant messages after the last user message
	chars      int // bytes of content, reasoning, ids, names and arguments
}

// memo remembers the tally of a request, so that the next call of a
// growing conversation (the engine appends steps to its in-memory context)
// only reads the new messages. It is valid for a request whose messages
// start at the same address, are at least as many, and whose first and
// last remembered messages are unchanged; anything else is tallied afresh.
// The result is the same either way as long as callers do not rewrite,
// in place, messages they have already passed to Generate.
type memo struct {
	n           int
	first, last llm.Message
	tally
}

// maxMemos is how many conversations a Model remembers at once, keyed by
// the address of their first message, so that concurrent runs sharing one
// model (stepwise bench --runs 100) each keep their tally instead of
// evicting each other's on every call. The key is a weak pointer: a
// remembered conversation does not keep its messages alive. When the
// table is full an arbitrary entry makes room.
const maxMemos = 1024

func (m *Model) tally(msgs []llm.Message) tally {
	if len(msgs) == 0 {
		return tally{lastUser: -1}
	}
	key := weak.Make(&msgs[0])
	m.mu.Lock()
	c, ok := m.memo[key]
	m.mu.Unlock()
	t, from := tally{lastUser: -1}, 0
	if ok && c.n <= len(msgs) && same(&c.first, &msgs[0]) && same(&c.last, &msgs[c.n-1]) {
		t, from = c.tally, c.n
	}
	for i := from; i < len(msgs); i++ {
		msg := &msgs[i]
		switch msg.Role {
		case steptype.RoleAssistant:
			t.assistants++
			t.after++
		case steptype.RoleUser:
			t.lastUser, t.after = i, 0
		}
		t.chars += len(msg.Content) + len(msg.Reasoning) + len(msg.ToolCallID) + len(msg.ToolName)
		for j := range msg.ToolCalls {
			tc := &msg.ToolCalls[j]
			t.chars += len(tc.ID) + len(tc.Name) + len(tc.Arguments)
		}
	}
	if from < len(msgs) {
		m.mu.Lock()
		if m.memo == nil {
			m.memo = map[weak.Pointer[llm.Message]]memo{}
		}
		if _, ok := m.memo[key]; !ok && len(m.memo) >= maxMemos {
			for k := range m.memo {
				delete(m.memo, k)
				break
			}
		}
		m.memo[key] = memo{n: len(msgs), first: msgs[0], last: msgs[len(msgs)-1], tally: t}
		m.mu.Unlock()
	}
	return t
}

// same reports whether two messages are equal, comparing tool calls by
// identity.
func same(a, b *llm.Message) bool {
	if a.Role != b.Role || a.Content != b.Content || a.Reasoning != b.Reasoning ||
		a.ToolCallID != b.ToolCallID || a.ToolName != b.ToolName || len(a.ToolCalls) != len(b.ToolCalls) {
		return false
	}
	return len(a.ToolCalls) == 0 || &a.ToolCalls[0] == &b.ToolCalls[0]
}
