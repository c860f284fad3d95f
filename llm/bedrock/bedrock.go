package bedrock

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
	"sync/atomic"
	"time"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/internal/sse"
	"github.com/stepwise-run/stepwise/steptype"
)

// ProviderName is what [Model.Provider] returns.
const ProviderName = "bedrock"

// signingName is the service name of the credential scope.
const signingName = "bedrock"

// Config configures a [Model]. Model and a region are required.
type Config struct {
	// Model is the model id ("anthropic.claude-sonnet-4-5-20250929-v1:0",
	// "amazon.nova-pro-v1:0"), an inference profile id
	// ("us.anthropic.…") or an ARN. A Request.Model overrides it per call.
	// Required.
	Model string
	// Region is the AWS region, e.g. "us-east-1". Default: DefaultRegion()
	// (AWS_REGION, AWS_DEFAULT_REGION, the profile's region). Required.
	Region string
	// BaseURL is the runtime endpoint. Default:
	// $AWS_ENDPOINT_URL_BEDROCK_RUNTIME, else $AWS_ENDPOINT_URL, else
	// https://bedrock-runtime.REGION.amazonaws.com.
	BaseURL string
	// Credentials returns the keys that sign each request. Default:
	// DefaultCredentials (environment, then the shared files).
	Credentials CredentialsFunc
	// BearerToken is a Bedrock API key, sent as "Authorization: Bearer"
	// instead of a signature. Default: $AWS_BEARER_TOKEN_BEDROCK.
	BearerToken string
	// MaxTokens limits the output of a call (inferenceConfig.maxTokens)
	// when the request sets no limit. Default 0: the model's default.
	MaxTokens int
	// Unary sends converse and yields only the final response. Default
	// false: converse-stream.
	Unary bool
	// PromptCaching ends the last message with a cachePoint, so that
	// models that support it (Claude 3.7 and later, Nova) cache the
	// longest reusable prefix of each call: cheaper and faster agent
	// loops, since every step resends the previous context. Off by
	// default: cache writes cost more than plain input, and other models
	// refuse the block.
	PromptCaching bool
	// HTTPClient sends the requests. Default: a client with the standard
	// transport and a 10-minute limit on the wait for response headers.
	HTTPClient *http.Client
	// Timeout bounds one call, from sending the request to the end of the
	// stream. Expiry is a transient *llm.Error with Code "timeout".
	// Default 0: no limit besides the caller's context.
	Timeout time.Duration
	// ExtraHeaders are added to every request (and signed). Default: none.
	ExtraHeaders map[string]string
}

// Model is an [llm.Model] over the Amazon Bedrock Converse API. It is safe
// for concurrent use.
type Model struct {
	cfg  Config
	base string // endpoint without a trailing slash
	// unaryTools is set once the model has refused tools in a stream:
	// requests with tools go to converse from then on.
	unaryTools atomic.Bool
}

var (
	_ llm.Model    = (*Model)(nil)
	_ llm.Provider = (*Model)(nil)
)

// New returns a Model for cfg, with defaults filled from the environment
// and the shared config file. It makes no network call and reads no
// credentials: they are read before each request.
func New(cfg Config) (*Model, error) {
	cfg.Model = strings.TrimSpace(cfg.Model)
	if cfg.Model == "" {
		return nil, errors.New("stepwise: bedrock: Config.Model is required")
	}
	if cfg.Region == "" {
		cfg.Region = DefaultRegion()
	}
	if cfg.Region == "" {
		return nil, errors.New("stepwise: bedrock: no region: set Config.Region, AWS_REGION or the profile's region in ~/.aws/config")
	}
	for _, k := range []string{"AWS_ENDPOINT_URL_BEDROCK_RUNTIME", "AWS_ENDPOINT_URL"} {
		if cfg.BaseURL == "" {
			cfg.BaseURL = os.Getenv(k)
		}
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = "https://bedrock-runtime." + cfg.Region + ".amazonaws.com"
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("stepwise: bedrock: Config.BaseURL must be an http(s) URL, got " + cfg.BaseURL)
	}
	if cfg.BearerToken == "" {
		cfg.BearerToken = os.Getenv("AWS_BEARER_TOKEN_BEDROCK")
	}
	if cfg.Credentials == nil {
		cfg.Credentials = DefaultCredentials
	}
	switch {
	case cfg.MaxTokens < 0:
		return nil, errors.New("stepwise: bedrock: Config.MaxTokens must not be negative")
	case cfg.Timeout < 0:
		return nil, errors.New("stepwise: bedrock: Config.Timeout must not be negative")
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = sse.DefaultClient
	}
	return &Model{cfg: cfg, base: strings.TrimSuffix(cfg.BaseURL, "/")}, nil
}

// Name returns "bedrock:" followed by the configured model id.
func (m *Model) Name() string { return ProviderName + ":" + m.cfg.Model }

// Provider returns "bedrock".
func (m *Model) Provider() string { return ProviderName }

// Generate streams one message for req; see [llm.Model] for the contract of
// the sequence. Partial responses carry text, reasoning and tool-input
// deltas as they arrive; the final response carries the whole message,
// usage and stop reason, and as its Model the model id called (the API
// reports none).
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
		unary := m.cfg.Unary || body.ToolConfig != nil && m.unaryTools.Load()
		raw, err := m.post(callCtx, model, body, unary)
		if err != nil || raw.StatusCode >= 400 {
			err := m.callError(ctx, callCtx, raw, err)
			if !unary && body.ToolConfig != nil && refusesStreamedTools(err) {
				// Some models take tools only without streaming:
				// the next attempt goes to converse.
				m.unaryTools.Store(true)
				err = &llm.Error{Class: steptype.ErrorTransient, StatusCode: 400, Code: "stream_unsupported",
					Message: "the model takes tools only without streaming; the next attempt uses converse", Err: err}
			}
			yield(nil, err)
			return
		}
		if unary {
			m.unary(ctx, callCtx, raw, model, yield)
			return
		}
		m.stream(ctx, callCtx, raw, model, yield)
	}
}

// post signs and sends body to the model's converse or converse-stream
// operation.
func (m *Model) post(ctx context.Context, model string, body *converseRequest, unary bool) (*http.Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	op, accept := "/converse-stream", "application/vnd.amazon.eventstream"
	if unary {
		op, accept = "/converse", "application/json"
	}
	// The model id is escaped as AWS does (":" and "/" too), and the
	// signature encodes that path once more.
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, m.base+"/model/"+uriEncode(model)+op, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	for k, v := range m.cfg.ExtraHeaders {
		hr.Header.Set(k, v)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", accept)
	if m.cfg.BearerToken != "" {
		hr.Header.Set("Authorization", "Bearer "+m.cfg.BearerToken)
	} else {
		c, err := m.cfg.Credentials(ctx)
		if err != nil {
			return nil, &llm.Error{Class: steptype.ErrorPermanent, Code: "auth", Message: err.Error(), Err: err}
		}
		if c.AccessKeyID == "" || c.SecretAccessKey == "" {
			return nil, &llm.Error{Class: steptype.ErrorPermanent, Code: "auth", Message: ErrNoCredentials.Error(), Err: ErrNoCredentials}
		}
		sign(hr, b, c, m.cfg.Region, signingName, time.Now())
	}
	return m.cfg.HTTPClient.Do(hr)
}
