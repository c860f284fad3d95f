package gemini

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/internal/sse"
	"github.com/stepwise-run/stepwise/steptype"
)

// ProviderName is what [Model.Provider] returns.
const ProviderName = "gemini"

// DefaultBaseURL is the base URL used when neither Config.BaseURL nor
// GEMINI_BASE_URL is set.
const DefaultBaseURL = "https://generativelanguage.googleapis.com/"

// APIVersion is the path segment of the API version this package speaks.
const APIVersion = "v1beta"

// Config configures a [Model]. Only Model is required.
type Config struct {
	// Model is the model id, e.g. "gemini-2.5-flash" ("models/" in front
	// is accepted). A Request.Model overrides it per call. Required.
	Model string
	// BaseURL is the API root; APIVersion is appended unless the URL
	// already ends with a version ("/v1beta", "/v1", "/v1alpha"). Default:
	// $GEMINI_BASE_URL, else DefaultBaseURL.
	BaseURL string
	// APIKey is sent as the x-goog-api-key header. Default:
	// $GOOGLE_API_KEY, else $GEMINI_API_KEY (the precedence of Google's
	// own SDKs).
	APIKey string
	// MaxTokens limits the output of a call (maxOutputTokens) when the
	// request sets no limit. Default 0: the model's own limit.
	MaxTokens int
	// IncludeThoughts asks thinking models for thought summaries, which
	// become the response's Reasoning. Default false.
	IncludeThoughts bool
	// ThinkingBudget, when not nil, sets thinkingConfig.thinkingBudget:
	// 0 turns thinking off where the model allows it, -1 lets the model
	// decide. Default nil: the model's default.
	ThinkingBudget *int
	// Unary sends generateContent and yields only the final response,
	// for servers or proxies that cannot stream. Default false:
	// streamGenerateContent with alt=sse.
	Unary bool
	// HTTPClient sends the requests. Default: a client with the standard
	// transport and a 10-minute limit on the wait for response headers.
	HTTPClient *http.Client
	// Timeout bounds one call, from sending the request to the end of the
	// stream. Expiry is a transient *llm.Error with Code "timeout".
	// Default 0: no limit besides the caller's context.
	Timeout time.Duration
	// ExtraHeaders are added to every request. Default: none.
	ExtraHeaders map[string]string
	// Vertex calls Vertex AI instead of the Gemini API: the same wire
	// format under the project's publishers/google/models, with an OAuth
	// access token from TokenSource; without a Project, Vertex AI's
	// express mode with the API key. Default: $GOOGLE_GENAI_USE_VERTEXAI
	// is "true" or "1" (the switch of Google's SDKs).
	Vertex bool
	// Project and Location name the Vertex AI project and region.
	// Default: $GOOGLE_CLOUD_PROJECT and $GOOGLE_CLOUD_LOCATION, else
	// location "global". Vertex AI only.
	Project, Location string
	// TokenSource returns the access token of each Vertex AI call with a
	// Project. Default: DefaultTokenSource (Application Default
	// Credentials).
	TokenSource TokenFunc
}

// Model is an [llm.Model] over the Gemini API. It is safe for concurrent
// use.
type Model struct {
	cfg Config
	// root is the models collection URL, ending in "/models/".
	root string
	// sigs are the thought signatures of the calls received.
	sigs signatures
}

var (
	_ llm.Model    = (*Model)(nil)
	_ llm.Provider = (*Model)(nil)
)

