package otlpingest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/internal/fakeopenai"
	"github.com/stepwise-run/stepwise/otlpingest"
	"github.com/stepwise-run/stepwise/server"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// TestLangSmithTraceable: the langsmith client's traceable and wrapOpenAI
// (multipart ingest, its default) trace an agent with a retriever and a
// tool loop of two calls against the local OpenAI-compatible fake; the
// thread is the session named by session_id metadata.
func TestLangSmithTraceable(t *testing.T) {
	fake := fakeopenai.New(fakeopenai.Config{Iterations: 2, Tool: "echo", Args: `{"n":1}`, Final: "all echoed"})
	defer fake.Close()
	e := newEnv(t, server.Config{})
	trace := e.runScript("langsmith.mjs", "traceable", "FAKE_URL="+fake.URL, "SESSION=ls-thread-1")
	sid := otlpingest.SessionID("ls-thread-1")
	got := render(e.waitSteps(sid, 7))
	// The user message is known from the first model call's input, after
	// the retriever ran.
	want := `1 custom docs
2 user user role=user content="Echo twice."
3 llm llm role=assistant call=call_0:echo:{"n":1} tokens=12/5 model=openai/fake-model
4 tool tools role=tool content="echo {\"n\":1}" answers=call_0:echo args={"n":1}
5 llm llm role=assistant call=call_1:echo:{"n":1} tokens=12/5 model=openai/fake-model
6 tool tools role=tool content="echo {\"n\":1}" answers=call_1:echo args={"n":1}
7 llm llm role=assistant content="all echoed" tokens=12/5 model=openai/fake-model
`
	if got != want {
		t.Fatalf("step log:\n%s\nwant:\n%s", got, want)
	}
	run, err := e.st.RunGet(context.Background(), &store.RunGetParams{ID: otlpingest.RunID(trace)})
	if err != nil || run.Status != steptype.RunCompleted || run.Agent != "ls-agent" || run.SessionID != sid {
		t.Fatalf("run %+v %v", run, err)
	}
	e.checkViews(sid, 7, "completed")
}

// TestLangSmithBatchAndSingle: creates and updates sent apart, through the
// batch, multipart and single-run endpoints, then all again: one step per
// run, whatever the endpoint and however often it is sent.
func TestLangSmithBatchAndSingle(t *testing.T) {
	for _, sc := range []string{"batch", "single"} {
		t.Run(sc, func(t *testing.T) {
			e := newEnv(t, server.Config{})
			trace := e.runScript("langsmith.mjs", sc, "SESSION=ls-"+sc)
			sid := otlpingest.SessionID("ls-" + sc)
			got := render(e.waitSteps(sid, 3))
			want := `1 user user role=user content="Weather?"
2 llm llm role=assistant call=call_w:weather:{"city":"Paris"} tokens=11/4 model=openai/gpt-4o-mini
3 tool tools role=tool content="sunny" answers=call_w:weather args={"city":"Paris"}
`
			if got != want {
				t.Fatalf("step log:\n%s\nwant:\n%s", got, want)
			}
			run, err := e.st.RunGet(context.Background(), &store.RunGetParams{ID: otlpingest.RunID(trace)})
			if err != nil || run.Status != steptype.RunCompleted || run.Agent != "batch-agent" {
				t.Fatalf("run %+v %v", run, err)
			}
		})
	}
}

// TestLangSmithBadInput: malformed bodies, unknown run types, bad times,
// a wrong API key and an oversized body are refused with LangSmith's
// {"detail"} body (401 as the server's auth answers) and record nothing.
func TestLangSmithBadInput(t *testing.T) {
	e := newEnv(t, server.Config{MaxOTLPBytes: 4096})
	post := func(method, path, ctype, key, body string) (int, string) {
		req, _ := http.NewRequest(method, e.url+"/langsmith"+path, strings.NewReader(body))
		req.Header.Set("Content-Type", ctype)
		if key != "" {
			req.Header.Set("X-Api-Key", key)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	run := `{"id":"r1","trace_id":"r1","name":"a","run_type":"chain","start_time":"2026-01-01T00:00:00Z","end_time":"2026-01-01T00:00:01Z","extra":{"metadata":{"session_id":"bad-1"}}}`
	for _, c := range []struct {
		name, method, path, ctype, key, body string
		status                               int
	}{
		{"no key", "POST", "/runs", "application/json", "", run, 401},
		{"wrong key", "POST", "/runs", "application/json", "nope", run, 401},
		{"malformed", "POST", "/runs", "application/json", e.token, `{"id":`, 422},
		{"not an object", "POST", "/runs", "application/json", e.token, `[1]`, 422},
		{"invalid utf-8", "POST", "/runs", "application/json", e.token, "{\"id\":\"\xff\"}", 422},
		{"no id", "POST", "/runs", "application/json", e.token, `{"run_type":"chain","start_time":"2026-01-01T00:00:00Z"}`, 422},
		{"unknown run type", "POST", "/runs/batch", "application/json", e.token, `{"post":[` + strings.Replace(run, `"chain"`, `"magic"`, 1) + `]}`, 422},
		{"bad time", "POST", "/runs/batch", "application/json", e.token, `{"post":[` + strings.Replace(run, `"2026-01-01T00:00:01Z"`, `"yesterday"`, 1) + `]}`, 422},
		{"one bad op refuses the batch", "POST", "/runs/batch", "application/json", e.token, `{"post":[` + run + `,{"id":7}]}`, 422},
		{"path id contradicted", "PATCH", "/runs/r2", "application/json", e.token, `{"id":"r3"}`, 422},
		{"no boundary", "POST", "/runs/multipart", "multipart/form-data", e.token, "x", 422},
		{"bad part name", "POST", "/runs/multipart", "multipart/form-data; boundary=B", e.token, "--B\r\nContent-Disposition: form-data; name=\"evil.r1\"\r\n\r\n{}\r\n--B--\r\n", 422},
		{"oversized", "POST", "/runs", "application/json", e.token, `{"id":"r1","inputs":"` + strings.Repeat("x", 5000) + `"}`, 413},
	} {
		status, body := post(c.method, c.path, c.ctype, c.key, c.body)
		if status != c.status {
			t.Errorf("%s: status %d %s, want %d", c.name, status, body, c.status)
		}
		if status != 401 && !strings.Contains(body, `"detail"`) {
			t.Errorf("%s: body %s has no detail", c.name, body)
		}
	}
	if _, err := e.st.SessionGet(context.Background(), &store.SessionGetParams{ID: otlpingest.SessionID("bad-1")}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused run left a session: %v", err)
	}
	// The same run, valid, is recorded.
	if status, body := post("POST", "/runs", "application/json", e.token, run); status != 202 {
		t.Fatalf("valid run: %d %s", status, body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := e.st.RunGet(context.Background(), &store.RunGetParams{ID: otlpingest.RunID("r1")})
		if err == nil && r.Status == steptype.RunCompleted && r.SessionID == otlpingest.SessionID("bad-1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the valid run was not recorded: %+v %v", r, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
