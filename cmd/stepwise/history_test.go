package main_test

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/stepwise-run/stepwise/internal/fakeopenai"
	"github.com/stepwise-run/stepwise/steptype"
)

// historySteps is a long conversation in the step wire format: turns,
// parallel tool calls answered out of order, and new turns that cut calls
// still open.
func historySteps(n int) []*steptype.Step {
	var out []*steptype.Step
	for i := 0; len(out) < n; i++ {
		out = append(out, &steptype.Step{Kind: steptype.KindUser, Role: steptype.RoleUser, Content: fmt.Sprintf("question %d: what about <x & y>?", i)})
		switch i % 3 {
		case 0:
			out = append(out, &steptype.Step{Kind: steptype.KindLLM, Role: steptype.RoleAssistant, Content: fmt.Sprintf("answer %d", i)})
		default:
			calls := []steptype.ToolCall{{ID: fmt.Sprintf("a%d", i), Name: "calculator", Arguments: json.RawMessage(`{"expression":"1+1"}`)},
				{ID: fmt.Sprintf("b%d", i), Name: "calculator", Arguments: json.RawMessage(`{"expression":"2+2"}`)}}
			out = append(out, &steptype.Step{Kind: steptype.KindLLM, Role: steptype.RoleAssistant, ToolCalls: calls},
				&steptype.Step{Kind: steptype.KindTool, Role: steptype.RoleTool, ToolCallID: calls[1].ID, ToolName: "calculator", Content: "4"})
			if i%3 == 1 { // the other result, after; else the next turn cuts it
				out = append(out, &steptype.Step{Kind: steptype.KindTool, Role: steptype.RoleTool, ToolCallID: calls[0].ID, ToolName: "calculator", Content: "2"},
					&steptype.Step{Kind: steptype.KindLLM, Role: steptype.RoleAssistant, Content: fmt.Sprintf("so 2 and 4 (%d)", i)})
			}
		}
	}
	return out
}

// postJSON posts v and decodes the answer into out.
func postJSON(t *testing.T, url string, v, out any) {
	t.Helper()
	b, _ := json.Marshal(v)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var p map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&p)
		t.Fatalf("POST %s: %s %v", url, resp.Status, p)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLongSessionTurnUsesCheckpoint runs a new turn through `stepwise run
// --server` on sessions of 3,000 steps ingested over the HTTP API, for an
// agent without a token budget and one with a budget: the session whose
// context checkpoints were derived by its first turn sends the model
// exactly the conversation, and records exactly the fingerprint, of an
// identical session whose checkpoints were deleted (a full rebuild); a
// session whose newest checkpoint was tampered with records another
// fingerprint, so the turn did start from the checkpoint.
func TestLongSessionTurnUsesCheckpoint(t *testing.T) {
	t.Parallel()
	fake := fakeopenai.New(fakeopenai.Config{Final: "noted"})
	defer fake.Close()
	dir := t.TempDir()
	const key = "sk-proj-SeedsTestKey0123456789abcdefghijklmnop"
	agent := func(name, extra string) string {
		p := filepath.Join(dir, name+".yaml")
		body := fmt.Sprintf("name: %s\nmodel: openai:gpt-4o-mini\nmodel_options: {base_url: %q, api_key_env: SEEDS_FAKE_KEY}\ntools: [calculator]\n%s", name, fake.URL+"/v1", extra)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	full, budget := agent("full", ""), agent("budget", "context: {token_budget: 3000}\n")
	dbPath := filepath.Join(dir, "h.db")
	url := launchServe(t, dir, []string{"SEEDS_FAKE_KEY=" + key}, "--db", "sqlite:"+dbPath, "--agent", full, "--agent", budget)
	db, err := sql.Open("sqlite", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	history := historySteps(3000)

	// turn runs one turn and returns the messages the model got and the
	// fingerprint recorded on the model step.
	turn := func(agentName, session string) (json.RawMessage, string) {
		t.Helper()
		before := len(fake.Bodies())
		if out, errOut, code := stepwise(t, dir, "--server", url, "run", "--agent", agentName, "--session", session, "--input", "and now?"); code != 0 {
			t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
		}
		bodies := fake.Bodies()
		if len(bodies) != before+1 {
			t.Fatalf("%d model requests, want 1", len(bodies)-before)
		}
		var req struct{ Messages json.RawMessage }
		if err := json.Unmarshal(bodies[before], &req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get(url + "/v1/sessions/" + session + "/steps?start_seq=3000")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var list struct{ Steps []*steptype.Step }
		if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
			t.Fatal(err)
		}
		fp := ""
		for _, s := range list.Steps {
			if s.Kind == steptype.KindLLM {
				fp = s.Fingerprint
			}
		}
		if fp == "" {
			t.Fatal("no model step recorded")
		}
		return req.Messages, fp
	}
	for _, agentName := range []string{"full", "budget"} {
		t.Run(agentName, func(t *testing.T) {
			var ref, cp, tampered string
			for _, id := range []*string{&ref, &cp, &tampered} {
				var s struct{ ID string }
				postJSON(t, url+"/v1/sessions", map[string]string{"agent": agentName}, &s)
				*id = s.ID
				for i := 0; i < len(history); i += 1000 {
					postJSON(t, url+"/v1/sessions/"+s.ID+"/steps", map[string]any{"steps": history[i:min(i+1000, len(history))]}, nil)
				}
				turn(agentName, s.ID) // derives the checkpoints
			}
			var n int
			if err := db.QueryRow(`SELECT count(*) FROM context_checkpoints WHERE session_id = ?`, cp).Scan(&n); err != nil || n < 3000/512 {
				t.Fatalf("%d checkpoints after the first turn (%v), want at least %d", n, err, 3000/512)
			}
			if _, err := db.Exec(`DELETE FROM context_checkpoints WHERE session_id = ?`, ref); err != nil {
				t.Fatal(err)
			}
			res, err := db.Exec(`UPDATE context_checkpoints SET state = CAST(json_set(CAST(state AS TEXT), '$.head', 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=',
				'$.block_hash', 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=') AS BLOB)
				WHERE session_id = ? AND sequence = (SELECT max(sequence) FROM context_checkpoints WHERE session_id = ?)`, tampered, tampered)
			if err != nil {
				t.Fatal(err)
			}
			if n, _ := res.RowsAffected(); n != 1 {
				t.Fatalf("tampered with %d checkpoints, want 1", n)
			}
			wantMsgs, wantFP := turn(agentName, ref)
			gotMsgs, gotFP := turn(agentName, cp)
			if !bytes.Equal(gotMsgs, wantMsgs) {
				t.Errorf("the checkpointed turn sent other messages than the full rebuild:\n got %.400s\nwant %.400s", gotMsgs, wantMsgs)
			}
			if gotFP != wantFP {
				t.Errorf("checkpointed fingerprint %s, full rebuild %s", gotFP, wantFP)
			}
			var msgs []json.RawMessage
			_ = json.Unmarshal(gotMsgs, &msgs)
			if agentName == "budget" && len(msgs) > 1000 || agentName == "full" && len(msgs) < len(history) {
				t.Errorf("agent %s sent %d messages for a %d-step session", agentName, len(msgs), len(history))
			}
			if _, fp := turn(agentName, tampered); fp == wantFP {
				t.Errorf("a tampered checkpoint left the fingerprint as it was: the turn did not use it")
			}
		})
	}
}
