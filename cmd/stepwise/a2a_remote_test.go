package main_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The client direction of A2A: a parent `stepwise serve` whose agent file
// names, in sub_agents, an agent of another `stepwise serve` (or of the
// official JS SDK's server) by its A2A endpoint or card. The helpers are
// in a2a_remote_helpers_test.go.

// TestA2ARemoteSubAgent: the parent's run calls the remote agent; the
// remote task completes, its artifact is the tool result (the remote task
// id in the step's outputs) and the parent's answer carries it.
func TestA2ARemoteSubAgent(t *testing.T) {
	t.Parallel()
	p := startPair(t, plainResearcher, map[string]string{"researcher-script.yaml": plainScript}, "sqlite:"+filepath.Join(t.TempDir(), "parent.db"), nil)
	run := startLead(t, p.parent.url, "What is the capital of France?")
	done := waitRun(t, p.parent.url, run.ID, "completed")
	if done.Output != "Researcher: Paris is the capital of France." {
		t.Errorf("output %q", done.Output)
	}
	ts := toolStep(t, sessionSteps(t, p.parent.url, "", run.SessionID), "researcher")
	var out struct {
		Agent, TaskID, ContextID, State, Text string
	}
	if err := json.Unmarshal(ts.Outputs, &struct {
		Agent     *string `json:"agent"`
		TaskID    *string `json:"task_id"`
		ContextID *string `json:"context_id"`
		State     *string `json:"state"`
		Text      *string `json:"text"`
	}{&out.Agent, &out.TaskID, &out.ContextID, &out.State, &out.Text}); err != nil {
		t.Fatal(err)
	}
	if ts.Content != "Paris is the capital of France." || out.Agent != "researcher" || out.State != "completed" || out.TaskID == "" {
		t.Errorf("tool step %q outputs %s", ts.Content, ts.Outputs)
	}
	// The task is the remote's run, in a session of its own.
	var remote remoteRun
	a2aAPI(t, "GET", p.remote.url+"/v1/runs/"+out.TaskID, remoteToken, "", http.StatusOK, &remote)
	if remote.SessionID != out.ContextID || remote.Status != "completed" {
		t.Errorf("remote run %+v, outputs %s", remote, ts.Outputs)
	}
	if s, n := remoteTasks(t, p.remote.url); s != 1 || n != 1 {
		t.Errorf("the remote holds %d sessions, %d tasks; want 1, 1", s, n)
	}
}

const askingScript = `strict: true
turns:
  - tool_calls:
      - {name: ask_human, arguments: {question: "Which city should I research?"}}
  - tool_calls:
      - {name: ask_human, arguments: {question: "Which century?"}}
  - text: "Lyon grew along the Rhône in the 19th century."
`

// TestA2ARemoteInputSQLite: the remote task asks twice for input; each
// time the parent run parks with a human-input request carrying the
// remote prompt; the answers, posted to the parent's API (the second to a
// parent serve started after the first was killed), go to the same remote
// task, which completes, and so does the parent.
func TestA2ARemoteInputSQLite(t *testing.T) {
	t.Parallel()
	testA2ARemoteInput(t, "sqlite:"+filepath.Join(t.TempDir(), "parent.db"))
}

// TestA2ARemoteInputPostgres is TestA2ARemoteInputSQLite with the parent
// on PostgreSQL.
func TestA2ARemoteInputPostgres(t *testing.T) {
	t.Parallel()
	testA2ARemoteInput(t, postgresSchemaDSN(t))
}

