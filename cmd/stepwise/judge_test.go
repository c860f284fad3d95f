package main_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// judgedAgent writes an agent file on the scripted model with summaries of
// its llm steps and a judge with one rubric (3 + 1 weights, pass 0.7; the
// scripted judge passes "correct" and fails "concise").
func judgedAgent(t *testing.T, dir string, onRunEnd bool) string {
	t.Helper()
	files := map[string]string{
		"script.yaml": `turns:
  - tool_calls: [{name: calculator, arguments: {expression: "6*7"}}]
  - text: "The answer is 42."
`,
		"judge.yaml": `turns:
  - text: '{"criteria": [{"name": "correct", "pass": true, "reason": "42 is right."}, {"name": "concise", "pass": false, "reason": "It could be shorter."}]}'
`,
		"summary.yaml": `turns:
  - text: '{"state": "user asked for 6*7", "goal": "compute a product", "action": "called the calculator"}'
`,
		"agent.yaml": `name: judged
model: scripted:script.yaml
tools: [calculator]
observe:
  summaries: {model: scripted:summary.yaml, kinds: [llm]}
  judge:
    model: scripted:judge.yaml
    on_run_end: ` + map[bool]string{true: "true", false: "false"}[onRunEnd] + `
    rubrics:
      - name: quality
        pass_score: 0.7
        criteria:
          - {name: correct, description: The answer is arithmetically right., weight: 3, required: true}
          - {name: concise, description: The answer is one sentence.}
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "agent.yaml")
}

type judgedEval struct {
	Name    string  `json:"name"`
	Source  string  `json:"source"`
	Score   float64 `json:"score"`
	Label   string  `json:"label"`
	RunID   string  `json:"run_id"`
	Details struct {
		Rubric   string `json:"rubric"`
		Criteria []struct {
			Name   string  `json:"name"`
			Pass   bool    `json:"pass"`
			Score  float64 `json:"score"`
			Reason string  `json:"reason"`
		} `json:"criteria"`
	} `json:"details"`
}

func checkJudgment(t *testing.T, where string, evs []judgedEval, runID string) {
	t.Helper()
	var q *judgedEval
	for i := range evs {
		if evs[i].Name == "quality" {
			q = &evs[i]
		}
	}
	if q == nil {
		t.Fatalf("%s: no quality eval in %+v", where, evs)
	}
	c := q.Details.Criteria
	if q.Source != "llm-judge" || q.Score != 0.75 || q.Label != "pass" || q.RunID != runID || q.Details.Rubric != "quality" ||
		len(c) != 2 || !c[0].Pass || c[0].Score != 1 || c[0].Reason != "42 is right." || c[1].Pass || c[1].Score != 0 || c[1].Reason != "It could be shorter." {
		t.Fatalf("%s: quality eval %+v", where, *q)
	}
}

// TestJudgeAndSummariesThroughBinary: an agent file's observe.judge grades
// each run when it ends (stepwise run) and on demand (stepwise eval judge
// RUN|SESSION, POST /v1/runs/{id}/judge), with per-criterion verdicts and
// reasons; observe.summaries writes the summaries shown by stepwise steps
// and the steps API.
func TestJudgeAndSummariesThroughBinary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	agent := judgedAgent(t, dir, true)
	db := "sqlite:" + filepath.Join(dir, "j.db")
	out, errOut, code := stepwise(t, dir, "--db", db, "run", "--agent", agent, "--input", "What is 6*7?")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	m := runLine.FindStringSubmatch(out)
	session, run := m[1], m[2]

	// Judged when the run ended.
	out, errOut, code = stepwise(t, dir, "--db", db, "eval", "list", "run", run)
	var listed []judgedEval
	if code != 0 || json.Unmarshal([]byte(out), &listed) != nil {
		t.Fatalf("eval list: exit %d %s\n%s", code, errOut, out)
	}
	checkJudgment(t, "at run end", listed, run)

	// On demand, by run and by session.
	for _, id := range []string{run, session} {
		out, errOut, code = stepwise(t, dir, "--db", db, "eval", "judge", id, "--agent", agent, "--json")
		var got struct{ Evals []judgedEval }
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
			t.Fatalf("eval judge %s: exit %d %s\n%s", id, code, errOut, out)
		}
		checkJudgment(t, "eval judge "+id, got.Evals, run)
	}
	out, _, code = stepwise(t, dir, "--db", db, "eval", "judge", run, "--agent", agent)
	if code != 0 || !strings.Contains(out, "quality") || !strings.Contains(out, "FAIL  concise (weight 1): It could be shorter.") {
		t.Fatalf("eval judge table: exit %d\n%s", code, out)
	}
	if _, errOut, code := stepwise(t, dir, "--db", db, "eval", "judge", run); code != 2 || !strings.Contains(errOut, "--agent") {
		t.Fatalf("eval judge without --agent: exit %d %q", code, errOut)
	}

	// Summaries of the llm steps, in stepwise steps.
	out, _, code = stepwise(t, dir, "--db", db, "steps", session)
	if code != 0 || strings.Count(out, "↳ state: user asked for 6*7 · goal: compute a product · action: called the calculator") != 2 {
		t.Fatalf("steps with summaries (want 2 llm steps summarized): exit %d\n%s", code, out)
	}

	// Over HTTP: the steps carry the summaries; the judge endpoint.
	url := launchServe(t, dir, nil, "--db", db, "--agent", agent)
	var list struct{ Steps []stepRow }
	getJSON(t, url+"/v1/sessions/"+session+"/steps", &list)
	summarized := 0
	for _, s := range list.Steps {
		if s.Annotations.ActionSummary == "called the calculator" {
			summarized++
			if s.Kind != "llm" {
				t.Errorf("a %s step was summarized (kinds: [llm])", s.Kind)
			}
		}
	}
	if summarized != 2 {
		t.Errorf("steps API: %d summarized steps, want 2", summarized)
	}
	resp, err := http.Post(url+"/v1/runs/"+run+"/judge", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var got struct{ Evals []judgedEval }
	if resp.StatusCode != 200 || json.Unmarshal(body, &got) != nil {
		t.Fatalf("POST judge: %d %s", resp.StatusCode, body)
	}
	checkJudgment(t, "POST /v1/runs/{id}/judge", got.Evals, run)
	out, errOut, code = stepwise(t, dir, "--server", url, "eval", "judge", session, "--json")
	var remote struct{ Evals []judgedEval }
	if code != 0 || json.Unmarshal([]byte(out), &remote) != nil {
		t.Fatalf("eval judge --server SESSION: exit %d %s\n%s", code, errOut, out)
	}
	checkJudgment(t, "eval judge --server SESSION", remote.Evals, run)
	// A run of an agent without a judge: 422 problem.
	out, _, _ = stepwise(t, dir, "--server", url, "run", "--agent", "analyst", "--input", "What is the population of Paris?")
	other := runLine.FindStringSubmatch(out)
	resp, err = http.Post(url+"/v1/runs/"+other[2]+"/judge", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 422 || !strings.Contains(string(body), "no_judge") {
		t.Fatalf("judge of an agent without a judge: %d %s", resp.StatusCode, body)
	}
}
