package main_test

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/otlpingest"
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
