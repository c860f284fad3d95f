package main_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/internal/fakeopenai"
)

// getJSON GETs url and decodes its JSON body into out, failing on a non-200.
func getJSON(t *testing.T, url string, out any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("GET %s: %v\n%s", url, err, body)
	}
}

type stepRow struct {
	ID          string `json:"id"`
	Kind        string `json:"kind"`
	SessionID   string `json:"session_id"`
	Annotations struct {
		StateSummary  string `json:"state_summary"`
		GoalSummary   string `json:"goal_summary"`
		ActionSummary string `json:"action_summary"`
	} `json:"annotations"`
}

// TestEventsInsideStepsThroughServe: under `stepwise serve` (events on by
// default) a run of an agent on a real OpenAI-compatible HTTP server records
// the provider request and response, the HTTP exchange (API key redacted)
// and the tool invocation, served by GET /v1/steps/{id}/events; an agent
// file with observe.events: false records none.
func TestEventsInsideStepsThroughServe(t *testing.T) {
	t.Parallel()
	fake := fakeopenai.New(fakeopenai.Config{Iterations: 1, Tool: "calculator", Args: `{"expression":"2+3"}`, Final: "five"})
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
	loud, quiet := agent("loud", ""), agent("quiet", "observe: {events: false}\n")
	db := "sqlite:" + filepath.Join(dir, "e.db")
	// stepwise run records events only with --events.
	localRun := func(args ...string) string {
		out, errOut, code := stepwise(t, dir, append([]string{"--db", db, "run", "--agent", loud, "--input", "What is 2+3?"}, args...)...)
		if code != 0 {
			t.Fatalf("run %v: exit %d\n%s\n%s", args, code, out, errOut)
		}
		return runLine.FindStringSubmatch(out)[1]
	}
	withEvents, without := localRun("--events"), localRun()
	url := launchServe(t, dir, []string{"SEEDS_FAKE_KEY=" + key}, "--db", db, "--agent", loud, "--agent", quiet)

	steps := func(agentName string) []stepRow {
		out, errOut, code := stepwise(t, dir, "--server", url, "run", "--agent", agentName, "--input", "What is 2+3?")
		if code != 0 || !strings.Contains(out, "five") {
			t.Fatalf("run %s: exit %d\n%s\n%s", agentName, code, out, errOut)
		}
		m := runLine.FindStringSubmatch(out)
		var list struct {
			Steps []stepRow `json:"steps"`
		}
		getJSON(t, url+"/v1/sessions/"+m[1]+"/steps", &list)
		return list.Steps
	}
	type event struct {
		Type    string          `json:"type"`
		Name    string          `json:"name"`
		Payload json.RawMessage `json:"payload"`
	}
	events := func(stepID string) ([]event, string) {
		resp, err := http.Get(url + "/v1/steps/" + stepID + "/events")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var out struct {
			Events []event `json:"events"`
		}
		if resp.StatusCode != 200 || json.Unmarshal(body, &out) != nil {
			t.Fatalf("events of %s: %d %s", stepID, resp.StatusCode, body)
		}
		return out.Events, string(body)
	}
	var llmTypes, toolTypes []string
	all := ""
	for _, s := range steps("loud") {
		evs, body := events(s.ID)
		all += body
		for _, ev := range evs {
			switch s.Kind {
			case "llm":
				llmTypes = append(llmTypes, ev.Type)
			case "tool":
				toolTypes = append(toolTypes, ev.Type)
			}
		}
	}
	for _, want := range []string{"provider_request", "provider_response", "http"} {
		if !strings.Contains(strings.Join(llmTypes, ","), want) {
			t.Errorf("llm step events %v: no %s", llmTypes, want)
		}
	}
	if strings.Join(toolTypes, ",") != "tool_invocation" {
		t.Errorf("tool step events %v, want [tool_invocation]", toolTypes)
	}
	if strings.Contains(all, key) || strings.Contains(all, "SeedsTestKey") {
		t.Errorf("the API key reached the recorded events")
	}
	if !strings.Contains(all, "[REDACTED]") || !strings.Contains(all, "chat/completions") || !strings.Contains(all, "2+3") {
		t.Errorf("recorded events lack the redacted Authorization header, the URL or the tool arguments:\n%.2000s", all)
	}
	count := func(session string) (n int) {
		var list struct {
			Steps []stepRow `json:"steps"`
		}
		getJSON(t, url+"/v1/sessions/"+session+"/steps", &list)
		for _, s := range list.Steps {
			evs, _ := events(s.ID)
			n += len(evs)
		}
		return n
	}
	if n, m := count(withEvents), count(without); n == 0 || m != 0 {
		t.Errorf("stepwise run: %d events with --events, %d without; want some, none", n, m)
	}
	for _, s := range steps("quiet") {
		if evs, _ := events(s.ID); len(evs) != 0 {
			t.Errorf("agent with observe.events false: step %s (%s) has %d events", s.ID, s.Kind, len(evs))
		}
	}
}

