package observe

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/stepwise-run/stepwise"
)

// HTTPExchange is the payload of an "http" step event: one request and its
// response as they went over the wire, credentials redacted.
type HTTPExchange struct {
	Method          string      `json:"method"`
	URL             string      `json:"url"`
	RequestHeaders  http.Header `json:"request_headers,omitempty"`
	RequestBody     *Body       `json:"request_body,omitempty"`
	Status          int         `json:"status,omitempty"`
	ResponseHeaders http.Header `json:"response_headers,omitempty"`
	ResponseBody    *Body       `json:"response_body,omitempty"`
}

// Body is a captured HTTP body: JSON when it is a whole JSON document, Text
// when it is UTF-8, else Base64.
type Body struct {
	JSON      json.RawMessage `json:"json,omitempty"`
	Text      string          `json:"text,omitempty"`
	Base64    string          `json:"base64,omitempty"`
	Size      int64           `json:"size"`
	Truncated bool            `json:"truncated,omitempty"`
}

// TransportConfig configures Transport.
type TransportConfig struct {
	// Base sends the requests. Default http.DefaultTransport.
	Base http.RoundTripper
	// MaxBody bounds the bytes of each body kept; the rest is counted.
	// Default 1 MiB.
	MaxBody int
}

// Transport returns an http.RoundTripper that records every exchange made
// in the context of a step (see stepwise.StepRefFromContext) as an "http"
// event of that step: the exact provider request and response of a model
// call, or the API calls of a tool. Headers such as Authorization and
// X-Api-Key are redacted. Exchanges outside a step pass through untouched.
// The event is recorded when the response body is read to its end or
// closed. Use it as the HTTPClient transport of a provider:
//
//	client := &http.Client{Transport: observe.Transport(observe.TransportConfig{})}
//	model, err := openai.New(openai.Config{Model: "gpt-4o-mini", HTTPClient: client})
func Transport(cfg TransportConfig) http.RoundTripper {
	if cfg.Base == nil {
		cfg.Base = http.DefaultTransport
	}
	if cfg.MaxBody == 0 {
		cfg.MaxBody = 1 << 20
	}
	return &transport{cfg: cfg}
}

type transport struct{ cfg TransportConfig }

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if _, ok := stepwise.StepRefFromContext(ctx); !ok {
		return t.cfg.Base.RoundTrip(req)
	}
	start := time.Now()
	x := &HTTPExchange{Method: req.Method, URL: RedactURL(req.URL.String()), RequestHeaders: RedactHeaders(req.Header)}
	var reqBody *capture
	if req.Body != nil && req.Body != http.NoBody {
		reqBody = &capture{rc: req.Body, max: t.cfg.MaxBody}
		req = req.Clone(ctx)
		req.Body = reqBody
	}
	resp, err := t.cfg.Base.RoundTrip(req)
	ev := &stepwise.StepEvent{Type: stepwise.StepEventHTTP, Name: req.Method + " " + req.URL.Host + req.URL.Path, Time: start.UTC()}
	emit := func(respBody *capture) {
		x.RequestBody = reqBody.body()
		x.ResponseBody = respBody.body()
		ev.Duration, ev.Payload = time.Since(start), x
		stepwise.RecordStepEvent(ctx, ev)
	}
	if err != nil {
		ev.Error = RedactText(err.Error())
		emit(nil)
		return nil, err
	}
	x.Status, x.ResponseHeaders = resp.StatusCode, RedactHeaders(resp.Header)
	if resp.Body == nil || resp.Body == http.NoBody {
		emit(nil)
		return resp, nil
	}
	body := &capture{rc: resp.Body, max: t.cfg.MaxBody}
	body.done = func() { emit(body) }
	resp.Body = body
	return resp, nil
}

// capture keeps the first max bytes read through it and counts the rest;
// done runs once, at EOF or Close.
type capture struct {
	rc   io.ReadCloser
	max  int
	mu   sync.Mutex
	buf  bytes.Buffer
	n    int64
	once sync.Once
	done func()
}

func (c *capture) Read(p []byte) (int, error) {
	n, err := c.rc.Read(p)
	c.mu.Lock()
	c.n += int64(n)
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(n, room)])
	}
	c.mu.Unlock()
	if err == io.EOF {
		c.finish()
	}
	return n, err
}

func (c *capture) Close() error {
	err := c.rc.Close()
	c.finish()
	return err
}

func (c *capture) finish() {
	if c.done != nil {
		c.once.Do(c.done)
	}
}

// body returns what was captured, nil for no capture.
func (c *capture) body() *Body {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	data := c.buf.Bytes()
	b := &Body{Size: c.n, Truncated: c.n > int64(len(data))}
	if b.Truncated { // drop a character cut at the end
		for i := 0; i < utf8.UTFMax-1 && len(data) > 0 && !utf8.Valid(data); i++ {
			data = data[:len(data)-1]
		}
	}
	switch {
	case !b.Truncated && json.Valid(data):
		b.JSON = append(json.RawMessage(nil), data...)
	case utf8.Valid(data):
		b.Text = string(data)
	default:
		b.Base64 = base64.StdEncoding.EncodeToString(c.buf.Bytes())
	}
	return b
}
