package llm

import (
	"fmt"
	"strings"

	"github.com/stepwise-run/stepwise/steptype"
)

// CheckSequence reports the first way msgs break the message-sequence rules
// that the OpenAI and Anthropic chat APIs enforce (they answer 400), as a
// permanent *Error with status 400 and code "invalid_sequence", or nil:
//
//   - the request has at least one message;
//   - every tool call of an assistant message has an id, unique in the
//     request;
//   - an assistant message with tool calls is followed, before the next
//     message of another role (or the end of the request), by exactly one
//     tool message per call id;
//   - a tool message has a tool_call_id that answers a call of that
//     assistant message, once.
//
// The scripted model's strict mode and the test fakes use it, so that a
// request the engine builds is refused there exactly when a real provider
// would refuse it.
func CheckSequence(msgs []Message) error {
	if len(msgs) == 0 {
		return sequenceError("the request has no messages")
	}
	ids := map[string]int{} // call id → index of its assistant message
	var open []string       // calls of the current assistant message without a result
	openAt := -1
	closeGroup := func(at int) error {
		if len(open) == 0 {
			return nil
		}
		where := "the end of the request"
		if at < len(msgs) {
			where = fmt.Sprintf("message %d (%s)", at, msgs[at].Role)
		}
		return sequenceError(fmt.Sprintf("assistant message %d has tool calls without a tool message before %s: %s", openAt, where, strings.Join(open, ", ")))
	}
	for i, m := range msgs {
		if m.Role != steptype.RoleTool {
			if err := closeGroup(i); err != nil {
				return err
			}
			open, openAt = nil, -1
		}
		switch m.Role {
		case steptype.RoleAssistant:
			for _, tc := range m.ToolCalls {
				if tc.ID == "" {
					return sequenceError(fmt.Sprintf("assistant message %d has a tool call (%s) without an id", i, tc.Name))
				}
				if j, dup := ids[tc.ID]; dup {
					return sequenceError(fmt.Sprintf("tool call id %q of message %d is already used by message %d", tc.ID, i, j))
				}
				ids[tc.ID] = i
				open = append(open, tc.ID)
			}
			if len(m.ToolCalls) > 0 {
				openAt = i
			}
		case steptype.RoleTool:
			if m.ToolCallID == "" {
				return sequenceError(fmt.Sprintf("tool message %d has no tool_call_id", i))
			}
			k := -1
			for j, id := range open {
				if id == m.ToolCallID {
					k = j
					break
				}
			}
			if k < 0 {
				if j, ok := ids[m.ToolCallID]; ok && j == openAt {
					return sequenceError(fmt.Sprintf("tool message %d answers tool call %q a second time", i, m.ToolCallID))
				}
				return sequenceError(fmt.Sprintf("tool message %d (tool_call_id %q) does not answer a tool call of the preceding assistant message", i, m.ToolCallID))
			}
			open = append(open[:k], open[k+1:]...)
		}
	}
	return closeGroup(len(msgs))
}

func sequenceError(msg string) *Error {
	return &Error{Class: steptype.ErrorPermanent, StatusCode: 400, Code: "invalid_sequence", Message: msg}
}
