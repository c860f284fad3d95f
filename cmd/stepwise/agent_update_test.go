package main_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// updServe is a running `stepwise serve`.
type updServe struct {
	cmd *exec.Cmd
	url string
}

// startUpdServe starts the binary's server on a free loopback port and waits
// until it answers.
func startUpdServe(t *testing.T, dir string, args ...string) *updServe {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, append(append([]string{}, args...), "serve", "--addr", addr)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "STEPWISE_DB=", "STEPWISE_SERVER=")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &updServe{cmd: cmd, url: "http://" + addr}
	t.Cleanup(func() { p.kill() })
	for i := 0; ; i++ {
		if resp, err := http.Get(p.url + "/v1/agents"); err == nil {
			resp.Body.Close()
			return p
		}
		if i > 200 {
			t.Fatalf("server did not start: %s", errb.String())
		}
		time.Sleep(50 * time.Millisecond) // polling a process we do not control
	}
}

// stop ends the server with SIGTERM: runs in flight are handed back to the
// queue (nothing of their interrupted calls commits) and it exits.
func (p *updServe) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v", err)
	}
}

// kill ends the server like a crash (SIGKILL).
func (p *updServe) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

func httpJSON(t *testing.T, method, url string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, b)
		}
	}
	return resp.StatusCode
}

type apiRun struct {
	ID        string `json:"id"`
	SessionID string `json:"session_id"`
	Status    string `json:"status"`
	Options   struct {
		AgentVersion string `json:"agent_version"`
	} `json:"options"`
	Error *struct {
		Message string `json:"message"`
		Code    string `json:"code"`
	} `json:"error"`
}

// waitStatus polls GET /v1/runs/{id} until the run has status want.
func waitStatus(t *testing.T, url, id, want string) apiRun {
	t.Helper()
	for i := 0; ; i++ {
		var r apiRun
		httpJSON(t, "GET", url+"/v1/runs/"+id, nil, &r)
		if r.Status == want {
			return r
		}
		if i > 2400 {
			t.Fatalf("run %s is %s, want %s (%+v)", id, r.Status, want, r.Error)
		}
		time.Sleep(25 * time.Millisecond) // polling another process
	}
}

const updateScript = `user_turns:
  - match: slow
    turns:
      - {text: "slow answer", delay: 1h}
  - match: ask
    loop: true
    turns:
      - tool_calls: [{name: ask_human, arguments: {question: "Go on?"}}]
      - text: "answered"
`

