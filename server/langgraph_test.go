package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/tool"
)

// lgDetail sends a LangGraph request that must fail and checks its status
// and {"detail": ...} body.
func (e *testEnv) lgDetail(wantStatus int, wantDetail, method, path, body string, hdr ...string) {
	e.t.Helper()
	status, data := e.call(method, langGraphPrefix+path, body, hdr...)
	var d map[string]any
	if err := json.Unmarshal(data, &d); err != nil || len(d) != 1 {
		e.t.Errorf("%s %s: status %d, body %q is not {\"detail\": ...}", method, path, status, data)
		return
	}
	detail, _ := d["detail"].(string)
	if status != wantStatus || !strings.Contains(detail, wantDetail) {
		e.t.Errorf("%s %s %s: got %d %q, want %d and %q", method, path, body, status, detail, wantStatus, wantDetail)
	}
}

func (e *testEnv) lgCall(method, path, body string) map[string]any {
	e.t.Helper()
	status, data := e.call(method, langGraphPrefix+path, body)
	if status != 200 {
		e.t.Fatalf("%s %s: %d %s", method, path, status, data)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		e.t.Fatalf("%s %s: %q: %v", method, path, data, err)
	}
	return out
}

// TestLangGraphBadInput sends the LangGraph endpoints malformed and
// invalid requests and wrong ids: each gets its status and a detail saying
// what is wrong, and none changes anything.
func TestLangGraphBadInput(t *testing.T) {
	t.Parallel()
	env := newEnv(t, []*stepwise.Agent{chatAgent("chat", "hello"), askAgent("asker")})
	thread := env.lgCall("POST", "/threads", `{"metadata":{"graph_id":"chat","user":"ada"}}`)["thread_id"].(string)
	tp := "/threads/" + thread
	hi := `"input":{"messages":[{"role":"user","content":"hi"}]}`
	cases := []struct {
		status       int
		detail       string
		method, path string
		body         string
	}{
		{400, "truncated JSON", "POST", "/threads", `{`},
		{400, "malformed JSON", "POST", "/threads", `{]`},
		{400, "unknown field", "POST", "/threads", `{"thread":"x"}`},
		{404, `assistant "ghost" not found`, "POST", "/threads", `{"metadata":{"graph_id":"ghost"}}`},
		{400, "thread_id", "POST", "/threads", `{"thread_id":"a b"}`},
		{409, "already exists", "POST", "/threads", `{"thread_id":"` + thread + `"}`},
		{422, "if_exists", "POST", "/threads", `{"if_exists":"maybe"}`},
		{422, "ttl", "POST", "/threads", `{"ttl":{"ttl":5}}`},
		{422, "supersteps", "POST", "/threads", `{"supersteps":[]}`},
		{422, "limit", "POST", "/threads/search", `{"limit":0}`},
		{422, "status", "POST", "/threads/search", `{"status":"sleepy"}`},
		{422, "values", "POST", "/threads/search", `{"values":{"a":1}}`},
		{422, "sort_by", "POST", "/threads/search", `{"sort_by":"mood"}`},
		{422, "sort_order", "POST", "/threads/search", `{"sort_order":"up"}`},
		{422, "", "POST", "/threads/search", `{"metadata":{"a":{"b":1}}}`},
		{400, "metadata", "PATCH", tp, `{"metadata":5}`},
		{404, "thread nope not found", "GET", "/threads/nope", ""},
		{404, "thread nope not found", "PATCH", "/threads/nope", `{"metadata":{"a":1}}`},
		{404, "thread nope not found", "DELETE", "/threads/nope", ""},
		{404, "thread nope not found", "POST", "/threads/nope/copy", ""},
		{404, "checkpoint nope not found", "GET", tp + "/state/nope", ""},
		{422, "checkpoint_id is required", "POST", tp + "/state/checkpoint", `{"checkpoint":{}}`},
		{404, "checkpoint nope not found", "POST", tp + "/history", `{"before":{"checkpoint_id":"nope"}}`},
		{422, "values must be a JSON object", "POST", tp + "/state", `{"values":3}`},
		{422, "values.messages", "POST", tp + "/state", `{"values":{"messages":[]}}`},
		{404, "run nope not found", "GET", tp + "/runs/nope", ""},
		{404, "run nope not found", "GET", tp + "/runs/nope/join", ""},
		{404, "run nope not found", "POST", tp + "/runs/nope/cancel", ""},
		{404, "assistant \"ghost\" not found", "GET", "/assistants/ghost", ""},
		{422, "limit", "POST", "/assistants/search", `{"limit":5000}`},
		{422, "assistant_id is required", "POST", tp + "/runs/wait", `{` + hi + `}`},
		{404, `assistant "ghost" not found`, "POST", tp + "/runs/wait", `{"assistant_id":"ghost",` + hi + `}`},
		{409, "belongs to assistant", "POST", tp + "/runs/wait", `{"assistant_id":"asker",` + hi + `}`},
		{422, "input is required", "POST", tp + "/runs", `{"assistant_id":"chat"}`},
		{422, "only human", "POST", tp + "/runs", `{"assistant_id":"chat","input":{"messages":[{"role":"ai","content":"x"}]}}`},
		{422, "input must be an object", "POST", tp + "/runs", `{"assistant_id":"chat","input":"hi"}`},
		{422, "no human message", "POST", tp + "/runs", `{"assistant_id":"chat","input":{}}`},
		{422, "content", "POST", tp + "/runs", `{"assistant_id":"chat","input":{"messages":[{"role":"user","content":7}]}}`},
		{422, `stream_mode "debug" is not supported`, "POST", tp + "/runs/stream", `{"assistant_id":"chat",` + hi + `,"stream_mode":"debug"}`},
		{422, "unknown stream_mode", "POST", tp + "/runs/stream", `{"assistant_id":"chat",` + hi + `,"stream_mode":["values","nope"]}`},
		{422, "multitask_strategy", "POST", tp + "/runs", `{"assistant_id":"chat",` + hi + `,"multitask_strategy":"yolo"}`},
		{422, "webhook", "POST", tp + "/runs", `{"assistant_id":"chat",` + hi + `,"webhook":"http://example.com/"}`},
		{422, "interrupt_before", "POST", tp + "/runs", `{"assistant_id":"chat",` + hi + `,"interrupt_before":["llm"]}`},
		{422, "if_not_exists", "POST", tp + "/runs", `{"assistant_id":"chat",` + hi + `,"if_not_exists":"maybe"}`},
		{422, "on_disconnect", "POST", tp + "/runs", `{"assistant_id":"chat",` + hi + `,"on_disconnect":"explode"}`},
		{422, "input or command, not both", "POST", tp + "/runs", `{"assistant_id":"chat",` + hi + `,"command":{"resume":"x"}}`},
		{422, "command.update", "POST", tp + "/runs", `{"assistant_id":"chat","command":{"resume":"x","goto":"llm"}}`},
		{422, "command.resume is required", "POST", tp + "/runs", `{"assistant_id":"chat","command":{}}`},
		{409, "no interrupt to resume", "POST", tp + "/runs", `{"assistant_id":"chat","command":{"resume":"x"}}`},
		{404, "checkpoint nope not found", "POST", tp + "/runs", `{"assistant_id":"chat",` + hi + `,"checkpoint_id":"nope"}`},
		{400, "unknown field", "POST", tp + "/runs", `{"assistant_id":"chat",` + hi + `,"surprise":1}`},
		{400, "malformed JSON", "POST", tp + "/runs/stream", `{"assistant_id":]`},
		{404, "thread nope not found", "POST", "/threads/nope/runs/wait", `{"assistant_id":"chat",` + hi + `}`},
		// Refused after a thread was made for them: it goes again.
		{422, "input must be an object", "POST", "/runs/wait", `{"assistant_id":"chat","input":"hi"}`},
		{422, "input must be an object", "POST", "/threads/fresh/runs/stream", `{"assistant_id":"chat","input":"hi","if_not_exists":"create"}`},
		{422, "input is required", "POST", "/runs/stream", `{"assistant_id":"chat"}`},
	}
	for _, c := range cases {
		env.lgDetail(c.status, c.detail, c.method, c.path, c.body)
	}
	env.lgDetail(415, "Content-Type", "POST", "/threads", `{}`, "Content-Type", "text/plain")

	// Nothing changed: one session (the thread), no run, no step, its
	// metadata as created.
	ctx := context.Background()
	page, err := env.store.SessionList(ctx, &store.SessionListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Sessions) != 1 || page.Sessions[0].ID != thread || page.Sessions[0].LastSequence != 0 {
		t.Errorf("sessions after refused requests: %+v", page.Sessions)
	}
	if runs, err := env.store.RunList(ctx, &store.RunListParams{}); err != nil || len(runs) != 0 {
		t.Errorf("runs after refused requests: %v %v", runs, err)
	}
	got := env.lgCall("GET", tp, "")
	if md := got["metadata"].(map[string]any); md["user"] != "ada" || len(md) != 2 {
		t.Errorf("metadata after refused requests: %v", md)
	}
}

