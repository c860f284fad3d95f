package a2a_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/tool"
	"github.com/stepwise-run/stepwise/tool/a2a"
)

// legacyServer is an A2A v0.3 agent without streaming, on loopback: a task
// works until it is read once, then asks "Which colour?"; the answer
// completes it. It deduplicates messages by messageId.
type legacyServer struct {
	mu       sync.Mutex
	received []string // messageIds, in order
	methods  []string
	state    string
	answer   string
}

func (s *legacyServer) handle(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		_ = json.NewEncoder(w).Encode(map[string]any{"name": "Legacy Agent", "description": "Picks colours.", "protocolVersion": "0.3.0",
			"url": "/rpc", "capabilities": map[string]any{"streaming": false}})
		return
	}
	var req struct {
		ID     any    `json:"id"`
		Method string `json:"method"`
		Params struct {
			Message struct {
				Kind      string `json:"kind"`
				MessageID string `json:"messageId"`
				TaskID    string `json:"taskId"`
				Role      string `json:"role"`
				Parts     []struct {
					Kind string `json:"kind"`
					Text string `json:"text"`
				} `json:"parts"`
			} `json:"message"`
			ID string `json:"id"`
		} `json:"params"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.methods = append(s.methods, req.Method)
	m := req.Params.Message
	reply := func(result any) {
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
	}
	switch req.Method {
	case "message/send":
		if m.Kind != "message" || m.Role != "user" || len(m.Parts) != 1 || m.Parts[0].Kind != "text" {
			_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32602, "message": "bad message"}})
			return
		}
		s.received = append(s.received, m.MessageID)
		switch {
		case m.TaskID == "" && s.state == "":
			s.state = "working"
		case m.TaskID == "t1" && s.state == "input-required":
			s.state, s.answer = "completed", m.Parts[0].Text
		}
	case "tasks/get":
		if s.state == "working" {
			defer func() { s.state = "input-required" }()
		}
	}
	reply(s.task())
}

func (s *legacyServer) task() map[string]any {
	text := func(t string) map[string]any { return map[string]any{"kind": "text", "text": t} }
	t := map[string]any{"kind": "task", "id": "t1", "contextId": "c1", "status": map[string]any{"state": s.state},
		"history": []any{map[string]any{"kind": "message", "messageId": "x", "role": "user", "parts": []any{text("go")}}}}
	switch s.state {
	case "input-required":
		t["status"] = map[string]any{"state": s.state, "message": map[string]any{"kind": "message", "messageId": "q", "role": "agent", "parts": []any{text("Which colour?")}}}
	case "completed":
		t["artifacts"] = []any{map[string]any{"artifactId": "a", "parts": []any{text("You chose " + s.answer + ".")}}}
	}
	return t
}

// TestLegacyPolling: a v0.3 agent that does not stream is sent a blocking
// message/send and polled with tasks/get; its input-required is an
// InputNeeded; the call made again with the answer reads the task (by id
// in the same process; after a restart, by sending the first message
// again with the same messageId) and sends the answer on it.
func TestLegacyPolling(t *testing.T) {
	t.Parallel()
	for _, restart := range []bool{false, true} {
		s := &legacyServer{}
		srv := httptest.NewServer(http.HandlerFunc(s.handle))
		defer srv.Close()
		ctx := context.Background()
		if _, err := a2a.New(ctx, a2a.Config{URL: srv.URL + "/card.json"}); err == nil || !strings.Contains(err.Error(), `its name "Legacy Agent" is not a tool name`) {
			t.Fatalf("a card name that is no tool name: %v", err)
		}
		cfg := a2a.Config{URL: srv.URL + "/card.json", Name: "colours", PollInterval: time.Millisecond}
		ag, err := a2a.New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if d := ag.Definition(); d.Name != "colours" || d.Description != "Picks colours." || ag.Endpoint() != srv.URL+"/rpc" {
			t.Fatalf("definition %+v, endpoint %s", d, ag.Endpoint())
		}
		call := &tool.Call{ID: "c", Name: "colours", Arguments: json.RawMessage(`{"input":"go"}`), IdempotencyKey: "run-1/c"}
		_, err = ag.Call(ctx, call)
		need, ok := errors.AsType[*tool.InputNeeded](err)
		if !ok || need.Prompt != "Which colour?" || need.Context["a2a_task_id"] != "t1" {
			t.Fatalf("first call: %v", err)
		}
		if restart {
			if ag, err = a2a.New(ctx, cfg); err != nil {
				t.Fatal(err)
			}
		}
		call.Answers = []json.RawMessage{json.RawMessage(`"blue"`)}
		res, err := ag.Call(ctx, call)
		if err != nil || res.IsError || res.Content != "You chose blue." || !strings.Contains(string(res.Output), `"task_id":"t1"`) {
			t.Fatalf("answered call: %+v %v", res, err)
		}
		ids, methods := s.received, strings.Join(s.methods, ",")
		wantIDs, wantMethods := 2, "message/send,tasks/get,tasks/get,tasks/get,message/send"
		if restart {
			wantIDs, wantMethods = 3, "message/send,tasks/get,tasks/get,message/send,message/send"
		}
		if len(ids) != wantIDs || ids[0] == ids[len(ids)-1] || (restart && ids[0] != ids[1]) {
			t.Errorf("restart %v: message ids %v", restart, ids)
		}
		if methods != wantMethods {
			t.Errorf("restart %v: methods %s, want %s", restart, methods, wantMethods)
		}
		// Bad arguments are an error result; nothing is sent.
		if res, err := ag.Call(ctx, &tool.Call{Arguments: json.RawMessage(`{"input":""}`)}); err != nil || !res.IsError {
			t.Errorf("empty input: %+v %v", res, err)
		}
		if len(s.methods) != 5 {
			t.Errorf("a bad call sent something: %v", s.methods)
		}
	}
}

// TestErrorClasses: 429 with Retry-After and 503 are transient (the hint
// kept), a JSON-RPC error is permanent with the remote's code and
// message, a card without a JSON-RPC interface fails New.
func TestErrorClasses(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var answers []func(http.ResponseWriter)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			iface := "JSONRPC"
			if strings.Contains(r.URL.Path, "grpc") {
				iface = "GRPC"
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"name": "v1", "capabilities": map[string]any{"streaming": true},
				"supportedInterfaces": []any{map[string]any{"url": "http://" + r.Host + "/rpc", "protocolBinding": iface, "protocolVersion": "1.0"}}})
			return
		}
		if r.Header.Get("A2A-Version") != "1.0" {
			http.Error(w, "no version", http.StatusBadRequest)
			return
		}
		mu.Lock()
		a := answers[0]
		answers = answers[1:]
		mu.Unlock()
		a(w)
	}))
	defer srv.Close()
	ctx := context.Background()
	if _, err := a2a.New(ctx, a2a.Config{URL: srv.URL + "/grpc"}); err == nil || !strings.Contains(err.Error(), "offers no JSON-RPC interface") {
		t.Fatalf("a card without JSON-RPC: %v", err)
	}
	ag, err := a2a.New(ctx, a2a.Config{URL: srv.URL + "/a2a/v1"})
	if err != nil {
		t.Fatal(err)
	}
	answers = []func(http.ResponseWriter){
		func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "3")
			http.Error(w, "slow down", http.StatusTooManyRequests)
		},
		func(w http.ResponseWriter) { http.Error(w, "down", http.StatusServiceUnavailable) },
		func(w http.ResponseWriter) {
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"message.parts is empty"}}`))
		},
	}
	call := &tool.Call{Arguments: json.RawMessage(`{"input":"hi"}`), IdempotencyKey: "k"}
	for i, want := range []struct {
		class steptype.ErrorClass
		after time.Duration
		msg   string
	}{
		{steptype.ErrorTransient, 3 * time.Second, "a2a agent v1: SendStreamingMessage: HTTP 429: slow down"},
		{steptype.ErrorTransient, 0, "HTTP 503: down"},
		{steptype.ErrorPermanent, 0, "a2a agent v1: SendStreamingMessage: JSON-RPC error -32602: message.parts is empty"},
	} {
		_, err := ag.Call(ctx, call)
		if err == nil || llm.Classify(err) != want.class || llm.RetryAfter(err) != want.after || !strings.Contains(err.Error(), want.msg) {
			t.Errorf("answer %d: %v (class %s, retry after %v), want %s %v %q", i, err, llm.Classify(err), llm.RetryAfter(err), want.class, want.after, want.msg)
		}
	}
}

