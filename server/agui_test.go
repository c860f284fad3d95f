package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// aguiDeps is the npm package with @ag-ui/client and @ag-ui/core.
var aguiDeps = filepath.Join("..", "internal", "testdeps", "agui")

// aguiTurn is what the node script printed for one turn.
type aguiTurn struct {
	Events      []map[string]any
	Summary     map[string]any
	ClientError string
}

// runAGUI runs internal/testdeps/agui/run-agent.mjs with the real
// @ag-ui/client HttpAgent against url. The script validates every event
// with @ag-ui/core's schemas and fails on any violation. The test is
// skipped when node or the npm packages are missing, unless
// STEPWISE_REQUIRE_NPM=1.
func runAGUI(t *testing.T, url string, scenario map[string]any) []*aguiTurn {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(aguiDeps, "node_modules", "@ag-ui", "client", "package.json"))
	}
	if err != nil {
		msg := "AG-UI test dependencies missing (" + err.Error() + "); install them with: npm ci --prefix internal/testdeps/agui"
		if os.Getenv("STEPWISE_REQUIRE_NPM") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "run-agent.mjs")
	cmd.Dir = aguiDeps
	cmd.Env = append(os.Environ(), "AGUI_URL="+url, "AGUI_SCENARIO="+mustJSON(t, scenario), "SUPPRESS_TRANSFORMATION_WARNINGS=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var turns []*aguiTurn
	var problems []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var line struct {
			Turn        int             `json:"turn"`
			Event       map[string]any  `json:"event"`
			Summary     map[string]any  `json:"summary"`
			Error       string          `json:"error"`
			ClientError string          `json:"client_error"`
			HTTPError   int             `json:"http_error"`
			Body        json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("node output %q: %v", sc.Text(), err)
		}
		for len(turns) < line.Turn {
			turns = append(turns, &aguiTurn{})
		}
		tr := turns[line.Turn-1]
		switch {
		case line.Event != nil:
			tr.Events = append(tr.Events, line.Event)
		case line.Summary != nil:
			tr.Summary = line.Summary
		case line.ClientError != "":
			tr.ClientError = line.ClientError
		case line.Error != "":
			problems = append(problems, line.Error)
		case line.HTTPError != 0:
			problems = append(problems, "HTTP "+string(line.Body))
		}
	}
	if err != nil || len(problems) > 0 {
		t.Fatalf("node: %v\nproblems: %s\nstderr: %s\nstdout: %s", err, strings.Join(problems, "\n"), stderr.String(), out)
	}
	return turns
}

func eventTypes(evs []map[string]any) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e["type"].(string))
	}
	return out
}

// collapse removes repeats of content events, for readable comparisons.
func collapse(types []string) string {
	var out []string
	for _, ty := range types {
		if len(out) > 0 && out[len(out)-1] == ty && strings.HasSuffix(ty, "_CONTENT") || len(out) > 0 && out[len(out)-1] == ty && ty == "TOOL_CALL_ARGS" {
			continue
		}
		out = append(out, ty)
	}
	return strings.Join(out, " ")
}

func findEvent(evs []map[string]any, typ string) map[string]any {
	for _, e := range evs {
		if e["type"] == typ {
			return e
		}
	}
	return nil
}

// counterAgent counts its runs in the state, then calls echo once. Its
// model takes a few milliseconds per delta, as real ones do, so the stream
// is live (a run that ends before the request subscribes is replayed from
// the store instead, complete but not streamed).
func counterAgent() *stepwise.Agent {
	a := toolAgent("counter", 1, 3*time.Millisecond)
	a.StartStep = "count"
	a.Steps = map[string]stepwise.Handler{"count": stepwise.StepFunc(func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
		return &stepwise.Next{Step: stepwise.StepLLM, State: map[string]any{"counted": true}}, nil
	})}
	return a
}