// TestLangGraphResumeRefused resumes an interrupt with an answer the
// request refuses (an approval answered "maybe"): 422, and the run still
// waits; a good answer then finishes it.
func TestLangGraphResumeRefused(t *testing.T) {
	t.Parallel()
	env := newEnv(t, []*stepwise.Agent{approvalAgent("ops")})
	thread := env.lgCall("POST", "/threads", `{}`)["thread_id"].(string)
	tp := "/threads/" + thread
	out := env.lgCall("POST", tp+"/runs/wait", `{"assistant_id":"ops","input":{"messages":[{"role":"user","content":"clean up"}]}}`)
	ins, _ := out["__interrupt__"].([]any)
	if len(ins) != 1 {
		t.Fatalf("wait: %v", out)
	}
	value := ins[0].(map[string]any)["value"].(map[string]any)
	if value["kind"] != "approval" || value["tool"].(map[string]any)["name"] != "delete" {
		t.Errorf("interrupt value %v", value)
	}
	env.lgDetail(422, "is an approval of delete", "POST", tp+"/runs/wait", `{"assistant_id":"ops","command":{"resume":"maybe"}}`)
	env.lgDetail(422, "is an approval of delete", "POST", tp+"/runs/wait", `{"assistant_id":"ops","command":{"resume":{"ok":1}}}`)
	if st := env.lgCall("GET", tp, "")["status"]; st != "interrupted" {
		t.Errorf("after refused resumes the thread is %v", st)
	}
	idle := env.lgCall("POST", "/threads", `{}`)["thread_id"].(string) // an idle one
	for order, first := range map[string]string{"asc": thread, "desc": idle} {
		_, data := env.call("POST", langGraphPrefix+"/threads/search", `{"sort_by":"created_at","sort_order":"`+order+`"}`)
		if found := decode[[]map[string]any](t, data); len(found) != 2 || found[0]["thread_id"] != first {
			t.Errorf("search by created_at %s: %v", order, found)
		}
	}
	for status, want := range map[string]int{"interrupted": 1, "idle": 1, "busy": 0} {
		_, data := env.call("POST", langGraphPrefix+"/threads/search", `{"status":"`+status+`"}`)
		found := decode[[]map[string]any](t, data)
		if len(found) != want || (status == "interrupted" && found[0]["thread_id"] != thread) {
			t.Errorf("search status %s: %d threads, want %d", status, len(found), want)
		}
	}
	out = env.lgCall("POST", tp+"/runs/wait", `{"assistant_id":"ops","command":{"resume":true}}`)
	msgs := out["messages"].([]any)
	if last := msgs[len(msgs)-1].(map[string]any); last["content"] != "All done." || out["__interrupt__"] != nil {
		t.Errorf("after resume: %v", out)
	}
	runs, err := env.store.RunList(context.Background(), &store.RunListParams{SessionID: thread})
	if err != nil || len(runs) != 1 || runs[0].Status != steptype.RunCompleted {
		t.Errorf("runs %v %v: want the one run, completed", runs, err)
	}
}