// New returns a Model for cfg, with defaults filled from the environment.
// It makes no network call.
func New(cfg Config) (*Model, error) {
	cfg.Model = strings.TrimPrefix(strings.TrimSpace(cfg.Model), "models/")
	if cfg.Model == "" {
		return nil, errors.New("stepwise: gemini: Config.Model is required")
	}
	if strings.ContainsAny(cfg.Model, "/:?# ") {
		return nil, errors.New("stepwise: gemini: Config.Model must be a bare model id, got " + cfg.Model)
	}
	if !cfg.Vertex {
		v := strings.ToLower(strings.TrimSpace(os.Getenv("GOOGLE_GENAI_USE_VERTEXAI")))
		cfg.Vertex = v == "true" || v == "1"
	}
	if cfg.BaseURL == "" && !cfg.Vertex {
		cfg.BaseURL = os.Getenv("GEMINI_BASE_URL")
	}
	if cfg.BaseURL != "" {
		u, err := url.Parse(cfg.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, errors.New("stepwise: gemini: Config.BaseURL must be an http(s) URL, got " + cfg.BaseURL)
		}
	}
	if cfg.APIKey == "" {
		cfg.APIKey = os.Getenv("GOOGLE_API_KEY")
	}
	if cfg.APIKey == "" {
		cfg.APIKey = os.Getenv("GEMINI_API_KEY")
	}
	switch {
	case cfg.MaxTokens < 0:
		return nil, errors.New("stepwise: gemini: Config.MaxTokens must not be negative")
	case cfg.Timeout < 0:
		return nil, errors.New("stepwise: gemini: Config.Timeout must not be negative")
	case cfg.ThinkingBudget != nil && *cfg.ThinkingBudget < -1:
		return nil, errors.New("stepwise: gemini: Config.ThinkingBudget must be -1 or more")
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = sse.DefaultClient
	}
	if cfg.Vertex {
		root, err := vertexRoot(&cfg)
		if err != nil {
			return nil, err
		}
		return &Model{cfg: cfg, root: root}, nil
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	root := strings.TrimSuffix(cfg.BaseURL, "/")
	if v := root[strings.LastIndexByte(root, '/')+1:]; v != "v1beta" && v != "v1" && v != "v1alpha" {
		root += "/" + APIVersion
	}
	return &Model{cfg: cfg, root: root + "/models/"}, nil
}

// Name returns "gemini:" followed by the configured model id.
func (m *Model) Name() string { return ProviderName + ":" + m.cfg.Model }

// Provider returns "gemini".
func (m *Model) Provider() string { return ProviderName }

// Generate streams one response for req; see [llm.Model] for the contract
// of the sequence. Partial responses carry text and thought deltas as they
// arrive, and each function call whole (Gemini does not split them); the
// final response carries the whole message, usage, finish reason and the
// model version the API reported.
//
// Errors are *llm.Error classified for the engine's retries, except that
// cancellation of ctx yields ctx.Err() unchanged.
func (m *Model) Generate(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Response, error] {
	return func(yield func(*llm.Response, error) bool) {
		body, model, err := m.params(req)
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
		raw, err := m.post(callCtx, model, body)
		if err != nil || raw.StatusCode >= 400 {
			yield(nil, m.callError(ctx, callCtx, raw, err))
			return
		}
		if m.cfg.Unary {
			m.unary(ctx, callCtx, raw, yield)
			return
		}
		m.stream(ctx, callCtx, raw, yield)
	}
}

// post sends body to the model's generateContent or streamGenerateContent
// method.
func (m *Model) post(ctx context.Context, model string, body *generateRequest) (*http.Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	u, accept := m.root+url.PathEscape(model)+":streamGenerateContent?alt=sse", "text/event-stream"
	if m.cfg.Unary {
		u, accept = m.root+url.PathEscape(model)+":generateContent", "application/json"
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	for k, v := range m.cfg.ExtraHeaders {
		hr.Header.Set(k, v)
	}
	switch {
	case m.cfg.Vertex && m.cfg.Project != "":
		tok, err := m.cfg.TokenSource(ctx)
		if err != nil {
			return nil, &llm.Error{Class: steptype.ErrorPermanent, Code: "auth", Message: err.Error(), Err: err}
		}
		hr.Header.Set("Authorization", "Bearer "+tok)
	case m.cfg.APIKey != "":
		hr.Header.Set("x-goog-api-key", m.cfg.APIKey)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", accept)
	return m.cfg.HTTPClient.Do(hr)
}
