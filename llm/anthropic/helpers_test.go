package anthropic_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/anthropic"
	"github.com/stepwise-run/stepwise/steptype"
)

// server is a local Messages API endpoint that records what it receives.
type server struct {
	*httptest.Server
	mu       sync.Mutex
	requests []captured
}

type captured struct {
	path   string
	header http.Header
	body   map[string]any
	raw    []byte
}

// newServer starts a server answering POST /v1/messages with h.
func newServer(t testing.TB, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		c := captured{path: r.URL.Path, header: r.Header.Clone(), raw: raw}
		_ = json.Unmarshal(raw, &c.body)
		s.mu.Lock()
		s.requests = append(s.requests, c)
		s.mu.Unlock()
		if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
			http.Error(w, `{"error":{"message":"no route"}}`, http.StatusNotFound)
			return
		}
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// last returns the last request the server received.
func (s *server) last(t testing.TB) captured {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) == 0 {
		t.Fatal("server received no request")
	}
	return s.requests[len(s.requests)-1]
}

func (s *server) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// model returns a Model pointed at s.
func (s *server) model(t testing.TB, mods ...func(*anthropic.Config)) *anthropic.Model {
	t.Helper()
	cfg := anthropic.Config{Model: "claude-test", BaseURL: s.URL, APIKey: "sk-ant-test"}
	for _, f := range mods {
		f(&cfg)
	}
	m, err := anthropic.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// sseFile serves testdata/name event by event, flushing after each, the way
// a real server streams.
func sseFile(t testing.TB, name string) http.HandlerFunc {
	t.Helper()
	return sseBytes(readFile(t, name))
}

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func sseBytes(data []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		for rest := data; len(rest) > 0; {
			i := bytes.Index(rest, []byte("\n\n"))
			n := len(rest)
			if i >= 0 {
				n = i + 2
			}
			if _, err := w.Write(rest[:n]); err != nil {
				return
			}
			_ = rc.Flush()
			rest = rest[n:]
		}
	}
}

// jsonError answers with status, the headers given as "Key: value", and body.
func jsonError(status int, body string, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for _, h := range headers {
			k, v, _ := strings.Cut(h, ": ")
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// result is a drained Generate sequence.
type result struct {
	partials []*llm.Response
	final    *llm.Response
	err      error
	afterEnd int // values yielded after the final response or an error
}

func generate(ctx context.Context, m llm.Model, req *llm.Request) result {
	var r result
	for resp, err := range m.Generate(ctx, req) {
		switch {
		case r.err != nil || r.final != nil:
			r.afterEnd++
		case err != nil:
			r.err = err
		case resp.Partial:
			r.partials = append(r.partials, resp)
		default:
			r.final = resp
		}
	}
	return r
}

// joined concatenates the partial deltas, which must equal the final text.
func (r result) joined() (content, reasoning string) {
	var c, rs strings.Builder
	for _, p := range r.partials {
		c.WriteString(p.Content)
		rs.WriteString(p.Reasoning)
	}
	return c.String(), rs.String()
}

// llmError asserts that err is an *llm.Error and returns it.
func llmError(t testing.TB, err error) *llm.Error {
	t.Helper()
	e, ok := err.(*llm.Error)
	if !ok {
		t.Fatalf("error %T %v, want *llm.Error", err, err)
	}
	return e
}

func userReq(text string) *llm.Request {
	return &llm.Request{Messages: []llm.Message{{Role: steptype.RoleUser, Content: text}}}
}

// field walks a decoded JSON body: field(body, "messages", 0, "role").
func field(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}
