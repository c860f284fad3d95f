package dashboard_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/dashboard"
)

func serve(h http.Handler, method, path string, hdr ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestHandlerPageAndAssets(t *testing.T) {
	t.Parallel()
	h := dashboard.Handler(dashboard.Config{Title: `Ops <script>alert(1)</script>`, APIBase: "https://api.example/"})
	rec := serve(h, "GET", "/")
	body := rec.Body.String()
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET / = %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	// The title is escaped by the template; the API base has no trailing slash.
	if strings.Contains(body, "<script>alert(1)") || !strings.Contains(body, "Ops &lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Fatalf("title not escaped:\n%s", body)
	}
	if !strings.Contains(body, `name="stepwise-api" content="https://api.example"`) {
		t.Fatalf("API base missing:\n%s", body)
	}
	csp := rec.Header().Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Fatalf("CSP %q lacks %q", csp, want)
		}
	}
	if rec.Header().Get("X-Content-Type-Options") != "nosniff" || rec.Header().Get("X-Frame-Options") != "DENY" {
		t.Fatalf("security headers: %v", rec.Header())
	}
	for path, ctype := range map[string]string{
		"/assets/js/app.js":   "text/javascript; charset=utf-8",
		"/assets/app.css":     "text/css; charset=utf-8",
		"/assets/favicon.svg": "image/svg+xml",
	} {
		rec := serve(h, "GET", path)
		if rec.Code != 200 || rec.Header().Get("Content-Type") != ctype || rec.Body.Len() == 0 {
			t.Errorf("GET %s = %d %q (%d bytes)", path, rec.Code, rec.Header().Get("Content-Type"), rec.Body.Len())
		}
		etag := rec.Header().Get("ETag")
		if again := serve(h, "GET", path, "If-None-Match", etag); etag == "" || again.Code != http.StatusNotModified {
			t.Errorf("GET %s with its ETag = %d", path, again.Code)
		}
	}
}

func TestHandlerRefusesOthers(t *testing.T) {
	t.Parallel()
	h := dashboard.Handler(dashboard.Config{})
	for _, path := range []string{"/nope", "/assets/", "/assets/index.html", "/assets/../dashboard.go", "/v1/sessions"} {
		if rec := serve(h, "GET", path); rec.Code != 404 {
			t.Errorf("GET %s = %d, want 404", path, rec.Code)
		}
	}
	if rec := serve(h, "POST", "/"); rec.Code != 405 || rec.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("POST / = %d", rec.Code)
	}
	if rec := serve(h, "HEAD", "/assets/app.css"); rec.Code != 200 || rec.Body.Len() != 0 {
		t.Errorf("HEAD = %d with %d bytes", rec.Code, rec.Body.Len())
	}
}

// The UI's sources never put data into the page as HTML.
func TestNoHTMLSinks(t *testing.T) {
	t.Parallel()
	h := dashboard.Handler(dashboard.Config{})
	for _, f := range []string{"app", "api", "dom", "sessions", "session", "timeline", "detail", "actions", "schemaform", "graph", "agents", "inbox", "tree"} {
		rec := serve(h, "GET", "/assets/js/"+f+".js")
		if rec.Code != 200 {
			t.Fatalf("%s.js: %d", f, rec.Code)
		}
		for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
			if strings.Contains(rec.Body.String(), sink) {
				t.Errorf("%s.js uses %s", f, sink)
			}
		}
	}
}
