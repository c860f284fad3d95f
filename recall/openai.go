package recall

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// DefaultOpenAIBaseURL is used when neither OpenAIConfig.BaseURL nor
// $OPENAI_BASE_URL is set.
const DefaultOpenAIBaseURL = "https://api.openai.com/v1"

// OpenAIConfig configures an embedder over an OpenAI-compatible
// embeddings endpoint (POST {BaseURL}/embeddings): OpenAI, Azure-style
// proxies, Ollama, vLLM, llama.cpp, LM Studio, LiteLLM. Only Model is
// required.
type OpenAIConfig struct {
	// Model is the model id, e.g. "text-embedding-3-small" or
	// "nomic-embed-text". Required.
	Model string
	// BaseURL is the API root, e.g. "http://localhost:11434/v1". Default:
	// $OPENAI_BASE_URL, else DefaultOpenAIBaseURL.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer KEY". Default:
	// $OPENAI_API_KEY; none when both are empty (local servers).
	APIKey string
	// Dimensions, when > 0, is sent as "dimensions" (text-embedding-3
	// models shorten their vectors) and is the embedder's Dim. Default 0:
	// the model's own dimension, known for OpenAI's models and otherwise
	// learned from the first answer.
	Dimensions int
	// Name is the embedder's name. Default "openai:MODEL", plus ":DIMS"
	// when Dimensions is set. Give servers that serve different models
	// under one id different names.
	Name string
	// BatchSize is the number of texts sent per request. Default 128.
	BatchSize int
	// MaxRetries is how many times a transient failure (429, 5xx, timeout,
	// connection reset) is retried, with exponential backoff from 500ms
	// and the server's Retry-After. Default 2; negative means none.
	MaxRetries int
	// HTTPClient sends the requests. Default: a client with a 60s timeout.
	HTTPClient *http.Client
	// ExtraHeaders are added to every request.
	ExtraHeaders map[string]string
}

// OpenAI is an Embedder over an OpenAI-compatible embeddings endpoint,
// with plain net/http. It is safe for concurrent use.
type OpenAI struct {
	cfg      OpenAIConfig
	endpoint string
	dim      atomic.Int64
}

// knownDims are the native dimensions of OpenAI's embedding models.
var knownDims = map[string]int{
	"text-embedding-3-small": 1536,
	"text-embedding-3-large": 3072,
	"text-embedding-ada-002": 1536,
}

// NewOpenAI returns an embedder for cfg, with defaults from the
// environment. It makes no network call.
func NewOpenAI(cfg OpenAIConfig) (*OpenAI, error) {
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, invalid("openai embedder: Model is required")
	}
	cfg.BaseURL = cmp.Or(cfg.BaseURL, os.Getenv("OPENAI_BASE_URL"), DefaultOpenAIBaseURL)
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, invalid("openai embedder: BaseURL must be an http(s) URL, got %q", cfg.BaseURL)
	}
	cfg.APIKey = cmp.Or(cfg.APIKey, os.Getenv("OPENAI_API_KEY"))
	if cfg.Dimensions < 0 || cfg.BatchSize < 0 {
		return nil, invalid("openai embedder: negative Dimensions or BatchSize")
	}
	cfg.BatchSize = cmp.Or(cfg.BatchSize, 128)
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 2
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 60 * time.Second}
	}
	if cfg.Name == "" {
		cfg.Name = "openai:" + cfg.Model
		if cfg.Dimensions > 0 {
			cfg.Name += fmt.Sprintf(":%d", cfg.Dimensions)
		}
	}
	e := &OpenAI{cfg: cfg, endpoint: strings.TrimSuffix(cfg.BaseURL, "/") + "/embeddings"}
	e.dim.Store(int64(cmp.Or(cfg.Dimensions, knownDims[cfg.Model])))
	return e, nil
}

// Name implements Embedder.
func (e *OpenAI) Name() string { return e.cfg.Name }

// Dim implements Embedder: 0 until known.
func (e *OpenAI) Dim() int { return int(e.dim.Load()) }

// Embed implements Embedder: one request per BatchSize texts. Errors are
// *llm.Error, classified transient or permanent like model calls.
func (e *OpenAI) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += e.cfg.BatchSize {
		batch := texts[start:min(start+e.cfg.BatchSize, len(texts))]
		vecs, err := e.retry(ctx, batch)
		if err != nil {
			return nil, err
		}
		out = append(out, vecs...)
	}
	return out, nil
}

