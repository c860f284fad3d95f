// Package dashboard is the Stepwise web UI: a sessions list, a session's
// step timeline (windowed, so a 10,000-step session opens at once) with
// step details and live updates over SSE, human input and approvals, fork,
// retry, replay and cancel, the fork tree, the workflow graph of a session
// or an agent, and an agent overview.
//
// The UI is the project's own HTML, CSS and JavaScript modules, embedded
// with go:embed: it builds with plain go build and needs no Node toolchain.
// It talks to the server only through the public /v1 API and its streams,
// with the same bearer token (asked for when the API answers 401 and kept
// in the tab's sessionStorage). All step content is rendered as text,
// never as HTML.
//
// Serve it at the root of the API's origin:
//
//	mux.Handle("GET /{$}", dashboard.Handler(dashboard.Config{}))
//	mux.Handle("GET /assets/", dashboard.Handler(dashboard.Config{}))
//
// server.(*Server).WithDashboard does that, with the cross-site guard.
package dashboard

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

// Config configures the dashboard. The zero value serves a UI that calls
// the API on its own origin.
type Config struct {
	// Title names the product in the page title and header. Default
	// "Stepwise".
	Title string
	// APIBase is the URL prefix the browser puts before "/v1/…". Default ""
	// (the API on the same origin as the page).
	APIBase string
}

// contentSecurityPolicy allows only the dashboard's own scripts and styles
// and API calls to its own origin; images may also be blob: URLs (the
// attachments the UI fetched with the token).
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
	"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler returns the dashboard: the page at "/" (and "/index.html") and
// its assets under "/assets/". Other paths are 404.
func Handler(cfg Config) http.Handler {
	if cfg.Title == "" {
		cfg.Title = "Stepwise"
	}
	cfg.APIBase = strings.TrimRight(cfg.APIBase, "/")
	h := &handler{files: map[string]*file{}}
	_ = fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || p == "assets/index.html" {
			return err
		}
		data, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		h.files["/"+p] = newFile(p, data)
		return nil
	})
	var page bytes.Buffer
	tmpl := template.Must(template.ParseFS(assets, "assets/index.html"))
	if err := tmpl.Execute(&page, struct{ Title, APIBase, Version string }{cfg.Title, cfg.APIBase, h.version()}); err != nil {
		panic("dashboard: index template: " + err.Error())
	}
	h.index = newFile("index.html", page.Bytes())
	return h
}

type handler struct {
	files map[string]*file
	index *file
}

// file is an embedded asset with its content type and ETag.
type file struct {
	data        []byte
	ctype, etag string
}

func newFile(name string, data []byte) *file {
	sum := sha256.Sum256(data)
	ct := mime.TypeByExtension(path.Ext(name))
	switch path.Ext(name) {
	case ".js":
		ct = "text/javascript; charset=utf-8"
	case ".css":
		ct = "text/css; charset=utf-8"
	case ".html":
		ct = "text/html; charset=utf-8"
	case ".svg":
		ct = "image/svg+xml"
	}
	return &file{data: data, ctype: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
}

// version identifies the embedded assets (a cache buster for the page).
func (h *handler) version() string {
	sum := sha256.New()
	for p, f := range h.files {
		sum.Write([]byte(p + f.etag))
	}
	return hex.EncodeToString(sum.Sum(nil)[:6])
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", contentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	f := h.files[r.URL.Path]
	switch {
	case r.URL.Path == "/" || r.URL.Path == "/index.html":
		f = h.index
		hd.Set("Cache-Control", "no-cache")
	case f != nil && strings.HasPrefix(r.URL.Path, "/assets/"):
		hd.Set("Cache-Control", "no-cache") // revalidated by ETag: cheap, never stale
	default:
		http.NotFound(w, r)
		return
	}
	hd.Set("Content-Type", f.ctype)
	hd.Set("ETag", f.etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.data))
}
