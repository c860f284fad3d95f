package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/tool"
)

// testServer serves a few paths on 127.0.0.1 and counts requests.
func testServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	hits := new(atomic.Int64)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("hello, " + r.UserAgent()))
	})
	mux.HandleFunc("GET /big", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strings.Repeat("é", 100))) // 200 bytes
	})
	mux.HandleFunc("GET /binary", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write([]byte{0xff, 0xfe, 0x00, 0x01})
	})
	mux.HandleFunc("GET /missing", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	mux.HandleFunc("GET /busy", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	mux.HandleFunc("GET /slow", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	mux.HandleFunc("GET /redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	mux.HandleFunc("GET /loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, hits
}

func newGetter(t *testing.T, cfg HTTPGetConfig) tool.Tool {
	t.Helper()
	if cfg.AllowedHosts == nil {
		cfg.AllowedHosts = []string{"127.0.0.1"}
	}
	g, err := NewHTTPGet(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func fetch(t *testing.T, g tool.Tool, u string) (HTTPGetResult, error) {
	t.Helper()
	return callJSON[HTTPGetResult](t, g, HTTPGetArgs{URL: u})
}

func TestHTTPGet(t *testing.T) {
	t.Parallel()
	srv, _ := testServer(t)
	g := newGetter(t, HTTPGetConfig{})
	res, err := fetch(t, g, srv.URL+"/hello")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != 200 || res.Body != "hello, stepwise-http-get/1" || res.ContentType != "text/plain; charset=utf-8" || res.Truncated {
		t.Errorf("result = %+v", res)
	}
	res, err = fetch(t, g, srv.URL+"/redirect?to=/hello")
	if err != nil || res.Body == "" || res.URL != srv.URL+"/hello" {
		t.Errorf("same-host redirect: %+v, %v", res, err)
	}
	res, err = fetch(t, g, srv.URL+"/missing")
	if err != nil || res.Status != 404 {
		t.Errorf("404 should be a result: %+v, %v", res, err)
	}
	res, err = fetch(t, g, srv.URL+"/binary")
	if err != nil || !res.Binary || res.Body != "" {
		t.Errorf("binary: %+v, %v", res, err)
	}
}

func TestHTTPGetRefusals(t *testing.T) {
	t.Parallel()
	srv, hits := testServer(t)
	other, otherHits := testServer(t)
	u, _ := url.Parse(other.URL)
	otherAsLocalhost := "http://localhost:" + u.Port() + "/hello"
	g := newGetter(t, HTTPGetConfig{})
	for _, tc := range []struct{ url, want string }{
		{otherAsLocalhost, `host "localhost:` + u.Port() + `" is not in the allowed hosts`},
		{"http://example.com/", `host "example.com" is not in the allowed hosts`},
		{"file:///etc/passwd", `scheme "file" is not allowed`},
		{"ftp://127.0.0.1/x", `scheme "ftp" is not allowed`},
		{"/relative", `scheme "" is not allowed`},
		{"http://user:pw@127.0.0.1/", "credentials"},
		{"http://127.0.0.1.evil.example/", "not in the allowed hosts"},
		{srv.URL + "/redirect?to=" + url.QueryEscape(otherAsLocalhost), "redirect to " + otherAsLocalhost + " refused"},
		{srv.URL + "/redirect?to=" + url.QueryEscape("ftp://127.0.0.1/"), `scheme "ftp" is not allowed`},
		{srv.URL + "/loop", "stopped after 5 redirects"},
	} {
		_, err := fetch(t, g, tc.url)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.url, err, tc.want)
			continue
		}
		if c := llm.Classify(err); c != steptype.ErrorPermanent {
			t.Errorf("%s: class %q, want permanent", tc.url, c)
		}
	}
	if n := otherHits.Load(); n != 0 {
		t.Errorf("the disallowed host got %d requests", n)
	}
	if n := hits.Load(); n != 1+1+6 { // two refused redirects, then the loop: 1 + 5 redirects
		t.Errorf("allowed host got %d requests, want 8", n)
	}
}

func TestHTTPGetPortRule(t *testing.T) {
	t.Parallel()
	srv, hits := testServer(t)
	g := newGetter(t, HTTPGetConfig{AllowedHosts: []string{"127.0.0.1:1"}})
	if _, err := fetch(t, g, srv.URL+"/hello"); err == nil || !strings.Contains(err.Error(), "not in the allowed hosts") {
		t.Errorf("other port allowed: %v", err)
	}
	u, _ := url.Parse(srv.URL)
	g = newGetter(t, HTTPGetConfig{AllowedHosts: []string{"127.0.0.1:" + u.Port()}})
	if _, err := fetch(t, g, srv.URL+"/hello"); err != nil {
		t.Errorf("own port refused: %v", err)
	}
	if hits.Load() != 1 {
		t.Errorf("hits = %d", hits.Load())
	}
}

func TestHTTPGetLimits(t *testing.T) {
	t.Parallel()
	srv, _ := testServer(t)
	g := newGetter(t, HTTPGetConfig{MaxBytes: 11, Timeout: 200 * time.Millisecond})
	res, err := fetch(t, g, srv.URL+"/big")
	// 11 bytes cut "é" (2 bytes) in half; the partial rune is dropped.
	if err != nil || !res.Truncated || res.Body != strings.Repeat("é", 5) {
		t.Errorf("truncation: %+v, %v", res, err)
	}
	_, err = fetch(t, g, srv.URL+"/slow")
	if err == nil || llm.Classify(err) != steptype.ErrorTransient {
		t.Errorf("timeout: err = %v, class %q; want transient", err, llm.Classify(err))
	}
	_, err = fetch(t, g, srv.URL+"/busy")
	if err == nil || !strings.Contains(err.Error(), "HTTP 503") || llm.Classify(err) != steptype.ErrorTransient {
		t.Errorf("503: %v", err)
	}
	g = newGetter(t, HTTPGetConfig{MaxRedirects: -1})
	if _, err := fetch(t, g, srv.URL+"/redirect?to=/hello"); err == nil || !strings.Contains(err.Error(), "stopped after 0 redirects") {
		t.Errorf("redirect with redirects off: %v", err)
	}
}

func TestHTTPGetConfig(t *testing.T) {
	t.Parallel()
	if _, err := NewHTTPGet(HTTPGetConfig{}); !errors.Is(err, ErrNoAllowedHosts) {
		t.Errorf("no hosts: %v", err)
	}
	for _, hosts := range [][]string{{""}, {"http://example.com"}, {"a b"}} {
		if _, err := NewHTTPGet(HTTPGetConfig{AllowedHosts: hosts}); err == nil {
			t.Errorf("%q accepted", hosts)
		}
	}
}

func TestHostRules(t *testing.T) {
	t.Parallel()
	rules := []hostRule{parseHostRule("*.Example.com"), parseHostRule("api.test:8443"), parseHostRule("[::1]"), parseHostRule("10.0.0.1")}
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"https://docs.example.com/x", true},
		{"https://a.b.EXAMPLE.com/", true},
		{"https://example.com/", false},
		{"https://badexample.com/", false},
		{"https://api.test:8443/", true},
		{"https://api.test/", false},
		{"http://[::1]:9000/", true},
		{"http://10.0.0.1/", true},
		{"http://10.0.0.10/", false},
	} {
		u, _ := url.Parse(tc.url)
		if err := checkURL(u, rules); (err == nil) != tc.ok {
			t.Errorf("%s: err = %v, want allowed=%v", tc.url, err, tc.ok)
		}
	}
}

// The result of a call is JSON the model can read.
func TestHTTPGetContent(t *testing.T) {
	t.Parallel()
	srv, _ := testServer(t)
	g := newGetter(t, HTTPGetConfig{})
	res, err := g.Call(context.Background(), &tool.Call{Arguments: json.RawMessage(`{"url":"` + srv.URL + `/hello"}`)})
	if err != nil || !strings.Contains(res.Content, `"body":"hello, stepwise-http-get/1"`) {
		t.Errorf("content = %+v, %v", res, err)
	}
}