func (e *OpenAI) retry(ctx context.Context, texts []string) ([][]float32, error) {
	delay := 500 * time.Millisecond
	for attempt := 0; ; attempt++ {
		vecs, err := e.call(ctx, texts)
		if err == nil || attempt >= e.cfg.MaxRetries || llm.Classify(err) != steptype.ErrorTransient || ctx.Err() != nil {
			return vecs, err
		}
		wait := max(delay, llm.RetryAfter(err))
		delay = min(2*delay, 8*time.Second)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

type embedRequest struct {
	Model      string   `json:"model"`
	Input      []string `json:"input"`
	Dimensions int      `json:"dimensions,omitempty"`
}

type embedResponse struct {
	Data []struct {
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"` // floats, or base64 float32s
	} `json:"data"`
}

func (e *OpenAI) call(ctx context.Context, texts []string) ([][]float32, error) {
	body, err := json.Marshal(embedRequest{Model: e.cfg.Model, Input: texts, Dimensions: e.cfg.Dimensions})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, &llm.Error{Class: steptype.ErrorPermanent, Code: "request", Message: err.Error(), Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if e.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+e.cfg.APIKey)
	}
	for k, v := range e.cfg.ExtraHeaders {
		req.Header.Set(k, v)
	}
	resp, err := e.cfg.HTTPClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &llm.Error{Class: llm.Classify(err), Code: "connection", Message: err.Error(), Err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, &llm.Error{Class: steptype.ErrorTransient, Code: "connection", Message: "read response: " + err.Error(), Err: err}
	}
	if resp.StatusCode >= 400 {
		class, code := llm.ClassifyHTTP(resp.StatusCode)
		return nil, &llm.Error{Class: class, Code: code, StatusCode: resp.StatusCode,
			RetryAfter: llm.ParseRetryAfter(resp.Header, time.Now()), Message: errorMessage(raw, resp.Status)}
	}
	return e.decode(raw, len(texts))
}

// decode reads the vectors of an answer in input order and checks them.
func (e *OpenAI) decode(raw []byte, n int) ([][]float32, error) {
	bad := func(format string, args ...any) error {
		return &llm.Error{Class: steptype.ErrorPermanent, Code: "bad_response", Message: fmt.Sprintf(format, args...)}
	}
	var r embedResponse
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, bad("embeddings response is not JSON: %v", err)
	}
	if len(r.Data) != n {
		return nil, bad("embeddings response has %d vectors for %d inputs", len(r.Data), n)
	}
	out := make([][]float32, n)
	for _, d := range r.Data {
		if d.Index < 0 || d.Index >= n || out[d.Index] != nil {
			return nil, bad("embeddings response has a bad or repeated index %d", d.Index)
		}
		v, err := vectorOf(d.Embedding)
		if err != nil {
			return nil, bad("embedding %d: %v", d.Index, err)
		}
		out[d.Index] = v
	}
	dim := e.Dim()
	for i, v := range out {
		if dim == 0 {
			dim = len(v)
			e.dim.CompareAndSwap(0, int64(dim))
			dim = e.Dim()
		}
		if len(v) != dim {
			return nil, bad("embedding %d has %d dimensions, want %d", i, len(v), dim)
		}
	}
	return out, nil
}

// vectorOf decodes an embedding sent as a JSON array of numbers or as a
// base64 string of little-endian float32s.
func vectorOf(raw json.RawMessage) ([]float32, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b)%4 != 0 || len(b) == 0 {
			return nil, fmt.Errorf("bad base64 embedding")
		}
		v := make([]float32, len(b)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return v, nil
	}
	var v []float32
	if err := json.Unmarshal(raw, &v); err != nil || len(v) == 0 {
		return nil, fmt.Errorf("embedding is neither a list of numbers nor base64")
	}
	return v, nil
}

// errorMessage reads the message of an error body in the shapes
// compatible servers use, else returns a shortened body or the status.
func errorMessage(body []byte, status string) string {
	var e struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  any             `json:"detail"`
	}
	if json.Unmarshal(body, &e) == nil {
		var inner struct {
			Message string `json:"message"`
		}
		var s string
		switch {
		case json.Unmarshal(e.Error, &inner) == nil && inner.Message != "":
			return inner.Message
		case json.Unmarshal(e.Error, &s) == nil && s != "":
			return s
		case e.Message != "":
			return e.Message
		case e.Detail != nil:
			return fmt.Sprint(e.Detail)
		}
	}
	if t := strings.TrimSpace(string(body)); t != "" {
		return truncate(t, 300)
	}
	return status
}
