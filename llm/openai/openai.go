package openai

import (
	"context"
	"errors"
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
const ProviderName = "openai"

// DefaultBaseURL is the base URL used when neither Config.BaseURL nor
// OPENAI_BASE_URL is set.
const DefaultBaseURL = "https://api.openai.com/v1/"

// Config configures a [Model]. Only Model is required.
type Config struct {
	// Model is the model id sent to the server, e.g. "gpt-4o-mini",
	// "qwen2.5:7b" (Ollama) or "meta-llama/Llama-3.1-8B-Instruct" (vLLM).
	// A Request.Model overrides it per call. Required.
	Model string
	// BaseURL is the API root, ending in /v1 for most servers, e.g.
	// "http://localhost:11434/v1". Default: $OPENAI_BASE_URL, else
	// DefaultBaseURL.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>". Default:
	// $OPENAI_API_KEY. Local servers usually need none; leave both empty.
	APIKey string
	// HTTPClient sends the requests. Default: a client with the standard
	// transport and a 10-minute limit on the wait for response headers.
	HTTPClient *http.Client
	// Timeout bounds one call, from sending the request to the end of the
	// stream. Expiry is a transient *llm.Error with Code "timeout". Default
	// 0: no limit besides the caller's context.
	Timeout time.Duration
	// ExtraHeaders are added to every request (e.g. "OpenAI-Organization",
	// "HTTP-Referer" for OpenRouter). Default: none.
	ExtraHeaders map[string]string
}

// Model is an [llm.Model] over an OpenAI-compatible chat completions
// endpoint. It is safe for concurrent use.
type Model struct {
	cfg Config
	// url is the chat completions endpoint.
	url string
	// envHeaders are the headers the environment asks for.
	envHeaders http.Header
	// maxCompletion sends max_completion_tokens instead of max_tokens.
	maxCompletion bool
}

var (
	_ llm.Model    = (*Model)(nil)
	_ llm.Provider = (*Model)(nil)
)

// New returns a Model for cfg, with defaults filled from the environment.
// It makes no network call.
func New(cfg Config) (*Model, error) {
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, errors.New("stepwise: openai: Config.Model is required")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = os.Getenv("OPENAI_BASE_URL")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("stepwise: openai: Config.BaseURL must be an http(s) URL, got " + cfg.BaseURL)
	}
	if cfg.APIKey == "" {
		cfg.APIKey = os.Getenv("OPENAI_API_KEY")
	}
	if cfg.Timeout < 0 {
		return nil, errors.New("stepwise: openai: Config.Timeout must not be negative")
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = sse.DefaultClient
	}
	return &Model{
		cfg:        cfg,
		url:        strings.TrimSuffix(cfg.BaseURL, "/") + "/chat/completions",
		envHeaders: envHeaders(),
		// api.openai.com rejects max_tokens for reasoning models; other
		// servers may not know max_completion_tokens.
		maxCompletion: u.Hostname() == "api.openai.com",
	}, nil
}

// Name returns "openai:" followed by the configured model id.
func (m *Model) Name() string { return ProviderName + ":" + m.cfg.Model }

// Provider returns "openai".
func (m *Model) Provider() string { return ProviderName }

// Generate streams one chat completion for req; see [llm.Model] for the
// contract of the sequence. Partial responses carry content, reasoning and
// tool-call deltas as they arrive; the final response carries the whole
// message, usage, finish reason and the model id the server reported.
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
	h := m.envHeaders.Clone()
	if h == nil {
		h = make(http.Header, len(m.cfg.ExtraHeaders)+1)
	}
	if m.cfg.APIKey != "" {
		h.Set("Authorization", "Bearer "+m.cfg.APIKey)
	}
	for k, v := range m.cfg.ExtraHeaders {
		h.Set(k, v)
	}
	return h
}

// envHeaders reads OPENAI_ORG_ID (OpenAI-Organization), OPENAI_PROJECT_ID
// (OpenAI-Project) and OPENAI_CUSTOM_HEADERS ("Name: value" lines), as the
// official clients do.
func envHeaders() http.Header {
	h := http.Header{}
	if v := os.Getenv("OPENAI_ORG_ID"); v != "" {
		h.Set("OpenAI-Organization", v)
	}
	if v := os.Getenv("OPENAI_PROJECT_ID"); v != "" {
		h.Set("OpenAI-Project", v)
	}
	for _, line := range strings.Split(os.Getenv("OPENAI_CUSTOM_HEADERS"), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) != "" {
			h.Set(strings.TrimSpace(k), strings.TrimSpace(v))
		}
	}
	if len(h) == 0 {
		return nil
	}
	return h
}
