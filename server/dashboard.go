package server

import (
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/stepwise-run/stepwise/dashboard"
)

// CodeCrossSite is the problem code of a refused cross-site request (403).
const CodeCrossSite = "cross_site"

// CodeHostNotAllowed is the problem code of a request to a token-less
// server through a host name that is not loopback (403), the mark of a DNS
// rebinding attack.
const CodeHostNotAllowed = "host_not_allowed"

// dashboardRoutes are the endpoints the dashboard needs beyond the core API.
func (s *Server) dashboardRoutes() []route {
	return []route{
		{http.MethodGet, "/v1/sessions/{id}/graph"},
		{http.MethodGet, "/v1/agents/{name}/graph"},
		{http.MethodGet, "/v1/agents/{name}/overview"},
		{http.MethodGet, "/v1/sessions/{id}/runs"},
		{http.MethodGet, "/v1/dashboard/sessions"},
		{http.MethodGet, "/v1/dashboard/steps"},
	}
}

// registerDashboardAPI installs the endpoints of dashboardRoutes that are
// not registered yet (so calling it twice, or after register installed
// some of them, is harmless).
func (s *Server) registerDashboardAPI() {
	handlers := map[string]handlerFunc{
		"/v1/sessions/{id}/graph":    s.sessionGraph,
		"/v1/agents/{name}/graph":    s.agentGraph,
		"/v1/agents/{name}/overview": s.overview,
		"/v1/sessions/{id}/runs":     s.sessionRuns,
		"/v1/dashboard/sessions":     s.sessionRows,
		"/v1/dashboard/steps":        s.dashboardSteps,
	}
	for _, rt := range s.dashboardRoutes() {
		if s.registered(rt.method, rt.pattern) {
			continue
		}
		s.handle(rt.method, rt.pattern, handlers[rt.pattern])
	}
}

// registered reports whether method+pattern is already on the mux.
func (s *Server) registered(method, pattern string) bool {
	path := pattern
	for {
		i := strings.IndexByte(path, '{')
		j := strings.IndexByte(path, '}')
		if i < 0 || j < i {
			break
		}
		path = path[:i] + "x" + path[j+1:]
	}
	r := &http.Request{Method: method, URL: &url.URL{Path: path}, Host: "localhost"}
	_, got := s.mux.Handler(r)
	return got == method+" "+pattern
}

// WithDashboard returns the server with the dashboard mounted: the UI's
// page and assets at / (served without a token: they hold no data; the UI
// asks for the token and sends it on every /v1 call), the dashboard's
// endpoints registered, and every request passed through the cross-site
// guard (see guardCrossSite). Use it as the http.Server's handler.
func (s *Server) WithDashboard(cfg dashboard.Config) http.Handler {
	s.registerDashboardAPI()
	ui := dashboard.Handler(cfg)
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", ui)
	mux.Handle("GET /assets/", problemNotFound(ui))
	mux.Handle("/", s)
	return s.guardCrossSite(mux)
}

// guardCrossSite refuses what a hostile web page could make a browser send:
// state-changing requests (every method but GET, HEAD and OPTIONS) from
// another origin, judged by Sec-Fetch-Site and Origin (requests with
// neither, from non-browser clients, pass), with 403 cross_site; and, on a
// server without tokens, requests whose Host is not a loopback name, with
// 403 host_not_allowed (a DNS-rebinding page would otherwise be
// "same-origin" with the API).
func (s *Server) guardCrossSite(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, newProblem(http.StatusForbidden, CodeCrossSite, "cross-site request refused: state-changing requests must come from the same origin"))
	}))
	protected := cop.Handler(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(s.tokens) == 0 && !loopbackHost(r.Host) {
			writeProblem(w, newProblem(http.StatusForbidden, CodeHostNotAllowed, "this server has no tokens and answers only to loopback host names (localhost, 127.0.0.1, [::1])"))
			return
		}
		protected.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether a Host header names a loopback host. An
// empty Host (HTTP/1.0) passes.
func loopbackHost(host string) bool {
	if host == "" {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return IsLoopback(host)
}
