package scripted_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/steptype"
)

func TestFlatSelectionCountsAssistantMessages(t *testing.T) {
	t.Parallel()
	m := mustParse(t, "flat.yaml", "turns: [first, second, third]")
	conv := []llm.Message{user("hi")}
	for _, want := range []string{"first", "second", "third", scripted.ExhaustedText, scripted.ExhaustedText} {
		got := final(t, m, request(conv...))
		if got.Content != want || got.FinishReason != "stop" {
			t.Fatalf("after %d messages: got %q (%s), want %q", len(conv), got.Content, got.FinishReason, want)
		}
		// A new user turn does not reset the flat position.
		conv = append(conv, assistant(got.Content), user("more"))
	}
}

func TestDeterministicAcrossInstances(t *testing.T) {
	t.Parallel()
	src := "turns:\n  - reasoning: think\n    text: hello there, friend\n    tool_calls: [{name: a, arguments: {x: 1}}, {name: b}]\n  - text: bye\n"
	req := request(user("hi"))
	m1, m2 := mustParse(t, "d.yaml", src), mustParse(t, "d.yaml", src)
	p1, f1, err1 := call(t, m1, req)
	p1b, f1b, _ := call(t, m1, req)
	p2, f2, err2 := call(t, m2, req)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if !reflect.DeepEqual(p1, p1b) || !reflect.DeepEqual(f1, f1b) {
		t.Fatal("same model, same request, different responses")
	}
	if !reflect.DeepEqual(p1, p2) || !reflect.DeepEqual(f1, f2) {
		t.Fatal("same script, same request, different responses (a restarted process would diverge)")
	}
	// The request is not modified.
	if len(req.Messages) != 1 || req.Messages[0].Content != "hi" {
		t.Fatalf("request changed: %+v", req.Messages)
	}
}

func TestRepeatAndDefaultToolCallIDs(t *testing.T) {
	t.Parallel()
	m := mustParse(t, "r.yaml", "turns:\n  - tool_calls: [{name: clock}, {name: calc, arguments: '{\"x\": 2}'}]\n    repeat: 3\n  - text: done\n")
	conv := []llm.Message{user("go")}
	for p := range 3 {
		got := final(t, m, request(conv...))
		want := []steptype.ToolCall{
			{ID: "call_" + itoa(p) + "_0", Name: "clock", Arguments: []byte("{}")},
			{ID: "call_" + itoa(p) + "_1", Name: "calc", Arguments: []byte(`{"x":2}`)},
		}
		if got.FinishReason != "tool_calls" || !reflect.DeepEqual(got.ToolCalls, want) {
			t.Fatalf("position %d: got %+v (%s)", p, got.ToolCalls, got.FinishReason)
		}
		conv = append(conv, llm.Message{Role: steptype.RoleAssistant, ToolCalls: got.ToolCalls},
			toolResult(want[0].ID, "now"), toolResult(want[1].ID, "2"))
	}
	if got := final(t, m, request(conv...)); got.Content != "done" || len(got.ToolCalls) != 0 {
		t.Fatalf("after the repeats: got %+v", got)
	}
}

