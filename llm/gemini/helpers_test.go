package gemini_test

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
	"github.com/stepwise-run/stepwise/llm/gemini"
	"github.com/stepwise-run/stepwise/steptype"
)

// fake is a local Gemini API endpoint that records what it receives and
// answers with the handler of the test.
type fake struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []*received
}

// received is one request as the server saw it.
type received struct {
	method, path, query string
	header              http.Header
	body                map[string]any
}

func newFake(t testing.TB, h http.HandlerFunc) *fake {
	t.Helper()
	f := &fake{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		rec := &received{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, header: r.Header.Clone()}
		_ = json.Unmarshal(raw, &rec.body)
		f.mu.Lock()
		f.reqs = append(f.reqs, rec)
		f.mu.Unlock()
		if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/v1beta/models/") {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"code":404,"message":"no such method","status":"NOT_FOUND"}}`)
			return
		}
		h(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fake) last(t testing.TB) *received {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) == 0 {
		t.Fatal("the server received no request")
	}
	return f.reqs[len(f.reqs)-1]
}

func (f *fake) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reqs)
}

func (f *fake) model(t testing.TB, mods ...func(*gemini.Config)) *gemini.Model {
	t.Helper()
	cfg := gemini.Config{Model: "gemini-test", BaseURL: f.URL, APIKey: "AIza-test"}
	for _, mod := range mods {
		mod(&cfg)
	}
	m, err := gemini.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// serveSSE streams testdata/name event by event, flushing after each.
func serveSSE(t testing.TB, name string) http.HandlerFunc {
	t.Helper()
	return streamBytes(testdata(t, name))
}

func testdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func streamBytes(data []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for _, ev := range bytes.SplitAfter(data, []byte("\n\n")) {
			if _, err := w.Write(ev); err != nil {
				return
			}
			_ = rc.Flush()
		}
	}
}

// answer replies with status, body and headers given as "Key: value".
func answer(status int, body string, headers ...string) http.HandlerFunc {
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

// drained is a Generate sequence read to its end.
type drained struct {
	partials []*llm.Response
	final    *llm.Response
	err      error
	extra    int // values after the final response or an error
}

func run(ctx context.Context, m llm.Model, req *llm.Request) drained {
	var d drained
	for r, err := range m.Generate(ctx, req) {
		switch {
		case d.err != nil || d.final != nil:
			d.extra++
		case err != nil:
			d.err = err
		case r.Partial:
			d.partials = append(d.partials, r)
		default:
			d.final = r
		}
	}
	return d
}

func (d drained) text() (content, reasoning string) {
	var c, r strings.Builder
	for _, p := range d.partials {
		c.WriteString(p.Content)
		r.WriteString(p.Reasoning)
	}
	return c.String(), r.String()
}

func asLLMError(t testing.TB, err error) *llm.Error {
	t.Helper()
	e, ok := err.(*llm.Error)
	if !ok {
		t.Fatalf("error %T %v, want *llm.Error", err, err)
	}
	return e
}

func ask(text string) *llm.Request {
	return &llm.Request{Messages: []llm.Message{{Role: steptype.RoleUser, Content: text}}}
}

// at walks a decoded JSON value: at(body, "contents", 0, "role").
func at(v any, path ...any) any {
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

func jsonOf(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