func writeAgent(t *testing.T, dir, name, instructions, extra string) {
	t.Helper()
	a := "name: " + name + "\ninstructions: " + instructions + "\nmodel: scripted:script.yaml\ntools: [ask_human]\n" + extra
	if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(a), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestServeAgentUpdate restarts `stepwise serve` with changed agent files
// while runs are parked on input and running (stopped mid model call, so
// queued): each agent's on_update decides what its unfinished runs do.
func TestServeAgentUpdate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "script.yaml"), []byte(updateScript), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"failer", "restarter", "continuer"} {
		writeAgent(t, dir, n, "version one", "")
	}
	args := []string{"--db", "sqlite:" + filepath.Join(dir, "s.db"), "--agent", "failer.yaml", "--agent", "restarter.yaml", "--agent", "continuer.yaml"}
	srv := startUpdServe(t, dir, args...)
	start := func(agent, input string) apiRun {
		var out struct{ Run apiRun }
		if code := httpJSON(t, "POST", srv.url+"/v1/runs", map[string]string{"agent": agent, "input": input}, &out); code != 201 {
			t.Fatalf("start %s: %d", agent, code)
		}
		return out.Run
	}
	parkedFail := start("failer", "ask me")
	runningFail := start("failer", "slow please")
	parkedRestart := start("restarter", "ask me")
	parkedContinue := start("continuer", "ask me")
	runningContinue := start("continuer", "slow please")
	v1 := waitStatus(t, srv.url, parkedFail.ID, "waiting").Options.AgentVersion
	waitStatus(t, srv.url, parkedRestart.ID, "waiting")
	v1c := waitStatus(t, srv.url, parkedContinue.ID, "waiting").Options.AgentVersion
	waitStatus(t, srv.url, runningFail.ID, "running")
	waitStatus(t, srv.url, runningContinue.ID, "running")
	if v1 == "" {
		t.Fatal("run records no agent version")
	}
	// Stopped while two runs are in a model call: they are queued again.
	srv.stop(t)

	writeAgent(t, dir, "failer", "version two", "on_update: fail\n")
	writeAgent(t, dir, "restarter", "version two", "on_update: restart\n")
	writeAgent(t, dir, "continuer", "version two", "on_update: continue\n")
	srv = startUpdServe(t, dir, args...)

	// Parked runs are settled at start; interrupted ones when claimed.
	for _, id := range []string{parkedFail.ID, runningFail.ID} {
		r := waitStatus(t, srv.url, id, "failed")
		if r.Error == nil || r.Error.Code != "agent_updated" || !strings.Contains(r.Error.Message, "changed from version "+v1) ||
			!strings.Contains(r.Error.Message, "on_update: fail") {
			t.Fatalf("failer run %s: %+v", id, r.Error)
		}
	}
	old := waitStatus(t, srv.url, parkedRestart.ID, "cancelled")
	if old.Error == nil || old.Error.Code != "agent_updated" || !strings.Contains(old.Error.Message, "restarted as run ") {
		t.Fatalf("restarter run: %+v", old.Error)
	}
	newID := strings.Fields(old.Error.Message[strings.Index(old.Error.Message, "restarted as run ")+len("restarted as run "):])[0]
	nr := waitStatus(t, srv.url, newID, "waiting") // the new definition asks again
	if nr.SessionID == old.SessionID || nr.Options.AgentVersion == v1 || nr.Options.AgentVersion == "" {
		t.Fatalf("restarted run %+v (old version %s)", nr, v1)
	}
	// The parked run of the continuing agent goes on once answered, on the
	// new version; the interrupted one resumes on it too.
	var inputs struct {
		Inputs []struct {
			RequestID string `json:"request_id"`
		} `json:"inputs"`
	}
	httpJSON(t, "GET", srv.url+"/v1/runs/"+parkedContinue.ID+"/inputs", nil, &inputs)
	pending := inputs.Inputs
	if len(pending) != 1 {
		t.Fatalf("pending %+v", pending)
	}
	if code := httpJSON(t, "POST", srv.url+"/v1/runs/"+parkedContinue.ID+"/inputs/"+pending[0].RequestID, json.RawMessage(`{"answer":"yes"}`), nil); code >= 300 {
		t.Fatalf("answer: %d", code)
	}
	done := waitStatus(t, srv.url, parkedContinue.ID, "completed")
	v2c := done.Options.AgentVersion
	var agent struct {
		Version  string `json:"version"`
		OnUpdate string `json:"on_update"`
	}
	httpJSON(t, "GET", srv.url+"/v1/agents/continuer", nil, &agent)
	if v2c == v1c || v2c == "" || agent.Version != v2c || agent.OnUpdate != "continue" {
		t.Fatalf("continued run version %q, was %q; agent %+v", v2c, v1c, agent)
	}
	r := waitStatus(t, srv.url, runningContinue.ID, "running")
	for i := 0; r.Options.AgentVersion != v2c; i++ {
		if i > 2400 {
			t.Fatalf("interrupted run still on version %q", r.Options.AgentVersion)
		}
		time.Sleep(25 * time.Millisecond) // polling another process
		httpJSON(t, "GET", srv.url+"/v1/runs/"+runningContinue.ID, nil, &r)
	}
}

// TestServeStreamReset: through `stepwise serve`, a scripted provider stream
// cut mid-message by a 503 and retried. The AG-UI stream (which runs the
// turn inline, so nothing is missed) ends the partial message and sends a
// CUSTOM stepwise.reset naming it before the retry's message.
func TestServeStreamReset(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := map[string]string{
		"cut.yaml":   "turns:\n  - {text: \"Hello there, friend\", chunk: 5, error: {status: 503, times: 1, after: 10}}\n",
		"agent.yaml": "name: cutter\nmodel: scripted:cut.yaml\nretry: {max_attempts: 2, initial_interval: 1ms, max_interval: 1ms}\n",
	}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv := startUpdServe(t, dir, "--db", "sqlite:"+filepath.Join(dir, "s.db"), "--agent", "agent.yaml")
	body := `{"threadId":"t1","runId":"r1","messages":[{"id":"m1","role":"user","content":"hi"}],"tools":[],"context":[],"state":{},"forwardedProps":{}}`
	req, _ := http.NewRequest("POST", srv.url+"/v1/agui/cutter", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	// The stream subscribes after the run was queued: when the failed
	// attempt ran before that, its deltas (and so its reset) are not
	// replayed; either way what a front end keeps is the final text once.
	text := map[string]string{}
	var order []string
	voided := map[string]bool{}
	finished := false
	for _, line := range strings.Split(string(raw), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		switch ev["type"] {
		case "TEXT_MESSAGE_CONTENT":
			id := ev["messageId"].(string)
			if _, ok := text[id]; !ok {
				order = append(order, id)
			}
			text[id] += ev["delta"].(string)
		case "CUSTOM":
			if ev["name"] == "stepwise.reset" {
				for _, id := range ev["value"].(map[string]any)["message_ids"].([]any) {
					voided[id.(string)] = true
				}
			}
		case "RUN_FINISHED":
			finished = true
		}
	}
	var kept []string
	for _, id := range order {
		if !voided[id] {
			kept = append(kept, text[id])
		} else if text[id] != "Hello ther" {
			t.Fatalf("reset voided %q", text[id])
		}
	}
	t.Logf("partial attempt streamed: %v", len(voided) > 0)
	if !finished || strings.Join(kept, "|") != "Hello there, friend" {
		t.Fatalf("messages kept %q, finished %v\n%s", kept, finished, raw)
	}
}