func TestAGUIToolsStateAndText(t *testing.T) {
	t.Parallel()
	env := newEnv(t, []*stepwise.Agent{counterAgent()})
	turns := runAGUI(t, env.ts.URL+"/v1/agui/counter", map[string]any{
		"threadId": "thread-tools",
		"turns":    []any{map[string]any{"message": "hi", "state": map[string]any{"ui": "x"}}, map[string]any{"message": "again"}},
	})
	if len(turns) != 2 {
		t.Fatalf("%d turns", len(turns))
	}
	got := collapse(eventTypes(turns[0].Events))
	want := "RUN_STARTED STATE_SNAPSHOT STEP_STARTED STATE_DELTA STEP_FINISHED " +
		"STEP_STARTED REASONING_START REASONING_MESSAGE_START REASONING_MESSAGE_CONTENT REASONING_MESSAGE_END REASONING_END " +
		"TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END STEP_FINISHED " +
		"STEP_STARTED TOOL_CALL_RESULT STEP_FINISHED " +
		"STEP_STARTED TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END STEP_FINISHED RUN_FINISHED"
	if got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	evs := turns[0].Events
	if rs := evs[0]; rs["threadId"] != "thread-tools" || rs["runId"] == "" {
		t.Fatalf("RUN_STARTED %v", rs)
	}
	if snap := evs[1]["snapshot"].(map[string]any); snap["ui"] != "x" {
		t.Fatalf("initial state %v", evs[1])
	}
	if delta, _ := json.Marshal(evs[3]["delta"]); string(delta) != `[{"op":"add","path":"/counted","value":true}]` {
		t.Fatalf("state delta of count %v", evs[3])
	}
	// The client applied the delta to the snapshot.
	if st, _ := json.Marshal(turns[0].Summary["state"]); string(st) != `{"counted":true,"ui":"x"}` {
		t.Fatalf("client state %s", st)
	}
	start, result := findEvent(evs, "TOOL_CALL_START"), findEvent(evs, "TOOL_CALL_RESULT")
	if start["toolCallName"] != "echo" || result["toolCallId"] != start["toolCallId"] || result["content"] != `echo {"n":1}` {
		t.Fatalf("tool call %v → %v", start, result)
	}
	var args strings.Builder
	for _, e := range evs {
		if e["type"] == "TOOL_CALL_ARGS" {
			args.WriteString(e["delta"].(string))
		}
	}
	if args.String() != `{"n":1}` {
		t.Fatalf("streamed arguments %q", args.String())
	}
	fin := evs[len(evs)-1]
	if fin["result"] != "done" || fin["outcome"].(map[string]any)["type"] != "success" {
		t.Fatalf("RUN_FINISHED %v", fin)
	}
	// The client assembled the messages: user, assistant with the tool
	// call, tool result, final assistant text.
	msgs := turns[0].Summary["messages"].([]any)
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m.(map[string]any)["role"].(string))
	}
	if strings.Join(roles, ",") != "user,reasoning,assistant,tool,assistant" {
		t.Fatalf("messages %v", roles)
	}
	// The second turn ran in the same session, after the first.
	sess, err := env.c.Session(context.Background(), "thread-tools")
	if err != nil || sess.LastSequence != 8 { // 5 steps, then user, count and an exhausted-script reply

		t.Fatalf("session %+v %v", sess, err)
	}
	if sess.Title != "hi" { // the thread is named after its first message
		t.Fatalf("thread title %q", sess.Title)
	}
	if got := collapse(eventTypes(turns[1].Events)); !strings.HasPrefix(got, "RUN_STARTED STATE_SNAPSHOT") || !strings.Contains(got, "TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END") || !strings.HasSuffix(got, "RUN_FINISHED") {
		t.Fatalf("second turn %s", got)
	}
}

