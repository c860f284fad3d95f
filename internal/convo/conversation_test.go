package convo

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
	asst := &steptype.Step{Kind: steptype.KindLLM, Role: steptype.RoleAssistant, Content: "calling", ToolCalls: []steptype.ToolCall{
		{ID: "a", Name: "t", Arguments: json.RawMessage(`{}`)}, {ID: "b", Name: "t", Arguments: json.RawMessage(`{}`)}, {ID: "c", Name: "t", Arguments: json.RawMessage(`{}`)}}}
	result := func(id string) *steptype.Step {
		return &steptype.Step{Kind: steptype.KindTool, Role: steptype.RoleTool, ToolCallID: id, ToolName: "t", Content: "r" + id, Status: steptype.StepCompleted}
	}
	head := func(order ...string) []byte {
		c := New()
		c.Add(&steptype.Step{Kind: steptype.KindUser, Role: steptype.RoleUser, Content: "go", Status: steptype.StepCompleted})
		c.Add(asst)
		for _, id := range order {
			c.Add(result(id))
		}
		return c.HeadBytes()
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
	c := New()
	c.Add(asst)
	c.Add(result("b"))
	c.Add(result("a"))
	c.Add(&steptype.Step{Kind: steptype.KindUser, Role: steptype.RoleUser, Content: "more", Status: steptype.StepCompleted})
	c.Add(result("c")) // not part of the block any more
	d := New()
	d.Add(asst)
	d.Add(result("a"))
	d.Add(result("b"))
	d.Add(&steptype.Step{Kind: steptype.KindUser, Role: steptype.RoleUser, Content: "more", Status: steptype.StepCompleted})
	d.Add(result("c"))
	if !bytes.Equal(c.HeadBytes(), d.HeadBytes()) {
		t.Fatal("a closed block is not hashed in call order")
	}
}