// TestLangGraphAPIKey checks the x-api-key header: the server token on
// the LangGraph routes, nothing elsewhere.
func TestLangGraphAPIKey(t *testing.T) {
	t.Parallel()
	env := newEnv(t, []*stepwise.Agent{chatAgent("chat", "hello")}, withTokens("s3cret"))
	if status, body := env.call("POST", langGraphPrefix+"/assistants/search", `{}`, "X-Api-Key", "s3cret"); status != 200 || !strings.Contains(string(body), `"graph_id":"chat"`) {
		t.Errorf("with x-api-key: %d %s", status, body)
	}
	env.lgDetail(401, "token", "POST", "/assistants/search", `{}`, "X-Api-Key", "wrong")
	env.problem(401, CodeUnauthorized, "GET", "/v1/sessions", "", "X-Api-Key", "s3cret")
}

// counter is an agent of one custom step: it yields a tick and counts its
// runs in the custom state.
func counter() *stepwise.Agent {
	return &stepwise.Agent{Name: "counter", StartStep: "count", Steps: map[string]stepwise.Handler{
		"count": stepwise.StepFunc(func(_ context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
			var st struct {
				Count int    `json:"count"`
				Topic string `json:"topic"`
			}
			if err := s.DecodeState(&st); err != nil {
				return nil, err
			}
			if err := s.Yield("count.tick", map[string]any{"n": st.Count + 1, "topic": st.Topic}); err != nil {
				return nil, err
			}
			return &stepwise.Next{Step: stepwise.StepEnd, State: map[string]any{"count": st.Count + 1}, Output: "counted"}, nil
		}),
	}}
}