// TestSilentStream: a stream that sends the task, then nothing (no
// heartbeat) for the idle limit, is left, and the task is polled.
func TestSilentStream(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	defer close(release)
	var mu sync.Mutex
	var methods []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			_ = json.NewEncoder(w).Encode(map[string]any{"name": "slow", "capabilities": map[string]any{"streaming": true},
				"supportedInterfaces": []any{map[string]any{"url": "http://" + r.Host + "/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}}})
			return
		}
		var req struct {
			Method string `json:"method"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		methods = append(methods, req.Method)
		mu.Unlock()
		if req.Method == "GetTask" {
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":2,"result":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"},"artifacts":[{"artifactId":"a","parts":[{"text":"late"}]}]}}`))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"task\":{\"id\":\"t\",\"contextId\":\"c\",\"status\":{\"state\":\"TASK_STATE_WORKING\"}}}}\n\n"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	ag, err := a2a.New(context.Background(), a2a.Config{URL: srv.URL, StreamIdle: 50 * time.Millisecond, PollInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	res, err := ag.Call(context.Background(), &tool.Call{Arguments: json.RawMessage(`{"input":"hi"}`), IdempotencyKey: "k"})
	if err != nil || res.Content != "late" {
		t.Fatalf("%+v %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(methods, ",") != "SendStreamingMessage,GetTask" {
		t.Errorf("methods %v", methods)
	}
}

var errCancelled = errors.New("run cancelled")

// TestCancelBeforeTaskNamed: a call cancelled (with the CancelCause)
// before the stream named its task keeps reading until it does, then
// cancels that task; another cancellation cancels nothing.
func TestCancelBeforeTaskNamed(t *testing.T) {
	t.Parallel()
	for _, cause := range []error{errCancelled, errors.New("shutting down")} {
		arrived, release := make(chan struct{}), make(chan struct{})
		cancels := make(chan string, 1)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet {
				_ = json.NewEncoder(w).Encode(map[string]any{"name": "slow", "capabilities": map[string]any{"streaming": true},
					"supportedInterfaces": []any{map[string]any{"url": "http://" + r.Host + "/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}}})
				return
			}
			var req struct {
				Method string `json:"method"`
				Params struct {
					ID string `json:"id"`
				} `json:"params"`
			}
			_ = json.NewDecoder(r.Body).Decode(&req)
			if req.Method == "CancelTask" {
				cancels <- req.Params.ID
				_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":2,"result":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_CANCELED"}}}`))
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			w.(http.Flusher).Flush()
			close(arrived)
			<-release
			_, _ = w.Write([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"task\":{\"id\":\"t\",\"contextId\":\"c\",\"status\":{\"state\":\"TASK_STATE_WORKING\"}}}}\n\n"))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}))
		ag, err := a2a.New(context.Background(), a2a.Config{URL: srv.URL, CancelCause: errCancelled})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancelCause(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := ag.Call(ctx, &tool.Call{Arguments: json.RawMessage(`{"input":"hi"}`), IdempotencyKey: "k"})
			done <- err
		}()
		<-arrived
		cancel(cause)
		close(release)
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("cause %v: the call returned %v", cause, err)
		}
		select {
		case id := <-cancels:
			if cause != errCancelled || id != "t" {
				t.Errorf("cause %v: CancelTask %q", cause, id)
			}
		default:
			if cause == errCancelled {
				t.Errorf("cause %v: no CancelTask", cause)
			}
		}
		srv.Close()
	}
}
