package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

// elicitAgent writes an agent whose one MCP server (internal/testdeps/mcp/
// elicit-server.mjs, on the official TypeScript SDK) asks the user during
// its tool call, and a script that calls it once. It returns the agent
// file and the server's call log.
func elicitAgent(t *testing.T, dir string) (agent, callLog string) {
	t.Helper()
	server, _ := filepath.Abs(filepath.Join(mcpDeps, "elicit-server.mjs"))
	node := mcpNode(t)
	callLog = filepath.Join(dir, "calls.jsonl")
	agentYAML := fmt.Sprintf(`name: booker
model: scripted:script.yaml
mcp_servers:
  - name: booking
    command: %q
    args: [%q]
    env: {CALL_LOG: %q}
    elicitation: true
`, node, server, callLog)
	script := `strict: true
turns:
  - text: "Booking."
    tool_calls:
      - {name: book_table, arguments: {day: friday}}
  - text: "Your table is booked."
`
	for name, body := range map[string]string{"agent.yaml": agentYAML, "script.yaml": script} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "agent.yaml"), callLog
}

// checkBooked checks the session of a booked run: one tool step for the
// call whose outputs are the server's structured content, the input step
// answered, and the server's call log: two calls with one idempotency key,
// the first cancelled at the elicitation, the second answered.
func checkBooked(t *testing.T, db, session, callLog string) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: db, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	steps, err := st.StepList(context.Background(), &store.StepListParams{SessionID: session})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	var out struct {
		Booked         bool   `json:"booked"`
		PartySize      int    `json:"party_size"`
		Note           string `json:"note"`
		IdempotencyKey string `json:"idempotency_key"`
	}
	for _, s := range steps {
		kinds = append(kinds, string(s.Kind))
		if s.Kind == steptype.KindTool {
			if err := json.Unmarshal(s.Outputs, &out); err != nil || s.Content != "Booked 4 for friday." {
				t.Errorf("tool step: content %q outputs %s", s.Content, s.Outputs)
			}
		}
		if s.Kind == steptype.KindInput && (s.Status != steptype.StepCompleted || !strings.Contains(string(s.Inputs), "How many people for friday?")) {
			t.Errorf("input step %s: %s", s.Status, s.Inputs)
		}
	}
	if strings.Join(kinds, ",") != "user,llm,input,tool,llm" {
		t.Errorf("steps %v", kinds)
	}
	if !out.Booked || out.PartySize != 4 || out.Note != "window" || out.IdempotencyKey == "" {
		t.Errorf("structured output %+v", out)
	}
	b, err := os.ReadFile(callLog)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var calls []struct {
		Key    string `json:"key"`
		Action string `json:"action"`
	}
	for _, l := range lines {
		var c struct {
			Key    string `json:"key"`
			Action string `json:"action"`
		}
		_ = json.Unmarshal([]byte(l), &c)
		calls = append(calls, c)
	}
	if len(calls) != 2 || calls[0].Key != out.IdempotencyKey || calls[1].Key != out.IdempotencyKey || calls[0].Action == "accept" || calls[1].Action != "accept" {
		t.Errorf("the server's calls:\n%s", b)
	}
}

// TestMCPElicitationCLI: `stepwise run` parks on the MCP server's
// elicitation (exit 3, the request's message printed); a bad answer is
// refused and changes nothing; `stepwise input … --resume` from a new
// process answers it, the tool call is made again with the same
// idempotency key and the server gets the answer.
func TestMCPElicitationCLI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	agent, callLog := elicitAgent(t, dir)
	db := filepath.Join(dir, "e.db")
	out, errOut, code := stepwise(t, dir, "--db", "sqlite:"+db, "run", "--agent", agent, "--input", "book friday")
	if code != 3 {
		t.Fatalf("run: exit %d, want 3 (waiting)\n%s\n%s", code, out, errOut)
	}
	m, p := runLine.FindStringSubmatch(out), pendingLine.FindStringSubmatch(out+errOut)
	if m == nil || p == nil || !strings.Contains(out+errOut, "How many people for friday?") {
		t.Fatalf("run output:\n%s\n%s", out, errOut)
	}
	session, run, req := m[1], m[2], p[1]
	if _, errOut, code := stepwise(t, dir, "--db", "sqlite:"+db, "input", run, req, `{"party_size":0}`); code == 0 || !strings.Contains(errOut, "party_size") {
		t.Fatalf("bad answer: exit %d %s", code, errOut)
	}
	out, errOut, code = stepwise(t, dir, "--db", "sqlite:"+db, "input", run, req, `{"party_size":4,"note":"window"}`, "--resume", "--agent", agent)
	if code != 0 || !strings.Contains(out, "Your table is booked.") {
		t.Fatalf("answer: exit %d\n%s\n%s", code, out, errOut)
	}
	checkBooked(t, db, session, callLog)
}

// TestMCPElicitationServeRestart: over the HTTP API of `stepwise serve`, a
// run parks on the server's elicitation (GET /v1/inputs shows the request
// with the requested schema); the server is killed and started again; the
// answer posted to the new server resumes the run, which completes with
// the tool's structured output.
func TestMCPElicitationServeRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	agent, callLog := elicitAgent(t, dir)
	db := filepath.Join(dir, "e.db")
	srv := startServe(t, dir, db, agent)
	var created struct {
		Run struct {
			ID        string `json:"id"`
			SessionID string `json:"session_id"`
		} `json:"run"`
	}
	postStatus(t, srv.url+"/v1/runs", `{"agent":"booker","input":"book friday"}`, http.StatusCreated, &created)
	var pending struct {
		Inputs []struct {
			RequestID string `json:"request_id"`
			Request   struct {
				Prompt string          `json:"prompt"`
				Schema json.RawMessage `json:"schema"`
			} `json:"request"`
		} `json:"inputs"`
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(pending.Inputs) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no pending request")
		}
		time.Sleep(20 * time.Millisecond)
		getJSON(t, srv.url+"/v1/runs/"+created.Run.ID+"/inputs", &pending)
	}
	in := pending.Inputs[0]
	if in.Request.Prompt != "How many people for friday?" || !strings.Contains(string(in.Request.Schema), `"party_size"`) {
		t.Fatalf("request %+v %s", in.Request, in.Request.Schema)
	}
	_ = srv.cmd.Process.Kill()
	_ = srv.cmd.Wait()
	srv = startServe(t, dir, db, agent)
	postStatus(t, srv.url+"/v1/runs/"+created.Run.ID+"/inputs/"+in.RequestID, `{"answer":{"party_size":0}}`, http.StatusUnprocessableEntity, nil)
	postStatus(t, srv.url+"/v1/runs/"+created.Run.ID+"/inputs/"+in.RequestID, `{"answer":{"party_size":4,"note":"window"}}`, http.StatusOK, nil)
	var run struct {
		Status string `json:"status"`
		Output string `json:"output"`
	}
	for run.Status != "completed" {
		if time.Now().After(deadline.Add(30*time.Second)) || run.Status == "failed" {
			t.Fatalf("run %+v", run)
		}
		time.Sleep(20 * time.Millisecond)
		getJSON(t, srv.url+"/v1/runs/"+created.Run.ID, &run)
	}
	if run.Output != "Your table is booked." {
		t.Errorf("output %q", run.Output)
	}
	srv.term(t)
	checkBooked(t, db, created.Run.SessionID, callLog)
}

// postStatus posts body, checks the status and decodes the answer into v.
func postStatus(t *testing.T, url, body string, want int, v any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("POST %s: %s, want %d\n%s", url, resp.Status, want, b)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("POST %s: %v\n%s", url, err, b)
		}
	}
}
