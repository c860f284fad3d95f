package llm_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

func user(s string) llm.Message { return llm.Message{Role: steptype.RoleUser, Content: s} }

func calls(ids ...string) llm.Message {
	m := llm.Message{Role: steptype.RoleAssistant}
	for _, id := range ids {
		m.ToolCalls = append(m.ToolCalls, steptype.ToolCall{ID: id, Name: "t", Arguments: []byte("{}")})
	}
	return m
}

func result(id string) llm.Message {
	return llm.Message{Role: steptype.RoleTool, ToolCallID: id, Content: "ok"}
}

func text(s string) llm.Message { return llm.Message{Role: steptype.RoleAssistant, Content: s} }

func TestCheckSequence(t *testing.T) {
	t.Parallel()
	ok := [][]llm.Message{
		{user("hi")},
		{user("hi"), text("hello"), user("again")},
		{user("hi"), calls("a", "b"), result("a"), result("b")},
		{user("hi"), calls("a", "b"), result("b"), result("a"), text("done")},
		{user("hi"), calls("a"), result("a"), calls("b"), result("b"), text("done"), user("more")},
	}
	for i, msgs := range ok {
		if err := llm.CheckSequence(msgs); err != nil {
			t.Errorf("ok case %d refused: %v", i, err)
		}
	}
	bad := []struct {
		msgs []llm.Message
		want string
	}{
		{nil, "no messages"},
		{[]llm.Message{user("hi"), calls("a", "b"), result("a")}, "without a tool message before the end of the request: b"},
		{[]llm.Message{user("hi"), calls("a", "b"), result("a"), user("next")}, "before message 3 (user): b"},
		{[]llm.Message{user("hi"), calls("a"), text("x"), result("a")}, "before message 2 (assistant): a"},
		{[]llm.Message{user("hi"), result("a")}, `tool message 1 (tool_call_id "a") does not answer`},
		{[]llm.Message{user("hi"), calls("a"), result("a"), result("a")}, `answers tool call "a" a second time`},
		{[]llm.Message{user("hi"), calls("a"), result("a"), calls("a"), result("a")}, `tool call id "a" of message 3 is already used by message 1`},
		{[]llm.Message{user("hi"), calls(""), result("")}, "without an id"},
		{[]llm.Message{user("hi"), calls("a"), {Role: steptype.RoleTool}}, "no tool_call_id"},
		{[]llm.Message{user("hi"), calls("a"), result("a"), text("x"), result("a")}, `does not answer a tool call of the preceding assistant message`},
	}
	for i, c := range bad {
		err := llm.CheckSequence(c.msgs)
		var le *llm.Error
		if !errors.As(err, &le) || le.StatusCode != 400 || le.Code != "invalid_sequence" || le.Class != steptype.ErrorPermanent {
			t.Errorf("bad case %d: %v", i, err)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("bad case %d: %v, want %q", i, err, c.want)
		}
	}
}