func testA2ARemoteInput(t *testing.T, parentDB string) {
	researcher := "name: researcher\nmodel: scripted:researcher-script.yaml\ntools: [ask_human]\n"
	p := startPair(t, researcher, map[string]string{"researcher-script.yaml": askingScript}, parentDB, nil)
	run := startLead(t, p.parent.url, "Tell me about a city.")
	answer := func(prompt, text string) {
		t.Helper()
		waitRun(t, p.parent.url, run.ID, "waiting")
		var pending struct {
			Inputs []struct {
				RequestID string `json:"request_id"`
				Request   struct {
					Prompt  string         `json:"prompt"`
					Context map[string]any `json:"context"`
				} `json:"request"`
			} `json:"inputs"`
		}
		a2aAPI(t, "GET", p.parent.url+"/v1/runs/"+run.ID+"/inputs", "", "", http.StatusOK, &pending)
		if len(pending.Inputs) != 1 || pending.Inputs[0].Request.Prompt != prompt {
			t.Fatalf("pending %+v, want one asking %q", pending, prompt)
		}
		if pending.Inputs[0].Request.Context["a2a_task_id"] == nil {
			t.Errorf("the request does not name the remote task: %+v", pending.Inputs[0].Request)
		}
		body, _ := json.Marshal(map[string]string{"answer": text})
		a2aAPI(t, "POST", p.parent.url+"/v1/runs/"+run.ID+"/inputs/"+pending.Inputs[0].RequestID, "", string(body), http.StatusOK, nil)
	}
	answer("Which city should I research?", "Lyon")
	// A new parent process answers the second question: the call finds
	// its task by sending its first message again.
	waitRun(t, p.parent.url, run.ID, "waiting")
	p.parent.kill(t)
	p.parent = serveWith(t, p.dir, p.parentDB, p.parentEnv, p.parentArgs...)
	answer("Which century?", "the 19th")
	done := waitRun(t, p.parent.url, run.ID, "completed")
	if done.Output != "Researcher: Lyon grew along the Rhône in the 19th century." {
		t.Errorf("output %q", done.Output)
	}
	ts := toolStep(t, sessionSteps(t, p.parent.url, "", run.SessionID), "researcher")
	if !strings.Contains(string(ts.Outputs), `"state":"completed"`) {
		t.Errorf("tool step outputs %s", ts.Outputs)
	}
	// One remote task got both answers, in order.
	var list struct {
		Sessions []struct {
			ID string `json:"id"`
		} `json:"sessions"`
	}
	a2aAPI(t, "GET", p.remote.url+"/v1/sessions?agent=researcher", remoteToken, "", http.StatusOK, &list)
	if len(list.Sessions) != 1 {
		t.Fatalf("remote sessions %+v", list.Sessions)
	}
	var answers []string
	for _, s := range sessionSteps(t, p.remote.url, remoteToken, list.Sessions[0].ID) {
		if s.Kind == "input" {
			answers = append(answers, s.Status+":"+string(s.Outputs))
		}
	}
	if strings.Join(answers, ",") != `completed:"Lyon",completed:"the 19th"` {
		t.Errorf("remote input steps %v", answers)
	}
	if s, n := remoteTasks(t, p.remote.url); s != 1 || n != 1 {
		t.Errorf("the remote holds %d sessions, %d tasks; want 1, 1", s, n)
	}
}

// TestA2ARemoteParentCrash: the parent serve is killed (SIGKILL) while the
// remote task works (its model call held); a new parent serve takes the
// run over and calls again with the same messageId, the remote answers
// with the task it already has, the run completes with its output, and
// the remote holds exactly one task for the call (its model called once).
func TestA2ARemoteParentCrash(t *testing.T) {
	t.Parallel()
	model := newRelayModel(t, "", "Found: ", true)
	researcher := fmt.Sprintf("name: researcher\nmodel: openai:relay\nmodel_options: {base_url: %q, api_key_env: A2A_RELAY_KEY}\n", model.url+"/v1")
	sends := make(chan string, 16)
	p := startPair(t, researcher, nil, "sqlite:"+filepath.Join(t.TempDir(), "parent.db"),
		func(remote string) string { return a2aProxy(t, remote, sends) }, "--lease", "1s")
	run := startLead(t, p.parent.url, "What is new in Lyon?")
	first := recv(t, sends)
	recv(t, model.arrived) // the remote task is working: the call is in flight
	p.parent.kill(t)
	p.parent = serveWith(t, p.dir, p.parentDB, p.parentEnv, p.parentArgs...)
	if again := recv(t, sends); again != first {
		t.Errorf("the call was sent again with messageId %s, first %s", again, first)
	}
	close(model.hold)
	done := waitRun(t, p.parent.url, run.ID, "completed")
	if done.Output != "Researcher: Found: What is new in Lyon?" {
		t.Errorf("output %q", done.Output)
	}
	toolStep(t, sessionSteps(t, p.parent.url, "", run.SessionID), "researcher")
	if s, n := remoteTasks(t, p.remote.url); s != 1 || n != 1 {
		t.Errorf("the remote holds %d sessions, %d tasks; want 1, 1", s, n)
	}
	if n := model.Calls(); n != 1 {
		t.Errorf("the remote's model was called %d times, want 1", n)
	}
}

// TestA2ARemoteDown: with the remote serve gone, the call is retried by
// the agent's retry policy (two recoverable error steps), then fails with
// a clear message the model reads; the parent run goes on.
func TestA2ARemoteDown(t *testing.T) {
	t.Parallel()
	p := startPair(t, plainResearcher, map[string]string{"researcher-script.yaml": plainScript}, "sqlite:"+filepath.Join(t.TempDir(), "parent.db"), nil)
	p.remote.kill(t)
	run := startLead(t, p.parent.url, "What is the capital of France?")
	done := waitRun(t, p.parent.url, run.ID, "completed")
	steps := sessionSteps(t, p.parent.url, "", run.SessionID)
	var retried int
	for _, s := range steps {
		if s.Kind == "error" && s.ToolName == "researcher" {
			retried++
		}
	}
	ts := toolStep(t, steps, "researcher")
	const want = "error: a2a agent researcher: SendStreamingMessage: "
	if retried != 2 || !strings.HasPrefix(ts.Content, want) || !strings.Contains(ts.Content, "connection refused") || ts.Error == nil {
		t.Errorf("%d error steps; tool step %q (error %+v), want 2 and %q… connection refused", retried, ts.Content, ts.Error, want)
	}
	if !strings.HasPrefix(done.Output, "Researcher: "+want) {
		t.Errorf("output %q", done.Output)
	}
}

