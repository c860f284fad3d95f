package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/internal/workertest"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
	"github.com/stepwise-run/stepwise/worker"
)

// scriptedBuild builds a worker's definition ({"name", "start_step"}) with
// a model that calls the tool "charge" once, then answers "done".
func scriptedBuild(_ context.Context, def json.RawMessage) (*stepwise.Agent, error) {
	var d struct {
		Name      string `json:"name"`
		StartStep string `json:"start_step"`
	}
	if err := decodeStrict(def, &d); err != nil {
		return nil, err
	}
	if d.Name == "" {
		return nil, fmt.Errorf("name is required")
	}
	m := scripted.New(d.Name, scripted.Script{Strict: true, Turns: []scripted.Turn{
		{ToolCalls: []steptype.ToolCall{{ID: "c1", Name: "charge", Arguments: json.RawMessage(`{"order":"A-1"}`)}}},
		{Text: "done"},
	}})
	return &stepwise.Agent{Name: d.Name, StartStep: d.StartStep, Model: m}, nil
}

func withWorkers(lease time.Duration) envOption {
	return func(c *Config) {
		svc, err := worker.New(worker.Config{Engine: c.Engine, Build: scriptedBuild, Lease: lease, Recheck: 20 * time.Millisecond})
		if err != nil {
			panic(err)
		}
		c.Workers = svc
	}
}

// shopAgent is the registration of the tests: a worker step "validate"
// (the start step) and a worker tool "charge" with an output schema.
func shopAgent() *wire.WorkerAgent {
	return &wire.WorkerAgent{
		Definition: json.RawMessage(`{"name":"shop","start_step":"validate"}`),
		Steps:      []*wire.WorkerStep{{Name: "validate", Next: []string{"llm"}}},
		Tools: []*wire.WorkerTool{{Name: "charge", Description: "Charge an order",
			Parameters: json.RawMessage(`{"type":"object","properties":{"order":{"type":"string"}},"required":["order"]}`),
			Output:     json.RawMessage(`{"type":"object","properties":{"charged":{"type":"boolean"}},"required":["charged"]}`)}},
	}
}

func newWorkerEnv(t *testing.T, lease time.Duration) (*testEnv, *workertest.Worker) {
	t.Helper()
	e := newEnv(t, nil, withWorkers(lease))
	w := &workertest.Worker{URL: e.ts.URL, ID: "w1"}
	reg, err := w.Register(t.Context(), shopAgent())
	if err != nil {
		t.Fatal(err)
	}
	if len(reg.Agents) != 1 || reg.Agents[0].Name != "shop" || !reg.Agents[0].Changed || reg.Limits.LeaseMS != lease.Milliseconds() {
		t.Fatalf("registered = %+v", reg)
	}
	return e, w
}

func (e *testEnv) startRun(agent, input string) string {
	e.t.Helper()
	status, body := e.call("POST", "/v1/runs", fmt.Sprintf(`{"agent":%q,"input":%q}`, agent, input))
	if status != http.StatusCreated {
		e.t.Fatalf("initiate: %d %s", status, body)
	}
	var rc wire.RunCreated
	if err := json.Unmarshal(body, &rc); err != nil {
		e.t.Fatal(err)
	}
	return rc.Run.ID
}

// poll claims one task, failing the test when none comes.
func poll(t *testing.T, w *workertest.Worker) *wire.Task {
	t.Helper()
	ts, err := w.Poll(t.Context(), []string{"shop"}, 1, 10*time.Second)
	if err != nil || len(ts) != 1 {
		t.Fatalf("poll: %d tasks, %v", len(ts), err)
	}
	return ts[0]
}

