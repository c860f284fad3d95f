// Package fakeopenai is a local OpenAI-compatible chat-completions server
// for tests and benchmarks. It streams real wire-format SSE chunks: the
// standard tool loop (Parallel tool calls per turn for Iterations turns,
// then a final text), and it can fail the first calls with a chosen status.
// Like the real API it answers 400 to a request whose messages break the
// tool-call sequence rules (an assistant tool call without its tool
// message, a tool message without its call, a duplicate id; see
// llm.CheckSequence).
package fakeopenai

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// Config shapes the fake server's behaviour.
type Config struct {
	Iterations int    // tool-call turns before the final text
	Tool       string // tool name to call (default "echo")
	Args       string // tool arguments JSON (default {"n":1})
	Final      string // final text (default "done")
	Parallel   int    // tool calls per tool turn (default 1)
	// FailFirst makes the first N calls fail with FailStatus (and
	// Retry-After: 0 for 429), then serve normally.
	FailFirst  int
	FailStatus int
	FailBody   string // error message in the OpenAI error body
}

// Server is a running fake. It listens on the loopback interface with a
// plain http.Server (not net/http/httptest: `stepwise bench --provider
// openai` runs it from the binary, which should not link a test helper).
type Server struct {
	URL string // base URL, http://127.0.0.1:port, no trailing slash

	srv      *http.Server
	served   chan struct{} // closed when Serve has returned
	mu       sync.Mutex
	cfg      Config
	calls    int
	rejected []string
	bodies   [][]byte
}

// Bodies returns the body of every chat-completion request, in order.
func (s *Server) Bodies() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.bodies...)
}

// Rejected returns the messages of the 400s sent to malformed requests.
func (s *Server) Rejected() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.rejected...)
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
	if cfg.Parallel < 1 {
		cfg.Parallel = 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		if ln, err = net.Listen("tcp6", "[::1]:0"); err != nil {
			panic("fakeopenai: listen on the loopback interface: " + err.Error())
		}
	}
	s := &Server{cfg: cfg, URL: "http://" + ln.Addr().String(), served: make(chan struct{})}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.handle)}
	go func() {
		defer close(s.served)
		_ = s.srv.Serve(ln) // http.ErrServerClosed after Close
	}()
	return s
}

// Close stops the server: the listener and every connection are closed
// (a stream in progress ends), and the default transport's idle
// connections to it are dropped, as httptest.Server.Close does.
func (s *Server) Close() {
	_ = s.srv.Close()
	<-s.served
	if t, ok := http.DefaultTransport.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
}

type request struct {
	Messages []struct {
		Role       string `json:"role"`
		ToolCallID string `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
}

// check applies the real API's message-sequence rules.
func (r *request) check() error {
	msgs := make([]llm.Message, len(r.Messages))
	for i, m := range r.Messages {
		msgs[i] = llm.Message{Role: steptype.Role(m.Role), ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			msgs[i].ToolCalls = append(msgs[i].ToolCalls, steptype.ToolCall{ID: tc.ID, Name: tc.Function.Name})
		}
	}
	if err := llm.CheckSequence(msgs); err != nil {
		return errors.New("Invalid 'messages': " + err.(*llm.Error).Message)
	}
	return nil
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" && r.URL.Path != "/chat/completions" {
		http.NotFound(w, r)
		return
	}
	var req request
	body, err := io.ReadAll(r.Body)
	if err == nil {
		s.mu.Lock()
		s.bodies = append(s.bodies, body)
		s.mu.Unlock()
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	if err := req.check(); err != nil {
		s.mu.Lock()
		s.rejected = append(s.rejected, err.Error())
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": err.Error(), "type": "invalid_request_error", "param": "messages", "code": nil}})
		_, _ = w.Write(b)
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
		for i := range s.cfg.Parallel {
			callID := "call_" + strconv.Itoa(assistants)
			if s.cfg.Parallel > 1 {
				callID += "_" + strconv.Itoa(i)
			}
			role := `"role":"assistant","content":null,`
			if i > 0 {
				role = ""
			}
			idx := strconv.Itoa(i)
			chunk(`{`+role+`"tool_calls":[{"index":`+idx+`,"id":`+strconv.Quote(callID)+`,"type":"function","function":{"name":`+strconv.Quote(s.cfg.Tool)+`,"arguments":""}}]}`, "", "")
			chunk(`{"tool_calls":[{"index":`+idx+`,"function":{"arguments":`+strconv.Quote(s.cfg.Args)+`}}]}`, "", "")
		}
		chunk(`{}`, "tool_calls", "")
	} else {
		chunk(`{"role":"assistant","content":""}`, "", "")
		chunk(`{"content":`+strconv.Quote(s.cfg.Final)+`}`, "", "")
		chunk(`{}`, "stop", "")
	}
	chunk("", "", `{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17,"prompt_tokens_details":{"cached_tokens":4}}`)
	fmt.Fprint(w, "data: [DONE]\n\n")
}
