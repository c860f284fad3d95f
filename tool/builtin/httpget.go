package builtin

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ErrNoAllowedHosts is returned by [NewHTTPGet] without an allow-list: the
// tool is off unless hosts are named.
var ErrNoAllowedHosts = errors.New("stepwise: http_get needs AllowedHosts")

// HTTPGetConfig configures [NewHTTPGet].
type HTTPGetConfig struct {
	// Name is the tool name. Default "http_get".
	Name string
	// AllowedHosts lists the hosts the tool may fetch from; required (the
	// tool is off without it). An entry is a host name or IP ("example.com",
	// "127.0.0.1": any port), a host and port ("example.com:8443", "[::1]:80":
	// that port only) or a wildcard "*.example.com" (its subdomains, not
	// example.com itself). Matching ignores case. Redirects are followed only
	// to allowed hosts. Names are matched, not resolved addresses.
	AllowedHosts []string
	// MaxBytes is the most of a response body returned; longer bodies are
	// cut and marked truncated. Default 1 MiB.
	MaxBytes int64
	// Timeout bounds a whole fetch, redirects and body included. Default 15s.
	Timeout time.Duration
	// MaxRedirects is the most redirects followed; negative follows none.
	// Default 5.
	MaxRedirects int
	// UserAgent is sent with every request. Default "stepwise-http-get/1".
	UserAgent string
	// Transport sends the requests. Default a clone of http.DefaultTransport.
	Transport http.RoundTripper
}

// WithDefaults returns c with zero fields set to their defaults.
func (c HTTPGetConfig) WithDefaults() HTTPGetConfig {
	if c.Name == "" {
		c.Name = "http_get"
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = 1 << 20
	}
	if c.Timeout == 0 {
		c.Timeout = 15 * time.Second
	}
	if c.MaxRedirects == 0 {
		c.MaxRedirects = 5
	}
	if c.UserAgent == "" {
		c.UserAgent = "stepwise-http-get/1"
	}
	if c.Transport == nil {
		c.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	return c
}

func (c HTTPGetConfig) validate() error {
	if len(c.AllowedHosts) == 0 {
		return ErrNoAllowedHosts
	}
	for _, h := range c.AllowedHosts {
		if strings.TrimSpace(h) == "" || strings.ContainsAny(h, "/ ") {
			return fmt.Errorf("http_get: invalid allowed host %q", h)
		}
	}
	if c.MaxBytes < 0 || c.Timeout < 0 {
		return errors.New("http_get: limits must not be negative")
	}
	return nil
}

// hostRule is one parsed AllowedHosts entry.
type hostRule struct {
	host     string // lower case, without brackets; for wildcards the suffix ".example.com"
	port     string // "" for any port
	wildcard bool
}

func parseHostRule(entry string) hostRule {
	entry = strings.ToLower(strings.TrimSpace(entry))
	r := hostRule{host: entry}
	if h, p, err := net.SplitHostPort(entry); err == nil {
		r.host, r.port = h, p
	}
	r.host = strings.TrimSuffix(strings.TrimPrefix(r.host, "["), "]")
	if strings.HasPrefix(r.host, "*.") {
		r.host, r.wildcard = r.host[1:], true
	}
	return r
}

// allows reports whether the rule admits a URL's host and port.
func (r hostRule) allows(host, port string) bool {
	if r.port != "" && r.port != port {
		return false
	}
	if r.wildcard {
		return strings.HasSuffix(host, r.host) && len(host) > len(r.host)
	}
	return host == r.host
}

// refusal is a URL the tool will not fetch; it is never worth retrying.
type refusal struct{ msg string }

// Error returns the reason for the refusal.
func (e *refusal) Error() string { return e.msg }

// checkURL refuses URLs the configuration does not allow.
func checkURL(u *url.URL, rules []hostRule) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return &refusal{fmt.Sprintf("scheme %q is not allowed: only http and https", u.Scheme)}
	}
	if u.User != nil {
		return &refusal{"URLs with credentials are not allowed"}
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return &refusal{fmt.Sprintf("URL %q has no host", u.String())}
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	for _, r := range rules {
		if r.allows(host, port) {
			return nil
		}
	}
	return &refusal{fmt.Sprintf("host %q is not in the allowed hosts", u.Host)}
}