func TestAGUIInterruptAndResume(t *testing.T) {
	t.Parallel()
	env := newEnv(t, []*stepwise.Agent{askAgent("asker"), approvalAgent("ops")})
	turns := runAGUI(t, env.ts.URL+"/v1/agui/asker", map[string]any{
		"threadId": "thread-ask",
		"turns": []any{
			map[string]any{"message": "hi"},
			map[string]any{"resume": map[string]any{"status": "resolved", "payload": "Ada"}},
		},
	})
	fin := turns[0].Events[len(turns[0].Events)-1]
	out := fin["outcome"].(map[string]any)
	ints := out["interrupts"].([]any)
	in := ints[0].(map[string]any)
	if fin["type"] != "RUN_FINISHED" || out["type"] != "interrupt" || len(ints) != 1 || in["reason"] != "input_required" ||
		in["message"] != "What is your name?" || in["toolCallId"] != "ask1" || in["responseSchema"].(map[string]any)["type"] != "string" {
		t.Fatalf("interrupt %v", fin)
	}
	if p := turns[0].Summary["pendingInterrupts"].([]any); len(p) != 1 {
		t.Fatalf("client pending interrupts %v", p)
	}
	evs := turns[1].Events
	got := collapse(eventTypes(evs))
	// The resumed run's step events are live when the stream subscribes
	// before the model step commits (any real model); with this instant
	// model the step may already be committed, and then the translator
	// completes the message from the committed step.
	// The answer is the result of the tools step, framed by its STEP_STARTED.
	if !strings.HasPrefix(got, "RUN_STARTED STATE_SNAPSHOT STEP_STARTED TOOL_CALL_RESULT STEP_FINISHED") || !strings.Contains(got, "TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END") || !strings.HasSuffix(got, "RUN_FINISHED") {
		t.Fatalf("resumed run: %s", got)
	}
	tools := 0
	for _, e := range evs {
		if e["type"] == "STEP_STARTED" && e["stepName"] == "tools" {
			tools++
		}
	}
	if tools != 1 {
		t.Fatalf("the tools step is framed %d times in the resumed run: %s", tools, got)
	}
	var text strings.Builder
	for _, e := range evs {
		if e["type"] == "TEXT_MESSAGE_CONTENT" {
			text.WriteString(e["delta"].(string))
		}
	}
	if text.String() != "Nice to meet you." {
		t.Fatalf("resumed text %q", text.String())
	}
	if r := findEvent(evs, "TOOL_CALL_RESULT"); r["toolCallId"] != "ask1" || r["content"] != "Ada" {
		t.Fatalf("answer as tool result: %v", r)
	}
	if f := evs[len(evs)-1]; f["result"] != "Nice to meet you." {
		t.Fatalf("final %v", f)
	}
	if p := turns[1].Summary["pendingInterrupts"].([]any); len(p) != 0 {
		t.Fatalf("pending after resume %v", p)
	}

	// Approvals: a cancelled interrupt is a rejection; a bad payload is a
	// RUN_ERROR and changes nothing.
	turns = runAGUI(t, env.ts.URL+"/v1/agui/ops", map[string]any{
		"threadId": "thread-ops",
		"turns": []any{
			map[string]any{"message": "delete 7"},
			map[string]any{"resume": map[string]any{"status": "resolved", "payload": map[string]any{"approved": "yes"}}, "expectError": true},
			map[string]any{"resume": map[string]any{"status": "resolved", "payload": map[string]any{"approved": true}}},
		},
	})
	in = turns[0].Events[len(turns[0].Events)-1]["outcome"].(map[string]any)["interrupts"].([]any)[0].(map[string]any)
	if in["reason"] != "tool_approval" || in["toolCallId"] != "del1" || in["responseSchema"].(map[string]any)["type"] != "object" {
		t.Fatalf("approval interrupt %v", in)
	}
	bad := turns[1].Events
	if got := collapse(eventTypes(bad)); got != "RUN_STARTED STATE_SNAPSHOT RUN_ERROR" || bad[2]["code"] != CodeInvalidAnswer {
		t.Fatalf("bad resume: %s %v %q", got, bad, turns[1].ClientError)
	}
	good := turns[2].Events
	if r := findEvent(good, "TOOL_CALL_RESULT"); r == nil || r["content"] != "deleted" {
		t.Fatalf("approved call: %v", eventTypes(good))
	}
	if f := good[len(good)-1]; f["result"] != "All done." {
		t.Fatalf("final %v", f)
	}
	if r, err := env.c.Session(context.Background(), "thread-ops"); err != nil || r.Agent != "ops" {
		t.Fatalf("session %+v %v", r, err)
	}
}

func TestAGUIRunError(t *testing.T) {
	t.Parallel()
	failing := &stepwise.Agent{Name: "broken", Model: scripted.New("broken", scripted.Script{Strict: true, Turns: []scripted.Turn{{Fail: &scripted.Failure{Status: 400, Message: "context too long"}}}})}
	env := newEnv(t, []*stepwise.Agent{failing})
	turns := runAGUI(t, env.ts.URL+"/v1/agui/broken", map[string]any{
		"threadId": "thread-err",
		"turns":    []any{map[string]any{"message": "hi", "expectError": true}},
	})
	evs := turns[0].Events
	last := evs[len(evs)-1]
	if last["type"] != "RUN_ERROR" || !strings.Contains(last["message"].(string), "context too long") || last["code"] != "bad_request" {
		t.Fatalf("events %v, client error %q", eventTypes(evs), turns[0].ClientError)
	}
	if findEvent(evs, "CUSTOM") == nil {
		t.Fatalf("no error step event in %v", eventTypes(evs))
	}
}

