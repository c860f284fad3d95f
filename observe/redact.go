package observe

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// Redacted replaces a secret.
const Redacted = "[REDACTED]"

// secret is a credential pattern and the literals one of which any match
// contains (case-insensitively when fold): the pattern only runs on text
// that has one, as Go's regexp engine is too slow to scan every string
// with every pattern.
type secret struct {
	re       *regexp.Regexp
	literals []string
	fold     bool
}

// secrets match credentials inside free text: bearer and basic
// authorizations and the key formats of common providers (OpenAI,
// Anthropic, AWS, GitHub, Slack, Google, Stripe) and JWTs.
var secrets = []secret{
	{regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}`), []string{"bearer", "basic"}, true},
	{regexp.MustCompile(`\bsk-(?:proj-|ant-[a-z0-9]+-)?[A-Za-z0-9_-]{16,}`), []string{"sk-"}, false},
	{regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`), []string{"AKIA", "ASIA"}, false},
	{regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{30,}\b`), []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}, false},
	{regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{40,}\b`), []string{"github_pat_"}, false},
	{regexp.MustCompile(`\bxox[abprs]-[A-Za-z0-9-]{10,}`), []string{"xox"}, false},
	{regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}\b`), []string{"AIza"}, false},
	{regexp.MustCompile(`\b[rs]k_(?:live|test)_[0-9A-Za-z]{16,}\b`), []string{"k_live_", "k_test_"}, false},
	{regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`), []string{"eyJ"}, false},
}

// mayContain reports whether s contains one of the literals.
func mayContain(s string, literals []string, fold bool) bool {
	if fold {
		s = strings.ToLower(s)
	}
	for _, l := range literals {
		if strings.Contains(s, l) {
			return true
		}
	}
	return false
}

// RedactText replaces the credentials found in s.
func RedactText(s string) string {
	for _, sec := range secrets {
		if !mayContain(s, sec.literals, sec.fold) || !sec.re.MatchString(s) {
			continue
		}
		s = sec.re.ReplaceAllStringFunc(s, func(m string) string {
			if scheme, _, ok := strings.Cut(m, " "); ok && (strings.EqualFold(scheme, "bearer") || strings.EqualFold(scheme, "basic")) {
				return scheme + " " + Redacted
			}
			return Redacted
		})
	}
	return s
}

// secretName reports whether a header, JSON key or query parameter name
// holds a credential. Counters such as "max_tokens" are not secrets.
func secretName(name string) bool {
	n := strings.ToLower(strings.ReplaceAll(name, "-", "_"))
	switch n {
	case "authorization", "proxy_authorization", "cookie", "set_cookie", "api_key", "apikey", "x_api_key",
		"x_goog_api_key", "password", "passwd", "secret", "token", "access_token", "refresh_token",
		"id_token", "auth_token", "session_token", "client_secret", "private_key":
		return true
	}
	return strings.HasSuffix(n, "_secret") || strings.HasSuffix(n, "_password") || strings.HasSuffix(n, "_api_key") ||
		strings.HasSuffix(n, "_apikey") || strings.HasSuffix(n, "_token") || strings.HasPrefix(n, "x_auth")
}

// RedactHeaders returns a copy of h with the values of credential headers
// (Authorization, Cookie, X-Api-Key…) replaced and credentials in the other
// values redacted.
func RedactHeaders(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, vs := range h {
		c := make([]string, len(vs))
		for i, v := range vs {
			if secretName(k) {
				c[i] = Redacted
			} else {
				c[i] = RedactText(v)
			}
		}
		out[k] = c
	}
	return out
}

// RedactURL redacts credential query parameters and user info of a URL.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return RedactText(raw)
	}
	if u.User != nil {
		u.User = url.User(Redacted)
	}
	q := u.Query()
	changed := false
	for k := range q {
		if n := strings.ToLower(k); secretName(k) || n == "key" || n == "sig" || n == "signature" {
			q[k] = []string{Redacted}
			changed = true
		}
	}
	if changed {
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// RedactJSON redacts a JSON document: the values of credential keys are
// replaced, and credentials inside other strings are redacted. Invalid JSON
// is redacted as text.
func RedactJSON(b []byte) []byte {
	return rewriteJSON(b, func(key, s string) string {
		if secretName(key) {
			return Redacted
		}
		return RedactText(s)
	})
}

// rewriteJSON applies fn to every string value of a JSON document (key is
// the object key holding it, "" in arrays). The document is re-encoded only
// when something changed; invalid JSON is rewritten as one string.
func rewriteJSON(b []byte, fn func(key, s string) string) []byte {
	if len(b) == 0 {
		return b
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return []byte(fn("", string(b)))
	}
	changed := false
	var walk func(key string, v any) any
	walk = func(key string, v any) any {
		switch t := v.(type) {
		case string:
			if s := fn(key, t); s != t {
				changed = true
				return s
			}
		case map[string]any:
			for k, x := range t {
				t[k] = walk(k, x)
			}
		case []any:
			for i, x := range t {
				t[i] = walk(key, x)
			}
		}
		return v
	}
	v = walk("", v)
	if !changed {
		return b
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return b
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}
