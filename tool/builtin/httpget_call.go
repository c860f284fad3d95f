package builtin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"unicode/utf8"

	"github.com/stepwise-run/stepwise/tool"
)

// HTTPGetArgs are the http_get tool's arguments.
type HTTPGetArgs struct {
	URL string `json:"url" jsonschema:"absolute http or https URL to fetch"`
}

// HTTPGetResult is the http_get tool's result.
type HTTPGetResult struct {
	URL         string `json:"url"` // the final URL, after redirects
	Status      int    `json:"status"`
	ContentType string `json:"content_type,omitempty"`
	Body        string `json:"body"`
	Truncated   bool   `json:"truncated,omitempty"` // Body is the first MaxBytes only
	Binary      bool   `json:"binary,omitempty"`    // the body is not text and is left out
}

// NewHTTPGet returns a tool that fetches a URL with GET from an allow-list
// of hosts. It refuses other hosts, schemes other than http and https, URLs
// with credentials, and redirects to hosts not allowed; it returns at most
// MaxBytes of the body. Responses 429 and 5xx are transient errors (the
// engine retries them); every other status is a result the model reads.
// Without AllowedHosts it fails with [ErrNoAllowedHosts].
func NewHTTPGet(cfg HTTPGetConfig) (tool.Tool, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	rules := make([]hostRule, len(cfg.AllowedHosts))
	for i, h := range cfg.AllowedHosts {
		rules[i] = parseHostRule(h)
	}
	g := &httpGet{cfg: cfg, rules: rules}
	g.client = &http.Client{
		Transport: cfg.Transport,
		Timeout:   cfg.Timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > max(cfg.MaxRedirects, 0) {
				return &refusal{fmt.Sprintf("stopped after %d redirects", max(cfg.MaxRedirects, 0))}
			}
			if err := checkURL(req.URL, rules); err != nil {
				return &refusal{fmt.Sprintf("redirect to %s refused: %v", req.URL, err)}
			}
			return nil
		},
	}
	return tool.New(cfg.Name, "Fetch a web page or API response with HTTP GET (only from allowed hosts).", g.get), nil
}

type httpGet struct {
	cfg    HTTPGetConfig
	rules  []hostRule
	client *http.Client
}

func (g *httpGet) get(ctx context.Context, a HTTPGetArgs) (HTTPGetResult, error) {
	u, err := url.Parse(a.URL)
	if err != nil {
		return HTTPGetResult{}, tool.Permanent(fmt.Errorf("invalid URL %q: %w", a.URL, err))
	}
	if err := checkURL(u, g.rules); err != nil {
		return HTTPGetResult{}, tool.Permanent(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return HTTPGetResult{}, tool.Permanent(fmt.Errorf("invalid URL %q: %w", a.URL, err))
	}
	req.Header.Set("User-Agent", g.cfg.UserAgent)
	if key := callKey(ctx); key != "" {
		// Stable across re-executions of the call: a server that honours
		// it (as payment and queue APIs do) acts once.
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := g.client.Do(req)
	if err != nil {
		var r *refusal
		if errors.As(err, &r) {
			return HTTPGetResult{}, tool.Permanent(r)
		}
		return HTTPGetResult{}, fmt.Errorf("GET %s: %w", a.URL, err) // llm.Classify: timeouts and resets retry
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
		return HTTPGetResult{}, tool.Transient(fmt.Errorf("GET %s: HTTP %s", a.URL, resp.Status))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, g.cfg.MaxBytes+1))
	if err != nil {
		return HTTPGetResult{}, fmt.Errorf("GET %s: read body: %w", a.URL, err)
	}
	res := HTTPGetResult{URL: resp.Request.URL.String(), Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type")}
	if int64(len(body)) > g.cfg.MaxBytes {
		body, res.Truncated = trimPartialRune(body[:g.cfg.MaxBytes]), true
	}
	if utf8.Valid(body) {
		res.Body = string(body)
	} else {
		res.Binary = true
	}
	return res, nil
}

// trimPartialRune drops an incomplete UTF-8 sequence cut off at the end.
func trimPartialRune(b []byte) []byte {
	for i := 1; i < utf8.UTFMax && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			break
		}
	}
	return b
}
