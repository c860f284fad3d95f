package server

import (
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"
)

// validText refuses, for every endpoint and every driver, a request whose
// decoded path or any query parameter (name or value) is not valid UTF-8
// or holds a NUL byte: 400 invalid_parameter before any handler or store
// sees it. Text columns of PostgreSQL hold neither, and an id or filter
// that cannot be stored cannot name anything stored either.
func (s *Server) validText(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := checkText(r.URL); err != nil {
			s.fail(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// checkText returns the problem of the first bad path or query text of u.
func checkText(u *url.URL) error {
	if !goodText(u.Path) {
		return badParam("path %q: must be valid UTF-8 without NUL bytes", truncate(u.EscapedPath(), 64))
	}
	if u.RawQuery == "" {
		return nil
	}
	for name, values := range u.Query() {
		if !goodText(name) {
			return badParam("query parameter name %q: must be valid UTF-8 without NUL bytes", truncate(url.QueryEscape(name), 64))
		}
		for _, v := range values {
			if !goodText(v) {
				return badParam("query parameter %s=%q: must be valid UTF-8 without NUL bytes", truncate(url.QueryEscape(name), 64), truncate(url.QueryEscape(v), 64))
			}
		}
	}
	return nil
}

func goodText(v string) bool { return utf8.ValidString(v) && !strings.ContainsRune(v, 0) }