// TestAGUIRequests checks what is refused before streaming.
func TestAGUIRequests(t *testing.T) {
	t.Parallel()
	env := newEnv(t, []*stepwise.Agent{chatAgent("chat", "hi"), askAgent("asker"), toolAgent("tooler", 1, 0)})
	env.problem(404, CodeUnknownAgent, "POST", "/v1/agui/ghost", `{"threadId":"t","runId":"r","messages":[]}`)
	// A frontend tool whose name clashes with the agent's is refused and
	// leaves no session behind.
	env.problem(422, CodeInvalidArgument, "POST", "/v1/agui/tooler", `{"threadId":"clash","runId":"r","messages":[{"id":"1","role":"user","content":"x"}],"tools":[{"name":"echo"}]}`)
	if _, err := env.eng.Store().SessionGet(context.Background(), &store.SessionGetParams{ID: "clash"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("session of the refused request: %v, want none", err)
	}
	env.problem(400, CodeInvalidJSON, "POST", "/v1/agui/chat", `{"threadId":"t","runId":"r","messages":[],"extra":1}`)
	env.problem(400, CodeInvalidParam, "POST", "/v1/agui/chat", `{"runId":"r","messages":[]}`)
	env.problem(422, CodeInvalidArgument, "POST", "/v1/agui/chat", `{"threadId":"t","runId":"r","messages":[{"id":"1","role":"assistant","content":"x"}]}`)
	env.problem(422, CodeInvalidArgument, "POST", "/v1/agui/chat", `{"threadId":"t","runId":"r","messages":[{"id":"1","role":"user","content":"x"}],"state":[1]}`)
	env.problem(422, CodeInvalidArgument, "POST", "/v1/agui/chat", `{"threadId":"t","runId":"r","messages":[],"resume":[{"interruptId":"x","status":"maybe"}]}`)
	env.problem(404, CodeNotFound, "POST", "/v1/agui/chat", `{"threadId":"nope","runId":"r","messages":[],"resume":[{"interruptId":"x","status":"resolved"}]}`)
	// A thread belongs to its agent.
	sid := finishedSession(t, env, "chat", "one")
	env.problem(409, CodeConflict, "POST", "/v1/agui/asker", `{"threadId":"`+sid+`","runId":"r","messages":[{"id":"1","role":"user","content":"x"}]}`)
	// A thread with a pending interrupt wants a resume, not a new message.
	status, body := env.call("POST", "/v1/agui/asker", `{"threadId":"th","runId":"r1","messages":[{"id":"1","role":"user","content":[{"type":"text","text":"hi"}]}]}`)
	if status != 200 || !strings.Contains(string(body), `"type":"interrupt"`) {
		t.Fatalf("first run: %d %s", status, body)
	}
	env.problem(409, CodeConflict, "POST", "/v1/agui/asker", `{"threadId":"th","runId":"r2","messages":[{"id":"2","role":"user","content":"hello?"}]}`)
	status, body = env.call("POST", "/v1/agui/asker", `{"threadId":"th","runId":"r3","messages":[],"resume":[{"interruptId":"unknown","status":"resolved","payload":"x"}]}`)
	if status != 200 || !strings.Contains(string(body), `"RUN_ERROR"`) || !strings.Contains(string(body), CodeAlreadyAnswered) {
		t.Fatalf("unknown interrupt: %d %s", status, body)
	}
	if r := env.waitRun(mustRunOf(t, env, "th"), steptype.RunWaiting); r.Status != steptype.RunWaiting {
		t.Fatalf("run changed: %+v", r)
	}
}

func mustRunOf(t *testing.T, env *testEnv, sessionID string) string {
	t.Helper()
	sum, err := env.eng.Pending(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range sum {
		if p.SessionID == sessionID {
			return p.RunID
		}
	}
	t.Fatalf("no pending request in %s", sessionID)
	return ""
}

// TestAGUIStreamReset: a provider stream cut mid-message and retried. The
// real @ag-ui/client (which verifies event order) sees the partial text
// message ended, a CUSTOM "stepwise.reset" event naming it, and the retry's
// text in a new message.
func TestAGUIStreamReset(t *testing.T) {
	t.Parallel()
	m := scripted.New("cut", scripted.Script{Turns: []scripted.Turn{{Text: "Hello there, friend", Chunk: 5, Fail: &scripted.Failure{Status: 503, Times: 1, After: 10}}}})
	a := &stepwise.Agent{Name: "cut", Model: m, Retry: stepwise.RetryPolicy{MaxAttempts: 2, InitialInterval: 1, MaxInterval: 1}}
	env := newEnv(t, []*stepwise.Agent{a})
	turns := runAGUI(t, env.ts.URL+"/v1/agui/cut", map[string]any{
		"threadId": "thread-cut",
		"turns":    []any{map[string]any{"message": "hi"}},
	})
	// The stream subscribes after the run was queued: when the failed
	// attempt ran before that, its deltas (and so its reset) are not
	// replayed; either way the client must end with exactly the final text.
	evs := turns[0].Events
	msgs := map[string]string{}
	var order []string
	voided := map[string]bool{}
	for _, ev := range evs {
		switch ev["type"] {
		case "CUSTOM":
			if ev["name"] == "stepwise.reset" {
				v := ev["value"].(map[string]any)
				if v["retrying"] != true || v["attempt"] != float64(1) {
					t.Fatalf("reset %v", v)
				}
				for _, id := range v["message_ids"].([]any) {
					voided[id.(string)] = true
				}
			}
		case "TEXT_MESSAGE_CONTENT":
			id := ev["messageId"].(string)
			if _, ok := msgs[id]; !ok {
				order = append(order, id)
			}
			msgs[id] += ev["delta"].(string)
		}
	}
	var kept []string
	for _, id := range order {
		if !voided[id] {
			kept = append(kept, msgs[id])
		} else if msgs[id] != "Hello ther" {
			t.Fatalf("reset voided %q", msgs[id])
		}
	}
	t.Logf("partial attempt streamed: %v", len(voided) > 0)
	if strings.Join(kept, "|") != "Hello there, friend" {
		t.Fatalf("messages a front end keeps: %q (events %v)", kept, eventTypes(evs))
	}
}

// TestAGUIStateDelta: a state patch that changes a nested value, removes
// keys (merge-patch nulls), adds a list and touches a key that needs
// escaping in a JSON Pointer reaches the client as one STATE_DELTA (JSON
// Patch, RFC 6902) that the real client applies to the run's snapshot,
// giving the run's own state.
func TestAGUIStateDelta(t *testing.T) {
	t.Parallel()
	patch := stepwise.StepFunc(func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
		return &stepwise.Next{Step: stepwise.StepEnd, Output: "patched", State: map[string]any{
			"a": map[string]any{"b": 2, "c": nil}, "gone": nil, "list": []any{1, 2}, "weird/key~": "y", "n": nil,
		}}, nil
	})
	env := newEnv(t, []*stepwise.Agent{{Name: "patcher", StartStep: "patch", Steps: map[string]stepwise.Handler{"patch": patch}}})
	turns := runAGUI(t, env.ts.URL+"/v1/agui/patcher", map[string]any{
		"threadId": "thread-delta",
		"turns": []any{map[string]any{"message": "go", "state": map[string]any{
			"a": map[string]any{"b": 1, "c": 3}, "gone": true, "keep": 1, "weird/key~": "x",
		}}},
	})
	if len(turns) != 1 {
		t.Fatalf("%d turns", len(turns))
	}
	evs := turns[0].Events
	if got := collapse(eventTypes(evs)); got != "RUN_STARTED STATE_SNAPSHOT STEP_STARTED STATE_DELTA STEP_FINISHED RUN_FINISHED" {
		t.Fatalf("events %s", got)
	}
	delta, _ := json.Marshal(findEvent(evs, "STATE_DELTA")["delta"])
	want := `[{"op":"replace","path":"/a/b","value":2},{"op":"remove","path":"/a/c"},{"op":"remove","path":"/gone"},` +
		`{"op":"add","path":"/list","value":[1,2]},{"op":"replace","path":"/weird~1key~0","value":"y"}]`
	if string(delta) != want {
		t.Fatalf("delta\n got %s\nwant %s", delta, want)
	}
	client, _ := json.Marshal(turns[0].Summary["state"])
	if string(client) != `{"a":{"b":2},"keep":1,"list":[1,2],"weird/key~":"y"}` {
		t.Fatalf("client state %s", client)
	}
}
