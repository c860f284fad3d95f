package main_test

import (
	"encoding/json"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/otlpingest"
	"github.com/stepwise-run/stepwise/steptype"
)

// TestServeOTLP: `stepwise serve` is an OTLP/HTTP receiver. An OTLP/JSON
// export (hex ids, enum integers) of a GenAI chat span becomes a user and
// an llm step, read back with the CLI in --server mode.
func TestServeOTLP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	url := startServe(t, dir, filepath.Join(dir, "o.db"), "").url
	const trace = "5b8efff798038103d269b633813fc60c"
	now := time.Now().UnixNano()
	body := `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"json-agent"}}]},
	"scopeSpans":[{"spans":[{"traceId":"` + trace + `","spanId":"eee19b7ec3c1b174","name":"chat m","kind":3,
	"startTimeUnixNano":"` + itoa(now) + `","endTimeUnixNano":"` + itoa(now+1e6) + `","status":{"code":1},
	"attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"chat"}},
	{"key":"gen_ai.request.model","value":{"stringValue":"m1"}},
	{"key":"gen_ai.usage.input_tokens","value":{"intValue":"7"}},
	{"key":"gen_ai.input.messages","value":{"stringValue":"[{\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"content\":\"ping\"}]}]"}},
	{"key":"gen_ai.output.messages","value":{"stringValue":"[{\"role\":\"assistant\",\"parts\":[{\"type\":\"text\",\"content\":\"pong\"}]}]"}}]}]}]}]}`
	resp, err := http.Post(url+"/v1/traces", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("export: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	sid := otlpingest.TraceSessionID(trace)
	for i := 0; ; i++ {
		out, _, code := stepwise(t, dir, "--server", url, "steps", sid)
		if code == 0 && strings.Contains(out, "ping") && strings.Contains(out, "pong") {
			break
		}
		if i > 100 {
			t.Fatalf("steps of %s: exit %d\n%s", sid, code, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	out, _, code := stepwise(t, dir, "--server", url, "sessions")
	if code != 0 || !strings.Contains(out, sid) || !strings.Contains(out, "json-agent") {
		t.Fatalf("sessions: %d\n%s", code, out)
	}
}

func itoa(n int64) string {
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

// TestServeLangSmith: `stepwise serve` takes LangSmith run trees under
// /langsmith. A batch of a chain with an llm child (ended in the same
// batch) becomes a user and an llm step in the thread's session.
func TestServeLangSmith(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	url := startServe(t, dir, filepath.Join(dir, "l.db"), "").url
	t0 := time.Now().Add(-time.Second).UTC()
	ts := func(d time.Duration) string { return t0.Add(d).Format(time.RFC3339Nano) }
	body := `{"post":[{"id":"root-1","trace_id":"root-1","name":"ls-cli-agent","run_type":"chain","start_time":"` + ts(0) + `","end_time":"` + ts(3*time.Millisecond) + `","extra":{"metadata":{"thread_id":"cli-thread"}}},
	{"id":"llm-1","trace_id":"root-1","parent_run_id":"root-1","name":"ChatOpenAI","run_type":"llm","start_time":"` + ts(time.Millisecond) + `","end_time":"` + ts(2*time.Millisecond) + `",
	"inputs":{"messages":[{"role":"user","content":"ping"}]},"outputs":{"choices":[{"message":{"role":"assistant","content":"pong"}}]},
	"extra":{"metadata":{"thread_id":"cli-thread","ls_provider":"openai","ls_model_name":"gpt-4o-mini"}}}]}`
	resp, err := http.Post(url+"/langsmith/runs/batch", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("batch: %s", resp.Status)
	}
	sid := otlpingest.SessionID("cli-thread")
	for i := 0; ; i++ {
		out, _, code := stepwise(t, dir, "--server", url, "steps", sid)
		if code == 0 && strings.Contains(out, "ping") && strings.Contains(out, "pong") {
			break
		}
		if i > 100 {
			t.Fatalf("steps of %s: exit %d\n%s", sid, code, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	out, _, code := stepwise(t, dir, "--server", url, "sessions")
	if code != 0 || !strings.Contains(out, sid) || !strings.Contains(out, "ls-cli-agent") {
		t.Fatalf("sessions: %d\n%s", code, out)
	}
}

// TestServeIngestPricesSteps: steps recorded elsewhere cost what the
// price table says, as llm steps run here do — an OTLP chat span of
// gpt-4o and a step posted with model openai:gpt-4o-mini — and the
// session's total counts them. A cost the sender reported is kept, and a
// negative one is refused.
func TestServeIngestPricesSteps(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	url := startServe(t, dir, filepath.Join(dir, "p.db"), "").url
	const trace = "6c8efff798038103d269b633813fc60d"
	now := time.Now().UnixNano()
	body := `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"priced"}}]},
	"scopeSpans":[{"spans":[{"traceId":"` + trace + `","spanId":"fee19b7ec3c1b174","name":"chat gpt-4o","kind":3,
	"startTimeUnixNano":"` + itoa(now) + `","endTimeUnixNano":"` + itoa(now+1e6) + `","status":{"code":1},
	"attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"chat"}},
	{"key":"gen_ai.provider.name","value":{"stringValue":"openai"}},
	{"key":"gen_ai.request.model","value":{"stringValue":"gpt-4o"}},
	{"key":"gen_ai.usage.input_tokens","value":{"intValue":"1000"}},
	{"key":"gen_ai.usage.output_tokens","value":{"intValue":"100"}},
	{"key":"gen_ai.input.messages","value":{"stringValue":"[{\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"content\":\"ping\"}]}]"}},
	{"key":"gen_ai.output.messages","value":{"stringValue":"[{\"role\":\"assistant\",\"parts\":[{\"type\":\"text\",\"content\":\"pong\"}]}]"}}]}]}]}]}`
	resp, err := http.Post(url+"/v1/traces", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("export: %s", resp.Status)
	}
	sid := otlpingest.TraceSessionID(trace)
	// gpt-4o: 1000 × $2.50/M + 100 × $10/M.
	const spanCost = 0.0025 + 0.001
	var llm *steptype.Step
	for deadline := time.Now().Add(20 * time.Second); llm == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no llm step ingested in %s", sid)
		}
		for _, s := range getSteps(t, url, sid) {
			if s.Kind == steptype.KindLLM {
				llm = s
			}
		}
	}
	if !near(llm.Metrics.Cost, spanCost) {
		t.Fatalf("OTLP gpt-4o step cost %v, want %v (metrics %+v)", llm.Metrics.Cost, spanCost, llm.Metrics)
	}

	var sess struct{ ID string }
	postJSON(t, url+"/v1/sessions", map[string]string{"title": "posted"}, &sess)
	postJSON(t, url+"/v1/sessions/"+sess.ID+"/steps", map[string]any{"steps": []map[string]any{
		{"kind": "user", "role": "user", "content": "hi"},
		{"kind": "llm", "role": "assistant", "content": "hello",
			"metrics": map[string]any{"model": "openai:gpt-4o-mini", "input_tokens": 2000, "output_tokens": 1000}},
		{"kind": "llm", "role": "assistant", "content": "again",
			"metrics": map[string]any{"model": "openai:gpt-4o-mini", "input_tokens": 2000, "output_tokens": 1000, "cost": 0.5}},
	}}, nil)
	// gpt-4o-mini: 2000 × $0.15/M + 1000 × $0.60/M.
	const postedCost = 0.0003 + 0.0006
	steps := getSteps(t, url, sess.ID)
	if len(steps) != 3 || !near(steps[1].Metrics.Cost, postedCost) || steps[2].Metrics.Cost != 0.5 {
		t.Fatalf("posted step costs: %+v", steps)
	}
	resp, err = http.Get(url + "/v1/sessions/" + sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got steptype.Session
	err = json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if err != nil || !near(got.Cost, postedCost+0.5) {
		t.Fatalf("session cost %v (%v), want %v", got.Cost, err, postedCost+0.5)
	}

	bad := `{"steps":[{"kind":"llm","role":"assistant","content":"x","metrics":{"model":"openai:gpt-4o-mini","cost":-1}}]}`
	resp, err = http.Post(url+"/v1/sessions/"+sess.ID+"/steps", "application/json", strings.NewReader(bad))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("negative cost: %s, want 422", resp.Status)
	}
	if n := len(getSteps(t, url, sess.ID)); n != 3 {
		t.Fatalf("a refused step was recorded: %d steps", n)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

func getSteps(t *testing.T, url, session string) []*steptype.Step {
	t.Helper()
	resp, err := http.Get(url + "/v1/sessions/" + session + "/steps")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct{ Steps []*steptype.Step }
	if resp.StatusCode == http.StatusNotFound {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	return list.Steps
}