// TestA2ARemoteBadCard: an agent file whose remote agent has no card
// there, or whose token variable is unset, fails to load with a clear
// error naming the file, the sub-agent and the cause; nothing runs.
func TestA2ARemoteBadCard(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"researcher.yaml": plainResearcher, "researcher-script.yaml": plainScript})
	remote := serveWith(t, dir, "sqlite:"+filepath.Join(dir, "remote.db"), nil, "--agent", filepath.Join(dir, "researcher.yaml"))
	gone := "http://" + freeAddr(t)
	for _, c := range []struct{ name, entry, env, want string }{
		{"unknown agent", "a2a: " + remote.url + "/a2a/nobody\n    name: researcher", "",
			"lead.yaml: sub-agent researcher: agent card " + remote.url + "/a2a/nobody/.well-known/agent-card.json: HTTP 404"},
		{"not a card", "a2a: " + remote.url + "/v1/health.json", "",
			"lead.yaml: sub-agent " + remote.url + "/v1/health.json: agent card " + remote.url + "/v1/health.json: HTTP 404"},
		{"nobody listening", "a2a: " + gone + "/a2a/researcher", "",
			"agent card " + gone + "/a2a/researcher/.well-known/agent-card.json: dial tcp"},
		{"token unset", "a2a: " + remote.url + "/a2a/researcher\n    token_env: A2A_UNSET_TOKEN", "",
			"sub-agent " + remote.url + "/a2a/researcher: token_env: A2A_UNSET_TOKEN is not set"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sub := t.TempDir()
			writeFiles(t, sub, map[string]string{"lead.yaml": "name: lead\nmodel: scripted:s.yaml\nsub_agents:\n  - " + c.entry + "\n", "s.yaml": "turns: [{text: hi}]\n"})
			db := filepath.Join(sub, "p.db")
			out, errOut, code := stepwise(t, sub, "--db", "sqlite:"+db, "run", "--agent", filepath.Join(sub, "lead.yaml"), "--input", "hi")
			if code == 0 || !strings.Contains(errOut, c.want) {
				t.Errorf("exit %d, stderr %q, want it to contain %q\n%s", code, errOut, c.want, out)
			}
			if strings.Contains(out, "hi") {
				t.Errorf("the agent ran: %s", out)
			}
		})
	}
}

// TestA2ARemoteCancel: cancelling the parent run while the remote task
// works cancels the remote task (CancelTask).
func TestA2ARemoteCancel(t *testing.T) {
	t.Parallel()
	model := newRelayModel(t, "", "Found: ", true)
	defer close(model.hold)
	researcher := fmt.Sprintf("name: researcher\nmodel: openai:relay\nmodel_options: {base_url: %q, api_key_env: A2A_RELAY_KEY}\n", model.url+"/v1")
	p := startPair(t, researcher, nil, "sqlite:"+filepath.Join(t.TempDir(), "parent.db"), nil)
	run := startLead(t, p.parent.url, "What is new in Lyon?")
	recv(t, model.arrived)
	a2aAPI(t, "POST", p.parent.url+"/v1/runs/"+run.ID+"/cancel", "", `{"reason":"not needed"}`, http.StatusOK, nil)
	var list struct {
		Sessions []struct {
			ID string `json:"id"`
		} `json:"sessions"`
	}
	a2aAPI(t, "GET", p.remote.url+"/v1/sessions?agent=researcher", remoteToken, "", http.StatusOK, &list)
	if len(list.Sessions) != 1 {
		t.Fatalf("remote sessions %+v", list.Sessions)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var runs struct {
			Runs []remoteRun `json:"runs"`
		}
		a2aAPI(t, "GET", p.remote.url+"/v1/sessions/"+list.Sessions[0].ID+"/runs", remoteToken, "", http.StatusOK, &runs)
		if len(runs.Runs) == 1 && runs.Runs[0].Status == "cancelled" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("remote runs %+v, want one cancelled", runs.Runs)
		}
		time.Sleep(20 * time.Millisecond) // polling the API for a state change
	}
}