// TestSummaryCallEventsWithRunEvents: `stepwise run --events` records the
// model call that folds trimmed messages into a summary as events of its
// context step — the request the summarizer received, its response and the
// HTTP exchange — as it does for the llm steps beside it.
func TestSummaryCallEventsWithRunEvents(t *testing.T) {
	t.Parallel()
	fake := fakeopenai.New(fakeopenai.Config{Final: "noted"})
	defer fake.Close()
	dir := t.TempDir()
	agent := filepath.Join(dir, "folding.yaml")
	body := fmt.Sprintf("name: folding\nmodel: openai:gpt-4o-mini\nmodel_options: {base_url: %q, api_key_env: SEEDS_FAKE_KEY}\ncontext: {token_budget: 40, strategy: summarize}\n", fake.URL+"/v1")
	if err := os.WriteFile(agent, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	db := "sqlite:" + filepath.Join(dir, "s.db")
	session := ""
	for _, in := range []string{"the first fact is that the sky over the harbour is violet today", "the second fact: the ferry leaves at noon from pier four", "what were the facts?"} {
		args := []string{"--db", db, "run", "--agent", agent, "--events", "--input", in}
		if session != "" {
			args = append(args, "--session", session)
		}
		out, errOut, code := stepwise(t, dir, args...)
		if code != 0 {
			t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
		}
		session = runLine.FindStringSubmatch(out)[1]
	}
	url := launchServe(t, dir, nil, "--db", db, "--agent", agent)
	var list struct {
		Steps []struct {
			ID      string `json:"id"`
			Kind    string `json:"kind"`
			Name    string `json:"name"`
			Content string `json:"content"`
		} `json:"steps"`
	}
	getJSON(t, url+"/v1/sessions/"+session+"/steps", &list)
	summaries, sawFirst := 0, false
	for _, s := range list.Steps {
		if s.Kind != "system" || s.Name != "context" {
			continue
		}
		summaries++
		var evs struct {
			Events []struct {
				Type    string          `json:"type"`
				Payload json.RawMessage `json:"payload"`
			} `json:"events"`
		}
		getJSON(t, url+"/v1/steps/"+s.ID+"/events", &evs)
		var types []string
		var request string
		for _, ev := range evs.Events {
			types = append(types, ev.Type)
			if ev.Type == "provider_request" {
				request = string(ev.Payload)
			}
		}
		got := strings.Join(types, ",")
		for _, want := range []string{"provider_request", "provider_response", "http"} {
			if !strings.Contains(got, want) {
				t.Errorf("context step %s (%q): events [%s], no %s", s.ID, s.Content, got, want)
			}
		}
		if !strings.Contains(request, "Summarize the conversation") || !strings.Contains(request, "user: the") {
			t.Errorf("the summarizer's recorded request is not what it received: %.500s", request)
		}
		sawFirst = sawFirst || strings.Contains(request, "violet")
	}
	if summaries == 0 {
		t.Fatalf("no context step was recorded: %+v", list.Steps)
	}
	if !sawFirst {
		t.Errorf("no recorded summary request holds the first, trimmed message")
	}
}
