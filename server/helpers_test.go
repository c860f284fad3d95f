package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/client"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/tool"
)

// testEnv is a server on a loopback httptest server, over an in-memory store.
type testEnv struct {
	t     *testing.T
	eng   *stepwise.Engine
	store store.Store
	srv   *Server
	ts    *httptest.Server
	c     *client.Client
}

type envOption func(*Config)

func withTokens(tokens ...string) envOption { return func(c *Config) { c.Tokens = tokens } }
func withHeartbeat(d time.Duration) envOption {
	return func(c *Config) { c.Heartbeat = d }
}

func newEnv(t *testing.T, agents []*stepwise.Agent, opts ...envOption) *testEnv {
	t.Helper()
	return newEnvStore(t, memory.New(), agents, opts...)
}

// newEnvStore is newEnv over the given store.
func newEnvStore(t *testing.T, st store.Store, agents []*stepwise.Agent, opts ...envOption) *testEnv {
	t.Helper()
	eng, err := stepwise.New(stepwise.Config{Store: st, Agents: agents, PollInterval: 50 * time.Millisecond, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	// A minute, not DefaultStoreTimeout: under -race on a loaded machine a
	// read of a long session can take longer than 5 s, and these tests are
	// not about the bound (storage_test.go sets its own).
	cfg := Config{Engine: eng, Logger: testLogger(t), StoreTimeout: time.Minute}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv)
	ts.Config.ConnContext = ConnContext // as Serve: streams write their chunks directly
	ts.Start()
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Close) // runs first: ends streams so that ts.Close does not wait for them
	var copts []client.Option
	if len(cfg.Tokens) > 0 {
		copts = append(copts, client.WithToken(cfg.Tokens[0]))
	}
	c, err := client.New(ts.URL, copts...)
	if err != nil {
		t.Fatal(err)
	}
	return &testEnv{t: t, eng: eng, store: st, srv: srv, ts: ts, c: c}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// call sends a raw request and returns the status and body.
func (e *testEnv) call(method, path, body string, hdr ...string) (int, []byte) {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.ts.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 500 {
		e.t.Errorf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	return resp.StatusCode, data
}

// problem sends a request that must fail and returns its problem.
func (e *testEnv) problem(wantStatus int, wantCode, method, path, body string, hdr ...string) *Problem {
	e.t.Helper()
	status, data := e.call(method, path, body, hdr...)
	var p Problem
	if err := json.Unmarshal(data, &p); err != nil {
		e.t.Fatalf("%s %s: status %d, body %q is not a problem", method, path, status, data)
	}
	if status != wantStatus || p.Status != wantStatus || p.Code != wantCode || p.Type != ProblemTypePrefix+wantCode || p.Title == "" {
		e.t.Fatalf("%s %s: got %d %+v, want %d %s", method, path, status, p, wantStatus, wantCode)
	}
	return &p
}

// waitRun waits until a run reaches one of the wanted statuses, failing
// if it ends in another.
func (e *testEnv) waitRun(id string, want ...steptype.RunStatus) *stepwise.Run {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		r, err := e.store.RunGet(context.Background(), &store.RunGetParams{ID: id})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, w := range want {
			if r.Status == w {
				return r
			}
		}
		if r.Status.Terminal() {
			e.t.Fatalf("run %s ended %s (%+v), want %v", id, r.Status, r.Error, want)
		}
		time.Sleep(2 * time.Millisecond)
	}
	e.t.Fatalf("run %s did not reach %v", id, want)
	return nil
}

// chatAgent answers every user message with a fixed text, streamed.
func chatAgent(name, reply string) *stepwise.Agent {
	return &stepwise.Agent{Name: name, Model: scripted.New(name, scripted.Script{Strict: true, Turns: []scripted.Turn{{Text: reply, Chunk: 4}}, Loop: true})}
}

// toolAgent calls the echo tool n times, then answers "done".
func toolAgent(name string, n int, chunkDelay time.Duration) *stepwise.Agent {
	echo := tool.Func(llm.ToolDef{Name: "echo", Parameters: json.RawMessage(`{"type":"object"}`)}, func(_ context.Context, c *tool.Call) (*tool.Result, error) {
		return &tool.Result{Content: "echo " + string(c.Arguments)}, nil
	})
	turns := []scripted.Turn{
		{Text: "calling echo", Reasoning: "think", ToolCalls: []steptype.ToolCall{{Name: "echo", Arguments: json.RawMessage(`{"n":1}`)}}, Chunk: 3, ChunkDelay: chunkDelay, Repeat: n},
		{Text: "done", Chunk: 2, ChunkDelay: chunkDelay},
	}
	return &stepwise.Agent{Name: name, Model: scripted.New(name, scripted.Script{Strict: true, Turns: turns}), Tools: []tool.Tool{echo}}
}

// askAgent asks the human a question, then repeats the answer.
func askAgent(name string) *stepwise.Agent {
	m := scripted.New(name, scripted.Script{Strict: true, Turns: []scripted.Turn{
		{Text: "Let me ask.", ToolCalls: []steptype.ToolCall{{ID: "ask1", Name: stepwise.AskHumanTool, Arguments: json.RawMessage(`{"question":"What is your name?"}`)}}},
		{Text: "Nice to meet you."},
	}})
	return &stepwise.Agent{Name: name, Model: m, Tools: []tool.Tool{stepwise.AskHuman()}}
}

// approvalAgent calls a tool that needs approval, then reports.
func approvalAgent(name string) *stepwise.Agent {
	del := tool.Func(llm.ToolDef{Name: "delete", Parameters: json.RawMessage(`{"type":"object"}`)}, func(_ context.Context, c *tool.Call) (*tool.Result, error) {
		return &tool.Result{Content: "deleted"}, nil
	})
	m := scripted.New(name, scripted.Script{Strict: true, Turns: []scripted.Turn{
		{ToolCalls: []steptype.ToolCall{{ID: "del1", Name: "delete", Arguments: json.RawMessage(`{"id":7}`)}}},
		{Text: "All done."},
	}})
	return &stepwise.Agent{Name: name, Model: m, Tools: []tool.Tool{del}, Approvals: map[string]stepwise.ApprovalPolicy{"delete": stepwise.ApproveAlways}}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func decode[T any](t *testing.T, data []byte) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %T from %q: %v", v, data, err)
	}
	return v
}

func newMemoryStore() store.Store { return memory.New() }

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func errorsAs(err error, target any) bool { return errors.As(err, target) }

func urlEscape(s string) string { return url.QueryEscape(s) }
