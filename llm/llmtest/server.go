package llmtest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Server is a local provider endpoint on loopback that records every request
// it receives. It closes when the test ends.
type Server struct {
	*httptest.Server
	path     string
	mu       sync.Mutex
	handler  http.HandlerFunc
	requests []Request
}

// Request is a request the [Server] received.
type Request struct {
	Method string
	Path   string
	Query  string
	Header http.Header
	Body   map[string]any // the body decoded as a JSON object, nil if it is not one
	Raw    []byte
}

// NewServer starts a server that answers POST path with h and any other
// method or path with 404. An empty path accepts every path.
func NewServer(t testing.TB, path string, h http.HandlerFunc) *Server {
	t.Helper()
	s := &Server{path: path, handler: h}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	c := Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Raw: raw}
	_ = json.Unmarshal(raw, &c.Body)
	s.mu.Lock()
	s.requests = append(s.requests, c)
	h := s.handler
	s.mu.Unlock()
	if r.Method != http.MethodPost || s.path != "" && r.URL.Path != s.path {
		http.Error(w, `{"error":{"message":"no route"}}`, http.StatusNotFound)
		return
	}
	h(w, r)
}

// Handle replaces the handler for the requests that follow.
func (s *Server) Handle(h http.HandlerFunc) {
	s.mu.Lock()
	s.handler = h
	s.mu.Unlock()
}

// Last returns the last request the server received; it fails the test if
// there was none.
func (s *Server) Last(t testing.TB) Request {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) == 0 {
		t.Fatal("server received no request")
	}
	return s.requests[len(s.requests)-1]
}

// Count returns how many requests the server received.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// ReadTestdata returns the contents of testdata/name; it fails the test if
// the file cannot be read.
func ReadTestdata(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// SSEFile serves testdata/name event by event, flushing after each.
func SSEFile(t testing.TB, name string) http.HandlerFunc {
	t.Helper()
	return SSEBytes(ReadTestdata(t, name))
}

// SSEBytes serves data as a text/event-stream, flushing after each event
// (each run of text ending in a blank line), the way a real server streams.
func SSEBytes(data []byte) http.HandlerFunc {
	var frames [][]byte
	for rest := data; len(rest) > 0; {
		n := len(rest)
		if i := bytes.Index(rest, []byte("\n\n")); i >= 0 {
			n = i + 2
		}
		frames = append(frames, rest[:n])
		rest = rest[n:]
	}
	return Frames("text/event-stream; charset=utf-8", frames...)
}

// Frames answers 200 with the content type and writes the frames in order,
// flushing after each.
func Frames(contentType string, frames ...[]byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		writeFrames(w, contentType, frames)
	}
}

func writeFrames(w http.ResponseWriter, contentType string, frames [][]byte) bool {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for _, f := range frames {
		if _, err := w.Write(f); err != nil {
			return false
		}
		_ = rc.Flush()
	}
	return true
}

// JSONError answers with status, the headers given as "Key: value", and
// body as application/json.
func JSONError(status int, body string, headers ...string) http.HandlerFunc {
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
