package main_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/otlpingest"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

// TestOTLPRoundTrip: a run of `stepwise run` exported with the current
// GenAI conventions (OTEL_EXPORTER_OTLP_ENDPOINT, content captured:
// gen_ai.input.messages, gen_ai.output.messages, gen_ai.provider.name,
// invoke_agent / chat / execute_tool spans) and ingested by a second
// `stepwise serve` records the same conversation there: the user's
// message, the model's tool call, the tool's result and the answer.
func TestOTLPRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	receiver := startServe(t, dir, filepath.Join(dir, "receiver.db"), "")
	script := `strict: true
turns:
  - text: "Computing."
    tool_calls:
      - {name: calculator, arguments: {expression: "6*7"}}
  - text: "It is 42."
`
	agent := "name: math\ninstructions: Compute.\nmodel: scripted:script.yaml\ntools: [calculator]\n"
	for name, body := range map[string]string{"agent.yaml": agent, "script.yaml": script} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := stepwiseEnv(t, dir, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + receiver.url, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=",
		"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true"},
		"--db", "sqlite:"+filepath.Join(dir, "source.db"), "run", "--agent", filepath.Join(dir, "agent.yaml"), "--input", "What is 6*7?")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	m := runLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no run line:\n%s", out)
	}
	sid := otlpingest.SessionID(m[1]) // gen_ai.conversation.id is the source session
	type row struct {
		Kind      string `json:"kind"`
		Content   string `json:"content"`
		ToolCalls []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"tool_calls"`
		ToolCallID string `json:"tool_call_id"`
	}
	var rows []row
	deadline := time.Now().Add(30 * time.Second)
	for len(rows) < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("receiver has %d steps of %s: %+v", len(rows), sid, rows)
		}
		time.Sleep(50 * time.Millisecond)
		var page struct {
			Steps []row `json:"steps"`
		}
		if resp, err := http.Get(receiver.url + "/v1/sessions/" + sid + "/steps"); err == nil {
			if resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&page) == nil {
				rows = page.Steps
			}
			resp.Body.Close()
		}
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.Kind+":"+r.Content)
	}
	// The source session's own steps, as recorded.
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(dir, "source.db"), ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	src, err := st.StepList(context.Background(), &store.StepListParams{SessionID: m[1]})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, s := range src {
		want = append(want, string(s.Kind)+":"+s.Content)
	}
	if len(want) != 4 || want[0] != "user:What is 6*7?" || want[3] != "llm:It is 42." {
		t.Fatalf("source steps %q", want)
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("received steps %q, want %q", got, want)
	}
	if c := rows[1].ToolCalls; len(c) != 1 || c[0].Name != "calculator" || c[0].ID != src[1].ToolCalls[0].ID || rows[2].ToolCallID != c[0].ID {
		t.Fatalf("received tool call %+v answered by %q; source %+v", c, rows[2].ToolCallID, src[1].ToolCalls)
	}
}