// lgEvents posts a streamed run and returns its SSE events (event, data).
func (e *testEnv) lgEvents(path, body string) [][2]string {
	e.t.Helper()
	resp, err := http.Post(e.ts.URL+langGraphPrefix+path, "application/json", strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		data, _ := io.ReadAll(resp.Body)
		e.t.Fatalf("%s: %d %s %s", path, resp.StatusCode, ct, data)
	}
	var out [][2]string
	var event string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			event = v
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok {
			out = append(out, [2]string{event, v})
		}
		if line == "" && event == "" {
			e.t.Errorf("%s: a blank line outside an event (the SDK reads an empty event)", path)
		}
		if line == "" {
			event = ""
		}
	}
	return out
}

// TestLangGraphCustomAndState streams a custom step: its yields are custom
// events, its state patch an update and part of the values; the input's
// other keys and updateState patch the state the next run starts from.
func TestLangGraphCustomAndState(t *testing.T) {
	t.Parallel()
	env := newEnv(t, []*stepwise.Agent{counter()})
	thread := env.lgCall("POST", "/threads", `{}`)["thread_id"].(string)
	tp := "/threads/" + thread
	evs := env.lgEvents(tp+"/runs/stream", `{"assistant_id":"counter","input":{"messages":[{"role":"user","content":"count"}],"topic":"sheep"},"stream_mode":["custom","updates","values"]}`)
	var kinds []string
	for _, ev := range evs {
		kinds = append(kinds, ev[0])
	}
	// metadata, the thread before, after the input, the step's yield, its
	// update, after it.
	want := []string{"metadata", "values", "values", "custom", "updates", "values"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("events %v, want %v: %v", kinds, want, evs)
	}
	if evs[3][1] != `{"data":{"n":1,"topic":"sheep"},"name":"count.tick"}` {
		t.Errorf("custom %s", evs[3][1])
	}
	if evs[4][1] != `{"count":{"count":1}}` {
		t.Errorf("updates %s", evs[4][1])
	}
	last := decode[map[string]any](t, []byte(evs[5][1]))
	if last["count"] != float64(1) || last["topic"] != "sheep" || len(last["messages"].([]any)) != 1 {
		t.Errorf("values %v", last)
	}
	upd := env.lgCall("POST", tp+"/state", `{"values":{"count":10}}`)
	if upd["checkpoint"].(map[string]any)["checkpoint_id"] == "" {
		t.Errorf("updateState %v", upd)
	}
	out := env.lgCall("POST", tp+"/runs/wait", `{"assistant_id":"counter","input":{"messages":[{"role":"user","content":"again"}]}}`)
	if out["count"] != float64(11) || out["topic"] != "sheep" {
		t.Errorf("second run's values %v, want count 11 (from the update), topic sheep", out)
	}
	hist := env.lgCall("GET", tp+"/state", "")
	if md := hist["metadata"].(map[string]any); md["step"] == nil {
		t.Errorf("state metadata %v", md)
	}
}

