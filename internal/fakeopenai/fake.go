// Package fakeopenai is a local OpenAI-compatible chat-completions server
// for tests and benchmarks. It streams real wire-format SSE chunks: the
// standard tool loop (one tool call per turn for Iterations turns, then a
// final text), and it can fail the first calls with a chosen status.
package fakeopenai

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
)

// Config shapes the fake server's behaviour.
type Config struct {
	Iterations int    // tool-call turns before the final text
	Tool       string // tool name to call (default "echo")
	Args       string // tool arguments JSON (default {"n":1})
	Final      string // final text (default "done")
	// FailFirst makes the first N calls fail with FailStatus (and
	// Retry-After: 0 for 429), then serve normally.
	FailFirst  int
	FailStatus int
	FailBody   string // error message in the OpenAI error body
}

// Server is a running fake.
type Server struct {
	*httptest.Server
	mu    sync.Mutex
	cfg   Config
	calls int
}

// Calls returns how many chat-completion requests arrived.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// New starts a fake server; close it with Close.
func New(cfg Config) *Server {
	if cfg.Tool == "" {
		cfg.Tool = "echo"
	}
	if cfg.Args == "" {
		cfg.Args = `{"n":1}`
	}
	if cfg.Final == "" {
		cfg.Final = "done"
	}
	s := &Server{cfg: cfg}
	s.Server = httptest.NewServer(http.HandlerFunc(s.handle))
	return s
}

type request struct {
	Messages []struct {
		Role string `json:"role"`
	} `json:"messages"`
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" && r.URL.Path != "/chat/completions" {
		http.NotFound(w, r)
		return
	}
	var req request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.calls++
	n := s.calls
	s.mu.Unlock()
	if n <= s.cfg.FailFirst {
		w.Header().Set("Content-Type", "application/json")
		if s.cfg.FailStatus == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "0")
		}
		w.WriteHeader(s.cfg.FailStatus)
		msg := s.cfg.FailBody
		if msg == "" {
			msg = http.StatusText(s.cfg.FailStatus)
		}
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "code": nil}})
		_, _ = w.Write(b)
		return
	}
	assistants := 0
	for _, m := range req.Messages {
		if m.Role == "assistant" {
			assistants++
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	id := "chatcmpl-" + strconv.Itoa(n)
	chunk := func(delta string, finish string, usage string) {
		fin := "null"
		if finish != "" {
			fin = strconv.Quote(finish)
		}
		choices := `[{"index":0,"delta":` + delta + `,"finish_reason":` + fin + `}]`
		if delta == "" {
			choices = "[]"
		}
		u := ""
		if usage != "" {
			u = `,"usage":` + usage
		}
		fmt.Fprintf(w, "data: {\"id\":%q,\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"fake-model\",\"choices\":%s%s}\n\n", id, choices, u)
	}
	if assistants < s.cfg.Iterations {
		callID := "call_" + strconv.Itoa(assistants)
		chunk(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":`+strconv.Quote(callID)+`,"type":"function","function":{"name":`+strconv.Quote(s.cfg.Tool)+`,"arguments":""}}]}`, "", "")
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":`+strconv.Quote(s.cfg.Args)+`}}]}`, "", "")
		chunk(`{}`, "tool_calls", "")
	} else {
		chunk(`{"role":"assistant","content":""}`, "", "")
		chunk(`{"content":`+strconv.Quote(s.cfg.Final)+`}`, "", "")
		chunk(`{}`, "stop", "")
	}
	chunk("", "", `{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17,"prompt_tokens_details":{"cached_tokens":4}}`)
	fmt.Fprint(w, "data: [DONE]\n\n")
}
