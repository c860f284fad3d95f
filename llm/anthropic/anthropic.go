package anthropic

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/internal/sse"
)

// ProviderName is what [Model.Provider] returns.
const ProviderName = "anthropic"

// DefaultBaseURL is the base URL used when neither Config.BaseURL nor
// ANTHROPIC_BASE_URL is set.
const DefaultBaseURL = "https://api.anthropic.com/"

// APIVersion is the anthropic-version header sent with every request.
const APIVersion = "2023-06-01"

// DefaultMaxTokens is the output limit of a call when neither
// Config.MaxTokens nor Request.MaxTokens sets one; the Messages API requires
// a limit.
const DefaultMaxTokens = 4096

// Config configures a [Model]. Only Model is required.
type Config struct {
	// Model is the model id, e.g. "claude-sonnet-4-5". A Request.Model
	// overrides it per call. Required.
	Model string
	// BaseURL is the API root, without /v1. Default: $ANTHROPIC_BASE_URL,
	// else DefaultBaseURL.
	BaseURL string
	// APIKey is sent as the x-api-key header. Default: $ANTHROPIC_API_KEY.
	// When both are empty, $ANTHROPIC_AUTH_TOKEN, if set, is sent as
	// "Authorization: Bearer <token>" (gateways and OAuth tokens).
	APIKey string
	// MaxTokens limits the output of a call, thinking included, when the
	// request sets no limit. Default: DefaultMaxTokens.
	MaxTokens int
	// HTTPClient sends the requests. Default: a client with the standard
	// transport and a 10-minute limit on the wait for response headers.
	HTTPClient *http.Client
	// Timeout bounds one call, from sending the request to the end of the
	// stream. Expiry is a transient *llm.Error with Code "timeout". Default
	// 0: no limit besides the caller's context.
	Timeout time.Duration
	// ExtraHeaders are added to every request, e.g. "anthropic-beta".
	// Default: none.
	ExtraHeaders map[string]string
	// ThinkingBudget turns on extended thinking with this many tokens: at
	// least 1024 and less than the call's max tokens. With thinking on,
	// Request.Temperature is not sent (the API accepts only the default).
	// Default 0: no extended thinking.
	ThinkingBudget int
	// PromptCaching sets the request's top-level cache_control, so that the
	// API caches the longest reusable prefix of each call: cheaper and
	// faster agent loops, since every step resends the previous context.
	// Off by default: cache writes cost 25% more than plain input, and
	// some Anthropic-compatible servers reject the field.
	PromptCaching bool
}

// Model is an [llm.Model] over the Anthropic Messages API. It is safe for
// concurrent use.
type Model struct {
	cfg Config
	// url is the messages endpoint.
	url string
	// authToken is sent as a bearer token when there is no API key.
	authToken string
}

var (
	_ llm.Model    = (*Model)(nil)
	_ llm.Provider = (*Model)(nil)
)

// New returns a Model for cfg, with defaults filled from the environment.
// It makes no network call.
func New(cfg Config) (*Model, error) {
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, errors.New("stepwise: anthropic: Config.Model is required")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = os.Getenv("ANTHROPIC_BASE_URL")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("stepwise: anthropic: Config.BaseURL must be an http(s) URL, got " + cfg.BaseURL)
	}
	if cfg.APIKey == "" {
		cfg.APIKey = os.Getenv("ANTHROPIC_API_KEY")
	}
	if cfg.MaxTokens == 0 {
		cfg.MaxTokens = DefaultMaxTokens
	}
	switch {
	case cfg.MaxTokens < 0:
		return nil, errors.New("stepwise: anthropic: Config.MaxTokens must not be negative")
	case cfg.Timeout < 0:
		return nil, errors.New("stepwise: anthropic: Config.Timeout must not be negative")
	case cfg.ThinkingBudget != 0 && (cfg.ThinkingBudget < 1024 || cfg.ThinkingBudget >= cfg.MaxTokens):
		return nil, fmt.Errorf("stepwise: anthropic: Config.ThinkingBudget must be at least 1024 and less than MaxTokens (%d), got %d", cfg.MaxTokens, cfg.ThinkingBudget)
	}

	m := &Model{cfg: cfg, url: strings.TrimSuffix(cfg.BaseURL, "/") + "/v1/messages"}
	if cfg.APIKey == "" {
		m.authToken = os.Getenv("ANTHROPIC_AUTH_TOKEN")
	}
	if m.cfg.HTTPClient == nil {
		m.cfg.HTTPClient = sse.DefaultClient
	}
	return m, nil
}

// Name returns "anthropic:" followed by the configured model id.
func (m *Model) Name() string { return ProviderName + ":" + m.cfg.Model }

// Provider returns "anthropic".
func (m *Model) Provider() string { return ProviderName }

// Generate streams one message for req; see [llm.Model] for the contract of
// the sequence. Partial responses carry text, thinking and tool-input
// deltas as they arrive; the final response carries the whole message,
// usage, stop reason and the model id the API reported.
//
// Errors are *llm.Error classified for the engine's retries, except that
// cancellation of ctx yields ctx.Err() unchanged.
func (m *Model) Generate(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Response, error] {
	return func(yield func(*llm.Response, error) bool) {
		params, err := m.params(req)
		if err != nil {
			yield(nil, err)
			return
		}
		callCtx, cancel := ctx, context.CancelFunc(func() {})
		if m.cfg.Timeout > 0 {
			callCtx, cancel = context.WithTimeout(ctx, m.cfg.Timeout)
		}
		defer cancel()

		// One attempt: the engine retries, and records each attempt.
		raw, err := sse.Post(callCtx, m.cfg.HTTPClient, m.url, params, m.header())
		if err != nil || raw.StatusCode >= 400 {
			yield(nil, m.callError(ctx, callCtx, raw, err))
			return
		}
		m.stream(ctx, callCtx, raw, yield)
	}
}

// header returns the headers of every request.
func (m *Model) header() http.Header {
	h := make(http.Header, len(m.cfg.ExtraHeaders)+2)
	h.Set("anthropic-version", APIVersion)
	switch {
	case m.cfg.APIKey != "":
		h.Set("x-api-key", m.cfg.APIKey)
	case m.authToken != "":
		h.Set("Authorization", "Bearer "+m.authToken)
	}
	for k, v := range m.cfg.ExtraHeaders {
		h.Set(k, v)
	}
	return h
}