// TestLangGraphStreamParallelTools streams a run whose model asks for two
// tool calls at once (run under -race: the stream's writer, its
// subscription and the parallel tools are concurrent): the updates carry
// the calls and both results, messages-tuple the chunks, values the end.
func TestLangGraphStreamParallelTools(t *testing.T) {
	t.Parallel()
	echo := tool.Func(llm.ToolDef{Name: "echo", Parameters: json.RawMessage(`{"type":"object"}`)}, func(_ context.Context, c *tool.Call) (*tool.Result, error) {
		return &tool.Result{Content: "echo " + string(c.Arguments)}, nil
	})
	m := scripted.New("twice", scripted.Script{Strict: true, Turns: []scripted.Turn{
		{Text: "both", Chunk: 1, ToolCalls: []steptype.ToolCall{{ID: "a", Name: "echo", Arguments: json.RawMessage(`{"n":1}`)}, {ID: "b", Name: "echo", Arguments: json.RawMessage(`{"n":2}`)}}},
		{Text: "done", Chunk: 1},
	}})
	env := newEnv(t, []*stepwise.Agent{{Name: "twice", Model: m, Tools: []tool.Tool{echo}}})
	evs := env.lgEvents("/runs/stream", `{"assistant_id":"twice","input":{"messages":[{"role":"user","content":"go"}]},"stream_mode":["updates","messages-tuple","values"]}`)
	var calls, results []string
	var text strings.Builder
	var last map[string]any
	for _, ev := range evs {
		switch ev[0] {
		case "updates":
			u := decode[map[string]map[string][]map[string]any](t, []byte(ev[1]))
			for _, msg := range u["llm"]["messages"] {
				for _, c := range msg["tool_calls"].([]any) {
					calls = append(calls, c.(map[string]any)["id"].(string))
				}
			}
			for _, msg := range u["tools"]["messages"] {
				results = append(results, msg["tool_call_id"].(string)+"="+msg["content"].(string))
			}
		case "messages":
			tuple := decode[[]map[string]any](t, []byte(ev[1]))
			if tuple[0]["type"] == "AIMessageChunk" || tuple[0]["type"] == "ai" {
				text.WriteString(tuple[0]["content"].(string))
			}
		case "values":
			last = decode[map[string]any](t, []byte(ev[1]))
		}
	}
	slices.Sort(results)
	if !slices.Equal(calls, []string{"a", "b"}) || !slices.Equal(results, []string{`a=echo {"n":1}`, `b=echo {"n":2}`}) {
		t.Errorf("calls %v, results %v: %v", calls, results, evs)
	}
	if text.String() != "bothdone" {
		t.Errorf("streamed text %q", text.String())
	}
	var types []string
	for _, msg := range last["messages"].([]any) {
		types = append(types, msg.(map[string]any)["type"].(string))
	}
	if !slices.Equal(types, []string{"human", "ai", "tool", "tool", "ai"}) {
		t.Errorf("final values %v", types)
	}
}

// TestLangGraphStreamReset streams a model call whose first attempt breaks
// off mid-message (a transient error, retried): the voided chunks and the
// retried attempt's are two chunk messages, the values hold the one reply.
func TestLangGraphStreamReset(t *testing.T) {
	t.Parallel()
	m := scripted.New("flaky", scripted.Script{Strict: true, Turns: []scripted.Turn{
		{Text: "hello world", Chunk: 2, Fail: &scripted.Failure{Status: 503, Times: 1, After: 4}},
	}})
	env := newEnv(t, []*stepwise.Agent{{Name: "flaky", Model: m}})
	evs := env.lgEvents("/runs/stream", `{"assistant_id":"flaky","input":{"messages":[{"role":"user","content":"hi"}]},"stream_mode":["messages-tuple","values"]}`)
	byID := map[string]string{}
	var ids []string
	var last map[string]any
	for _, ev := range evs {
		switch ev[0] {
		case "messages":
			tuple := decode[[]map[string]any](t, []byte(ev[1]))
			id := tuple[0]["id"].(string)
			if _, ok := byID[id]; !ok {
				ids = append(ids, id)
			}
			byID[id] += tuple[0]["content"].(string)
		case "values":
			last = decode[map[string]any](t, []byte(ev[1]))
		}
	}
	if len(ids) != 2 || byID[ids[0]] != "hell" || byID[ids[1]] != "hello world" {
		t.Errorf("chunk messages %v %v", ids, byID)
	}
	msgs := last["messages"].([]any)
	if len(msgs) != 2 || msgs[1].(map[string]any)["content"] != "hello world" {
		t.Errorf("values %v", last)
	}
}