func TestWorkerServesStepsAndTools(t *testing.T) {
	t.Parallel()
	e, w := newWorkerEnv(t, 10*time.Second)
	ctx := t.Context()
	runID := e.startRun("shop", "buy A-1")

	step := poll(t, w)
	if step.Kind != wire.TaskKindStep || step.Name != "validate" || step.RunID != runID || step.Token != 1 || step.Input.RunInput != "buy A-1" ||
		!strings.HasPrefix(step.IdempotencyKey, "step/"+runID+"/validate/") {
		t.Fatalf("step task = %+v", step)
	}
	if _, err := w.Events(ctx, step, &wire.TaskEvent{Type: wire.TaskEventDelta, Text: "checking"}, &wire.TaskEvent{Type: wire.TaskEventYield, Name: "validation.ok", Data: json.RawMessage(`{"ok":true}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Complete(ctx, step, &wire.TaskComplete{Next: "nowhere"}); workertest.Code(err) != wire.CodeInvalidResult {
		t.Fatalf("complete with an unknown next: %v, want invalid_result", err)
	}
	if _, err := w.Complete(ctx, step, &wire.TaskComplete{Next: "llm", State: json.RawMessage(`[1]`)}); workertest.Code(err) != wire.CodeInvalidResult {
		t.Fatalf("complete with a state that is no object: %v, want invalid_result", err)
	}
	res, err := w.Complete(ctx, step, &wire.TaskComplete{Next: "llm", Content: "valid", Output: json.RawMessage(`{"valid":true}`),
		State: json.RawMessage(`{"validated":true}`), Usage: []*wire.TaskUsage{{Model: "openai:gpt-4o-mini"}}, CostUSD: 0.25})
	if err != nil || res.State != wire.TaskCompleted || res.Duplicate {
		t.Fatalf("complete step: %+v, %v", res, err)
	}
	again, err := w.Complete(ctx, step, &wire.TaskComplete{Next: "llm"})
	if err != nil || !again.Duplicate {
		t.Fatalf("repeated complete: %+v, %v; want a duplicate", again, err)
	}

	call := poll(t, w)
	if call.Kind != wire.TaskKindTool || call.Name != "charge" || string(call.Input.Arguments) != `{"order":"A-1"}` || call.Input.ToolCallID != "c1" {
		t.Fatalf("tool task = %+v", call)
	}
	if _, err := w.Complete(ctx, call, &wire.TaskComplete{Output: json.RawMessage(`{"charged":"yes"}`)}); workertest.Code(err) != wire.CodeInvalidResult {
		t.Fatalf("complete against the output schema: %v, want invalid_result", err)
	}
	if _, err := w.Complete(ctx, call, &wire.TaskComplete{Content: "charged A-1", Output: json.RawMessage(`{"charged":true}`)}); err != nil {
		t.Fatal(err)
	}
	r := e.waitRun(runID, steptype.RunCompleted)
	if r.Output != "done" || !strings.Contains(string(r.State), `"validated":true`) {
		t.Errorf("run = %+v", r)
	}
	steps, err := e.store.StepList(ctx, &store.StepListParams{RunID: runID})
	if err != nil {
		t.Fatal(err)
	}
	var custom, toolStep *steptype.Step
	for _, s := range steps {
		switch {
		case s.Kind == steptype.KindCustom && s.Name == "validate":
			custom = s
		case s.Kind == steptype.KindTool && s.ToolName == "charge":
			toolStep = s
		}
	}
	if custom == nil || custom.Metadata[worker.MetaWorker] != "w1" || custom.Metadata[worker.MetaTask] != step.ID || string(custom.Outputs) != `{"valid":true}` ||
		custom.Content != "valid" || custom.Metrics.Cost < 0.25 || custom.Metrics.Model != "openai:gpt-4o-mini" {
		t.Errorf("custom step = %+v", custom)
	}
	if toolStep == nil || toolStep.Metadata[worker.MetaWorker] != "w1" || toolStep.Content != "charged A-1" || toolStep.ID == "" {
		t.Errorf("tool step = %+v", toolStep)
	}
}

func TestWorkerLeaseFencing(t *testing.T) {
	t.Parallel()
	e, a := newWorkerEnv(t, 300*time.Millisecond)
	ctx := t.Context()
	b := &workertest.Worker{URL: e.ts.URL, ID: "w2"}
	if _, err := b.Register(ctx, shopAgent()); err != nil {
		t.Fatal(err)
	}
	runID := e.startRun("shop", "buy")
	first := poll(t, a)
	// a goes silent: after the lease, b claims the task with the next token.
	second := poll(t, b)
	if second.ID != first.ID || second.Token != first.Token+1 || second.Claims != 2 {
		t.Fatalf("second claim = %+v after %+v", second, first)
	}
	if _, err := a.Complete(ctx, first, &wire.TaskComplete{Next: "end", Content: "late"}); workertest.Code(err) != wire.CodeLeaseLost {
		t.Fatalf("late completion: %v, want lease_lost", err)
	}
	if _, err := a.Heartbeat(ctx, first); workertest.Code(err) != wire.CodeLeaseLost {
		t.Fatalf("late heartbeat: %v, want lease_lost", err)
	}
	if _, err := b.Complete(ctx, second, &wire.TaskComplete{Next: "end", Content: "second"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Complete(ctx, first, &wire.TaskComplete{Next: "end"}); workertest.Code(err) != wire.CodeTaskFinished {
		t.Fatalf("completion after the result: %v, want task_finished", err)
	}
	e.waitRun(runID, steptype.RunCompleted)
	steps, _ := e.store.StepList(ctx, &store.StepListParams{RunID: runID, Kinds: []steptype.Kind{steptype.KindCustom}})
	if len(steps) != 1 || steps[0].Content != "second" || steps[0].Metadata[worker.MetaWorker] != "w2" {
		t.Fatalf("custom steps = %v", steps)
	}
	ws := e.workerStats()
	if w := ws["w1"]; w == nil || w.Claimed != 1 || w.LeaseLost != 1 || w.Completed != 0 || w.Holding != 0 {
		t.Errorf("w1, fenced: %+v", w)
	}
	if w := ws["w2"]; w == nil || w.Claimed != 1 || w.Completed != 1 || w.LeaseLost != 0 || w.Holding != 0 || w.TaskSamples != 1 {
		t.Errorf("w2, whose result committed: %+v", w)
	}
}

// workerStats returns GET /v1/workers by worker id.
func (e *testEnv) workerStats() map[string]*wire.WorkerStats {
	e.t.Helper()
	status, body := e.call("GET", "/v1/workers", "")
	var wl wire.WorkerList
	if err := json.Unmarshal(body, &wl); status != http.StatusOK || err != nil {
		e.t.Fatalf("GET /v1/workers: %d %s (%v)", status, body, err)
	}
	out := map[string]*wire.WorkerStats{}
	for _, w := range wl.Workers {
		out[w.ID] = w
	}
	return out
}

func TestWorkerReleaseReoffersAtOnce(t *testing.T) {
	t.Parallel()
	e, a := newWorkerEnv(t, time.Hour)
	ctx := t.Context()
	e.startRun("shop", "buy")
	first := poll(t, a)
	if n, err := a.Release(ctx); err != nil || n != 1 {
		t.Fatalf("release: %d, %v", n, err)
	}
	// The lease is an hour: only the release makes it claimable now.
	second := poll(t, a)
	if second.ID != first.ID || second.Token != 2 {
		t.Fatalf("after release: %+v", second)
	}
	if _, err := a.Call(ctx, "/v1/workers/tasks/"+second.ID+"/release", &wire.TaskToken{Token: second.Token}, nil); err != nil {
		t.Fatal(err)
	}
	if third := poll(t, a); third.Token != 3 {
		t.Fatalf("after the release of one task: %+v", third)
	}
	if w := e.workerStats()["w1"]; w == nil || w.Claimed != 3 || w.Released != 2 || w.Holding != 1 || w.Polling != 0 ||
		strings.Join(w.Agents, ",") != "shop" {
		t.Errorf("w1 after two releases: %+v", w)
	}
}

func TestWorkerHumanInput(t *testing.T) {
	t.Parallel()
	e, w := newWorkerEnv(t, 10*time.Second)
	ctx := t.Context()
	runID := e.startRun("shop", "buy")
	ask := poll(t, w)
	if _, err := w.Input(ctx, ask, &wire.TaskInputRequest{Request: &wire.InputRequest{Prompt: "Approve A-1?", Schema: json.RawMessage(`{"type":"boolean"}`)},
		State: json.RawMessage(`{"asked":true}`)}); err != nil {
		t.Fatal(err)
	}
	e.waitRun(runID, steptype.RunWaiting)
	pending, err := e.eng.Pending(ctx, runID)
	if err != nil || len(pending) != 1 || pending[0].Request.Prompt != "Approve A-1?" {
		t.Fatalf("pending = %v, %v", pending, err)
	}
	if _, err := e.eng.Answer(ctx, stepwise.AnswerParams{RunID: runID, RequestID: pending[0].RequestID, Answer: json.RawMessage(`true`)}); err != nil {
		t.Fatal(err)
	}
	again := poll(t, w)
	if again.ID == ask.ID || again.Name != "validate" || string(again.Input.Answer) != "true" || again.Input.RequestID != pending[0].RequestID ||
		again.Input.Request == nil || again.Input.Request.Prompt != "Approve A-1?" || !strings.Contains(string(again.Input.State), `"asked":true`) {
		t.Fatalf("re-offered task = %+v", again)
	}
	if _, err := w.Complete(ctx, again, &wire.TaskComplete{Next: "end", Content: "approved"}); err != nil {
		t.Fatal(err)
	}
	e.waitRun(runID, steptype.RunCompleted)
}

func TestWorkerTransientFailureRetries(t *testing.T) {
	t.Parallel()
	e, w := newWorkerEnv(t, 10*time.Second)
	ctx := t.Context()
	runID := e.startRun("shop", "buy")
	first := poll(t, w)
	if _, err := w.Fail(ctx, first, &wire.TaskFail{Message: "db busy", Class: wire.ErrorTransient, Code: "busy"}); err != nil {
		t.Fatal(err)
	}
	retry := poll(t, w)
	if retry.ID == first.ID || retry.Attempt != 2 || retry.IdempotencyKey == first.IdempotencyKey {
		t.Fatalf("retry task = %+v after %+v", retry, first)
	}
	if _, err := w.Fail(ctx, retry, &wire.TaskFail{Message: "broken for good"}); err != nil {
		t.Fatal(err)
	}
	r := e.waitRun(runID, steptype.RunFailed)
	if r.Error == nil || !strings.Contains(r.Error.Message, "broken for good") {
		t.Fatalf("run error = %+v", r.Error)
	}
	errs, _ := e.store.StepList(ctx, &store.StepListParams{RunID: runID, Kinds: []steptype.Kind{steptype.KindError}})
	if len(errs) != 2 || errs[0].Error.Code != "busy" || errs[0].Error.Class != steptype.ErrorTransient {
		t.Fatalf("error steps = %+v", errs)
	}
}

func TestWorkerBadInput(t *testing.T) {
	t.Parallel()
	e, w := newWorkerEnv(t, 10*time.Second)
	ctx := t.Context()
	e.problem(404, wire.CodeTaskNotFound, "POST", "/v1/workers/tasks/nope/complete", `{"token":1,"next":"end"}`)
	e.problem(404, wire.CodeNotServed, "POST", "/v1/workers/poll", `{"worker_id":"w1","agents":["other"],"wait_ms":1}`)
	e.problem(400, CodeInvalidParam, "POST", "/v1/workers/poll", `{"worker_id":"","agents":["shop"]}`)
	e.problem(400, CodeInvalidParam, "POST", "/v1/workers/poll", `{"worker_id":"w1","agents":["shop"],"max":100}`)
	e.problem(400, CodeInvalidJSON, "POST", "/v1/workers/poll", `{"worker_id":"w1","agents":["shop"],"bogus":1}`)
	e.problem(422, wire.CodeInvalidDefinition, "POST", "/v1/workers/register", `{"worker_id":"w1","agents":[{"definition":{"nom":"x"}}]}`)
	e.problem(422, wire.CodeInvalidDefinition, "POST", "/v1/workers/register",
		`{"worker_id":"w1","agents":[{"definition":{"name":"t2"},"tools":[{"name":"x","output_schema":{"type":12}}]}]}`)
	e.problem(413, CodeBodyTooLarge, "POST", "/v1/workers/register", `{"worker_id":"w1","agents":[{"definition":{"name":"`+strings.Repeat("x", 2<<20)+`"}}]}`)
	// Re-registering the same definition changes nothing; a refused one left the agent as it was.
	reg, err := w.Register(ctx, shopAgent())
	if err != nil || reg.Agents[0].Changed {
		t.Fatalf("idempotent registration: %+v, %v", reg, err)
	}
	changed := shopAgent()
	changed.Steps = append(changed.Steps, &wire.WorkerStep{Name: "review"})
	reg2, err := w.Register(ctx, changed)
	if err != nil || !reg2.Agents[0].Changed || reg2.Agents[0].Version == reg.Agents[0].Version {
		t.Fatalf("changed registration: %+v, %v", reg2, err)
	}

	e.startRun("shop", "buy")
	task := poll(t, w)
	e.problem(409, wire.CodeLeaseLost, "POST", "/v1/workers/tasks/"+task.ID+"/complete", `{"token":99,"next":"end"}`)
	e.problem(409, wire.CodeLeaseLost, "POST", "/v1/workers/tasks/"+task.ID+"/heartbeat", `{"token":99}`)
	e.problem(400, CodeInvalidParam, "POST", "/v1/workers/tasks/"+task.ID+"/events", fmt.Sprintf(`{"token":%d,"events":[{"type":"shout"}]}`, task.Token))
	e.problem(400, CodeInvalidParam, "POST", "/v1/workers/tasks/"+task.ID+"/fail", fmt.Sprintf(`{"token":%d,"message":"x","class":"maybe"}`, task.Token))
	// Nothing of the refused calls stuck: the task is still claimed under its token.
	if _, err := w.Complete(ctx, task, &wire.TaskComplete{Next: "end"}); err != nil {
		t.Fatal(err)
	}
}

// TestWorkerPollIsWokenByANewTask holds a poll, then creates a task: the
// poll must be woken by the task's notification. The service re-reads the
// table only once an hour here, and the poll waits 30 s, so a poll that is
// not woken returns no task and the test fails.
func TestWorkerPollIsWokenByANewTask(t *testing.T) {
	t.Parallel()
	var svc *worker.Service
	e := newEnv(t, nil, func(c *Config) {
		var err error
		svc, err = worker.New(worker.Config{Engine: c.Engine, Build: scriptedBuild, Lease: 10 * time.Second, Recheck: time.Hour})
		if err != nil {
			panic(err)
		}
		c.Workers = svc
	})
	w := &workertest.Worker{URL: e.ts.URL, ID: "w1"}
	if _, err := w.Register(t.Context(), shopAgent()); err != nil {
		t.Fatal(err)
	}
	var got []*wire.Task
	var perr error
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		got, perr = w.Poll(t.Context(), []string{"shop"}, 1, 30*time.Second)
	}()
	// Wait until the poll is held: its claim found nothing.
	for svc.Waiting() != 1 {
		select {
		case <-polled:
			t.Fatalf("the poll returned before any task existed: %v, %v", got, perr)
		case <-time.After(time.Millisecond):
		}
	}
	e.startRun("shop", "buy")
	<-polled
	if perr != nil || len(got) != 1 || got[0].Name != "validate" {
		t.Fatalf("held poll: %v, %v (not woken by the new task)", got, perr)
	}
	// Handed over: created claimed for the waiting worker, not queued and
	// claimed by a write of its own.
	stored, err := e.store.TaskGet(t.Context(), &store.TaskGetParams{ID: got[0].ID})
	if err != nil || stored.Owner != "w1" || stored.Token != 1 || stored.Claims != 1 || !stored.UpdatedAt.Equal(stored.CreatedAt) {
		t.Errorf("the task as stored: %+v, %v; want it created claimed by w1", stored, err)
	}
	if svc.Waiting() != 0 {
		t.Errorf("%d polls still counted as held", svc.Waiting())
	}
}

// TestWorkerToolHumanInput: a tool task asks for human input like a step
// task. The call parks the run on the request; the answer makes the call
// again as a new task carrying the answers, whose result the model gets.
func TestWorkerToolHumanInput(t *testing.T) {
	t.Parallel()
	e, w := newWorkerEnv(t, 10*time.Second)
	ctx := t.Context()
	runID := e.startRun("shop", "buy")
	if _, err := w.Complete(ctx, poll(t, w), &wire.TaskComplete{Next: "llm"}); err != nil {
		t.Fatal(err)
	}
	call := poll(t, w)
	if call.Kind != wire.TaskKindTool || call.Input.Answer != nil {
		t.Fatalf("tool task = %+v", call)
	}
	// What only a step's request can say is refused, and changes nothing.
	if _, err := w.Input(ctx, call, &wire.TaskInputRequest{Request: &wire.InputRequest{Prompt: "Charge?", OnExpire: "default", Default: json.RawMessage(`true`)}}); workertest.Code(err) != CodeInvalidParam {
		t.Fatalf("tool input with on_expire: %v, want invalid_parameter", err)
	}
	if _, err := w.Input(ctx, call, &wire.TaskInputRequest{Request: &wire.InputRequest{Prompt: "Charge?"}, State: json.RawMessage(`{"x":1}`)}); workertest.Code(err) != CodeInvalidParam {
		t.Fatalf("tool input with state: %v, want invalid_parameter", err)
	}
	res, err := w.Input(ctx, call, &wire.TaskInputRequest{Request: &wire.InputRequest{Prompt: "Charge A-1 for 30 EUR?",
		Schema: json.RawMessage(`{"type":"boolean"}`), Context: map[string]any{"amount": 30}}})
	if err != nil || res.State != wire.TaskParked {
		t.Fatalf("tool input: %+v, %v", res, err)
	}
	e.waitRun(runID, steptype.RunWaiting)
	pending, err := e.eng.Pending(ctx, runID)
	if err != nil || len(pending) != 1 || pending[0].Request.Prompt != "Charge A-1 for 30 EUR?" || pending[0].Request.Context["tool"] != "charge" {
		t.Fatalf("pending = %+v, %v", pending, err)
	}
	if _, err := e.eng.Answer(ctx, stepwise.AnswerParams{RunID: runID, RequestID: pending[0].RequestID, Answer: json.RawMessage(`"maybe"`)}); err == nil {
		t.Fatal("an answer against the request's schema was taken")
	}
	if _, err := e.eng.Answer(ctx, stepwise.AnswerParams{RunID: runID, RequestID: pending[0].RequestID, Answer: json.RawMessage(`true`)}); err != nil {
		t.Fatal(err)
	}
	again := poll(t, w)
	if again.ID == call.ID || again.Kind != wire.TaskKindTool || again.Name != "charge" || string(again.Input.Answer) != "true" ||
		len(again.Input.Answers) != 1 || string(again.Input.Arguments) != `{"order":"A-1"}` || again.IdempotencyKey == call.IdempotencyKey {
		t.Fatalf("re-offered tool task = %+v after %+v", again, call)
	}
	if _, err := w.Complete(ctx, again, &wire.TaskComplete{Content: "charged A-1", Output: json.RawMessage(`{"charged":true}`)}); err != nil {
		t.Fatal(err)
	}
	if r := e.waitRun(runID, steptype.RunCompleted); r.Output != "done" {
		t.Errorf("run = %+v", r)
	}
	steps, _ := e.store.StepList(ctx, &store.StepListParams{RunID: runID, Kinds: []steptype.Kind{steptype.KindTool}})
	if len(steps) != 1 || steps[0].Content != "charged A-1" || steps[0].Metadata[worker.MetaWorker] != "w1" || steps[0].Metadata[worker.MetaTask] != again.ID {
		t.Fatalf("tool steps = %+v", steps)
	}
}

// TestWorkerStopEndsItsHeldPoll: a worker that stops gracefully may leave
// a poll held on the server (its request not yet seen closed). The stop
// ends that poll, so a task created next goes to another worker, not to
// the stopped one's poll and its lease.
func TestWorkerStopEndsItsHeldPoll(t *testing.T) {
	t.Parallel()
	var svc *worker.Service
	e := newEnv(t, nil, func(c *Config) {
		var err error
		svc, err = worker.New(worker.Config{Engine: c.Engine, Build: scriptedBuild, Lease: time.Hour, Recheck: time.Hour})
		if err != nil {
			panic(err)
		}
		c.Workers = svc
	})
	a := &workertest.Worker{URL: e.ts.URL, ID: "w-stopping"}
	b := &workertest.Worker{URL: e.ts.URL, ID: "w-next"}
	for _, w := range []*workertest.Worker{a, b} {
		if _, err := w.Register(t.Context(), shopAgent()); err != nil {
			t.Fatal(err)
		}
	}
	var got []*wire.Task
	var perr error
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		got, perr = a.Poll(t.Context(), []string{"shop"}, 1, 60*time.Second)
	}()
	for svc.Waiting() != 1 {
		select {
		case <-polled:
			t.Fatalf("the poll returned before any task existed: %v, %v", got, perr)
		case <-time.After(time.Millisecond):
		}
	}
	if n, err := a.Release(t.Context()); err != nil || n != 0 {
		t.Fatalf("release: %d, %v", n, err)
	}
	e.startRun("shop", "buy")
	// The lease is an hour: the next worker gets the task only if the
	// stopped worker's poll did not take it, or handed it back.
	if task := poll(t, b); task.Name != "validate" {
		t.Fatalf("the next worker got %+v", task)
	}
	<-polled
	if perr != nil || len(got) != 0 {
		t.Fatalf("the stopped worker's held poll = %v, %v; want it ended with no task", got, perr)
	}
}

// Workers that register one new agent at the same moment all succeed: none
// takes the others' registration for an agent the server defines itself.
func TestWorkersRegisterOneAgentAtOnce(t *testing.T) {
	for round := range 20 {
		e := newEnv(t, nil, withWorkers(5*time.Second))
		const n = 8
		errs := make(chan error, n)
		for i := range n {
			go func() {
				w := &workertest.Worker{URL: e.ts.URL, ID: fmt.Sprintf("w%d", i)}
				_, err := w.Register(t.Context(), shopAgent())
				errs <- err
			}()
		}
		for range n {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
}