// TestA2ARemoteJSSDKAgent: the remote is an agent on the official A2A
// JavaScript SDK's server (internal/testdeps/a2a/remote-agent.mjs), named
// by its card's URL. Its input-required surfaces as the parent's request;
// the answer goes to the same task; the parent completes with the artifact.
func TestA2ARemoteJSSDKAgent(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(a2aDeps, "node_modules", "@a2a-js", "sdk", "package.json"))
	}
	if err != nil {
		msg := "A2A npm test dependencies missing (" + err.Error() + "); install them with: npm ci --prefix internal/testdeps/a2a"
		if os.Getenv("STEPWISE_REQUIRE_NPM") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	agent := exec.Command(node, "remote-agent.mjs", "0")
	agent.Dir = a2aDeps
	agent.Stderr = os.Stderr
	stdout, err := agent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.Process.Kill(); _ = agent.Wait() })
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		b := bufio.NewScanner(stdout)
		for b.Scan() {
			lines <- b.Text()
		}
	}()
	port, ok := strings.CutPrefix(recv(t, lines), "listening ")
	if !ok {
		t.Fatalf("remote-agent.mjs did not start")
	}
	relay := newRelayModel(t, "colours", "Lead: ", false)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"lead.yaml": fmt.Sprintf(`name: lead
model: openai:relay
model_options: {base_url: %q, api_key_env: A2A_RELAY_KEY}
sub_agents:
  - a2a: http://127.0.0.1:%s/.well-known/agent-card.json
`, relay.url+"/v1", port)})
	parent := serveWith(t, dir, "sqlite:"+filepath.Join(dir, "parent.db"), []string{"A2A_RELAY_KEY=k"}, "--agent", filepath.Join(dir, "lead.yaml"))
	run := startLead(t, parent.url, "Pick a colour.")
	waitRun(t, parent.url, run.ID, "waiting")
	var pending struct {
		Inputs []struct {
			RequestID string `json:"request_id"`
			Request   struct {
				Prompt string `json:"prompt"`
			} `json:"request"`
		} `json:"inputs"`
	}
	a2aAPI(t, "GET", parent.url+"/v1/runs/"+run.ID+"/inputs", "", "", http.StatusOK, &pending)
	if len(pending.Inputs) != 1 || pending.Inputs[0].Request.Prompt != "Which colour?" {
		t.Fatalf("pending %+v", pending)
	}
	a2aAPI(t, "POST", parent.url+"/v1/runs/"+run.ID+"/inputs/"+pending.Inputs[0].RequestID, "", `{"answer":"blue"}`, http.StatusOK, nil)
	done := waitRun(t, parent.url, run.ID, "completed")
	if done.Output != "Lead: You chose blue." {
		t.Errorf("output %q", done.Output)
	}
	ts := toolStep(t, sessionSteps(t, parent.url, "", run.SessionID), "colours")
	if !strings.Contains(string(ts.Outputs), `"agent":"colours"`) || !strings.Contains(string(ts.Outputs), `"state":"completed"`) {
		t.Errorf("tool step outputs %s", ts.Outputs)
	}
	// The SDK's server saw one task: the first message, a read of the
	// task, the answer.
	var calls []string
	for len(calls) < 3 {
		f := strings.Fields(recv(t, lines))
		if len(f) > 1 && f[0] == "call" {
			calls = append(calls, f[1])
		}
	}
	if strings.Join(calls, ",") != "SendStreamingMessage,GetTask,SendStreamingMessage" {
		t.Errorf("the SDK server's calls %v", calls)
	}
}

// TestA2ARemoteRateLimited: the remote's first call is answered 429 with
// Retry-After; the call is retried (one recoverable error step naming the
// 429) and completes; the remote holds one task.
func TestA2ARemoteRateLimited(t *testing.T) {
	t.Parallel()
	sends := make(chan string, 16)
	p := startPair(t, plainResearcher, map[string]string{"researcher-script.yaml": plainScript}, "sqlite:"+filepath.Join(t.TempDir(), "parent.db"),
		func(remote string) string { return a2aLimitedProxy(t, remote, sends, 1) })
	run := startLead(t, p.parent.url, "What is the capital of France?")
	done := waitRun(t, p.parent.url, run.ID, "completed")
	if done.Output != "Researcher: Paris is the capital of France." {
		t.Errorf("output %q", done.Output)
	}
	var errs []string
	for _, s := range sessionSteps(t, p.parent.url, "", run.SessionID) {
		if s.Kind == "error" && s.Error != nil {
			errs = append(errs, s.Error.Message)
		}
	}
	if len(errs) != 1 || !strings.Contains(errs[0], "HTTP 429: slow down") {
		t.Errorf("error steps %q, want one with the 429", errs)
	}
	if s, n := remoteTasks(t, p.remote.url); s != 1 || n != 1 {
		t.Errorf("the remote holds %d sessions, %d tasks; want 1, 1", s, n)
	}
}
