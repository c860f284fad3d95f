package stepwise

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stepwise-run/stepwise/steptype"
)

// TestFingerprintIgnoresResultOrder checks that the conversation hash does
// not depend on the order in which the results of one tool-call message
// committed, and still depends on everything else.
func TestFingerprintIgnoresResultOrder(t *testing.T) {
	asst := &Step{Kind: steptype.KindLLM, Role: steptype.RoleAssistant, Content: "calling", ToolCalls: []ToolCall{
		{ID: "a", Name: "t", Arguments: json.RawMessage(`{}`)}, {ID: "b", Name: "t", Arguments: json.RawMessage(`{}`)}, {ID: "c", Name: "t", Arguments: json.RawMessage(`{}`)}}}
	result := func(id string) *Step {
		return &Step{Kind: steptype.KindTool, Role: steptype.RoleTool, ToolCallID: id, ToolName: "t", Content: "r" + id, Status: steptype.StepCompleted}
	}
	head := func(order ...string) []byte {
		c := newConversation()
		c.add(&Step{Kind: steptype.KindUser, Role: steptype.RoleUser, Content: "go", Status: steptype.StepCompleted})
		c.add(asst)
		for _, id := range order {
			c.add(result(id))
		}
		return c.headBytes()
	}
	want := head("a", "b", "c")
	for _, order := range [][]string{{"c", "b", "a"}, {"b", "a", "c"}, {"a", "c", "b"}} {
		if !bytes.Equal(head(order...), want) {
			t.Fatalf("order %v changes the fingerprint", order)
		}
	}
	if bytes.Equal(head("a", "b"), want) || bytes.Equal(head("b", "a"), head("a", "c")) {
		t.Fatal("a missing or different result does not change the fingerprint")
	}
	// A message after the block is hashed after it, as usual.
	c := newConversation()
	c.add(asst)
	c.add(result("b"))
	c.add(result("a"))
	c.add(&Step{Kind: steptype.KindUser, Role: steptype.RoleUser, Content: "more", Status: steptype.StepCompleted})
	c.add(result("c")) // not part of the block any more
	d := newConversation()
	d.add(asst)
	d.add(result("a"))
	d.add(result("b"))
	d.add(&Step{Kind: steptype.KindUser, Role: steptype.RoleUser, Content: "more", Status: steptype.StepCompleted})
	d.add(result("c"))
	if !bytes.Equal(c.headBytes(), d.headBytes()) {
		t.Fatal("a closed block is not hashed in call order")
	}
}