func TestLoopCycles(t *testing.T) {
	t.Parallel()
	m := mustParse(t, "l.yaml", "loop: true\nturns:\n  - text: a\n    repeat: 2\n  - b\n")
	var got []string
	var conv []llm.Message
	for range 7 {
		c := final(t, m, request(conv...)).Content
		got = append(got, c)
		conv = append(conv, assistant(c))
	}
	if want := []string{"a", "a", "b", "a", "a", "b", "a"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestLoopConstructor(t *testing.T) {
	t.Parallel()
	m := scripted.Loop("calc", `{"x":1}`, 2, "finished")
	if m.Name() != "scripted:loop" || m.Provider() != "scripted" {
		t.Fatalf("Name %q Provider %q", m.Name(), m.Provider())
	}
	conv := []llm.Message{user("go")}
	for p := range 2 {
		parts, f, err := call(t, m, request(conv...))
		if err != nil || len(f.ToolCalls) != 1 || f.ToolCalls[0].Name != "calc" || string(f.ToolCalls[0].Arguments) != `{"x":1}` {
			t.Fatalf("call %d: %+v, %v", p, f, err)
		}
		if len(parts) != 1 || parts[0].ToolCallDeltas[0].Arguments != `{"x":1}` {
			t.Fatalf("call %d: want one delta with the whole arguments, got %+v", p, parts)
		}
		conv = append(conv, llm.Message{Role: steptype.RoleAssistant, ToolCalls: f.ToolCalls}, toolResult(f.ToolCalls[0].ID, "1"))
	}
	if f := final(t, m, request(conv...)); f.Content != "finished" {
		t.Fatalf("final: %+v", f)
	}
	if f := final(t, scripted.Loop("x", "", 0, "only"), request(user("go"))); f.Content != "only" {
		t.Fatalf("n=0: %+v", f)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Loop with invalid JSON args did not panic")
		}
	}()
	scripted.Loop("x", "{", 1, "")
}

func TestUserTurnsMatchAndOrder(t *testing.T) {
	t.Parallel()
	m, err := scripted.Load("testdata/chat.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if m.Name() != "scripted:chat" {
		t.Fatalf("Name = %q", m.Name())
	}
	conv := []llm.Message{user("hi")}
	step := func(want string) *llm.Response {
		t.Helper()
		f := final(t, m, request(conv...))
		if f.Content != want {
			t.Fatalf("after %q: got %q, want %q", conv[len(conv)-1].Content, f.Content, want)
		}
		conv = append(conv, llm.Message{Role: steptype.RoleAssistant, Content: f.Content, ToolCalls: f.ToolCalls})
		return f
	}
	step("Hello! Ask me about the weather.")
	conv = append(conv, user("what's the weather in Paris?"))
	f := step("")
	if len(f.ToolCalls) != 1 || f.ToolCalls[0].Name != "http_get" || f.ToolCalls[0].ID != "call_1_0" {
		t.Fatalf("weather turn: %+v", f.ToolCalls)
	}
	conv = append(conv, toolResult("call_1_0", "Paris: sunny"))
	step("It is sunny in Paris.")
	// Matched messages do not use up the entries without match.
	conv = append(conv, user("thanks"))
	step("You are welcome.")
	conv = append(conv, user("and the weather tomorrow?"))
	f = step("")
	if len(f.ToolCalls) != 1 || f.ToolCalls[0].ID != "call_4_0" {
		t.Fatalf("second weather turn: %+v", f.ToolCalls)
	}
	conv = append(conv, toolResult("call_4_0", "rain"))
	step("It is sunny in Paris.")
	step(scripted.ExhaustedText) // past the end of the matched entry
	conv = append(conv, user("bye"))
	step(scripted.ExhaustedText) // no third entry without match
}

func TestUserTurnsLoop(t *testing.T) {
	t.Parallel()
	m := mustParse(t, "u.yaml", "loop: true\nuser_turns:\n  - turns: [one]\n  - turns: [two]\n    loop: true\n")
	var conv []llm.Message
	var got []string
	for i := range 5 {
		conv = append(conv, user("msg "+itoa(i)))
		c := final(t, m, request(conv...)).Content
		got = append(got, c)
		conv = append(conv, assistant(c))
	}
	// A second call within the entry that loops repeats its only turn.
	got = append(got, final(t, m, request(conv...)).Content)
	if want := []string{"one", "two", "one", "two", "one", scripted.ExhaustedText}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	conv = append(conv, user("x"))
	conv = append(conv, assistant("two"))
	if c := final(t, m, request(conv...)).Content; c != "two" {
		t.Fatalf("looping entry: got %q", c)
	}
}

func TestMatchGuard(t *testing.T) {
	t.Parallel()
	m := mustParse(t, "g.yaml", "turns:\n  - text: ok\n    match: order\n")
	if f := final(t, m, request(user("my order #12"))); f.Content != "ok" {
		t.Fatalf("got %+v", f)
	}
	for _, req := range []*llm.Request{request(user("hello")), request()} {
		_, _, err := call(t, m, req)
		var le *llm.Error
		if !errors.As(err, &le) || le.Code != "script_mismatch" || le.Class != steptype.ErrorPermanent {
			t.Fatalf("got %v, want a permanent script_mismatch", err)
		}
		if want := `turns[0] (line 2) expects the last user message to contain "order"`; !contains(le.Message, want) {
			t.Fatalf("message %q lacks %q", le.Message, want)
		}
	}
}

func TestEmptyRequest(t *testing.T) {
	t.Parallel()
	m := scripted.New("x", scripted.Script{Turns: []scripted.Turn{{Text: "hi"}}})
	if f := final(t, m, nil); f.Content != "hi" {
		t.Fatalf("nil request: %+v", f)
	}
	g := scripted.New("g", scripted.Script{UserTurns: []scripted.UserTurn{{Turns: []scripted.Turn{{Text: "g"}}}}})
	if f := final(t, g, request()); f.Content != "g" {
		t.Fatalf("grouped, no messages: %+v", f)
	}
}
