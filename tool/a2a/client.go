package a2a

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
)

// Error is a failed exchange with a remote agent. Refused connections,
// timeouts, HTTP 408, 429 and 5xx and JSON-RPC internal errors (-32603)
// are transient (the engine retries the call, honouring Retry-After);
// any other HTTP status and every other JSON-RPC error is permanent.
type Error struct {
	Agent  string // the tool name
	Method string // the JSON-RPC method, or "card"
	// Status is the HTTP status of a response that was not 200, 0 otherwise.
	Status int
	// Code is the JSON-RPC error code, 0 when the server sent none.
	Code       int
	Message    string
	RetryAfter time.Duration
	Transient  bool
	Err        error // the transport error, if any
}

// Error says which agent and method failed, with the HTTP status or
// JSON-RPC code and the message.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "a2a agent %s: %s: ", e.Agent, e.Method)
	switch {
	case e.Code != 0:
		fmt.Fprintf(&b, "JSON-RPC error %d: ", e.Code)
	case e.Status != 0:
		fmt.Fprintf(&b, "HTTP %d: ", e.Status)
	}
	b.WriteString(e.Message)
	return b.String()
}

// Unwrap returns the transport error.
func (e *Error) Unwrap() error { return e.Err }

// ErrorClass is transient or permanent (llm.Classify reads it).
func (e *Error) ErrorClass() steptype.ErrorClass {
	if e.Transient {
		return steptype.ErrorTransient
	}
	return steptype.ErrorPermanent
}

// RetryAfterHint is the server's Retry-After, 0 if none.
func (e *Error) RetryAfterHint() time.Duration { return e.RetryAfter }

// JSON-RPC error codes the client acts on.
const (
	codeInternal = -32603
)

// client speaks JSON-RPC 2.0 to one endpoint.
type client struct {
	name     string // the tool name, for errors
	endpoint string
	legacy   bool // v0.3 method names and shapes
	headers  map[string]string
	hc       *http.Client
	timeout  time.Duration // of a request that is not streamed nor blocking
	idle     time.Duration // the longest silence of a stream
	ids      atomic.Int64
}

// errStreamIdle ends a stream that sent nothing, not even a heartbeat,
// for the client's idle limit.
var errStreamIdle = errors.New("the stream was silent too long")

// method is the name of a v1.0 method in the protocol version spoken.
func (c *client) method(v1 string) string {
	if !c.legacy {
		return v1
	}
	return map[string]string{"SendMessage": "message/send", "SendStreamingMessage": "message/stream",
		"GetTask": "tasks/get", "CancelTask": "tasks/cancel"}[v1]
}

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

type rpcResponse struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
}

// post sends one request; a non-200 answer or a transport failure is an
// *Error.
func (c *client) post(ctx context.Context, method string, params any, accept string) (*http.Response, error) {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.ids.Add(1), "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, &Error{Agent: c.name, Method: method, Message: err.Error(), Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	if !c.legacy {
		req.Header.Set("A2A-Version", "1.0")
	}
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.transportError(ctx, method, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, c.statusError(method, resp)
	}
	return resp, nil
}

func (c *client) transportError(ctx context.Context, method string, err error) error {
	if ctx.Err() != nil {
		return err // the caller's cancellation or deadline, as it is
	}
	le := llm.TransportError(err)
	return &Error{Agent: c.name, Method: method, Message: err.Error(), Transient: le.Class == steptype.ErrorTransient, Err: err}
}

func (c *client) statusError(method string, resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	msg := strings.TrimSpace(string(b))
	var problem struct {
		Detail  string `json:"detail"`
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &problem) == nil && (problem.Detail != "" || problem.Message != "") {
		msg = problem.Detail + problem.Message
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	class, _ := llm.ClassifyHTTP(resp.StatusCode)
	return &Error{Agent: c.name, Method: method, Status: resp.StatusCode, Message: msg,
		RetryAfter: llm.ParseRetryAfter(resp.Header, time.Now()), Transient: class == steptype.ErrorTransient}
}

// rpcFailure is the *Error of a JSON-RPC error response.
func (c *client) rpcFailure(method string, e *rpcError) error {
	return &Error{Agent: c.name, Method: method, Code: e.Code, Message: e.Message, Transient: e.Code == codeInternal}
}

// call makes a request answered with one JSON-RPC response and returns its
// result. bounded applies the client's request timeout.
func (c *client) call(ctx context.Context, v1 string, params any, bounded bool) (*event, error) {
	method := c.method(v1)
	if bounded && c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	resp, err := c.post(ctx, method, params, "application/json")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return c.decodeResponse(ctx, method, resp.Body)
}

func (c *client) decodeResponse(ctx context.Context, method string, body io.Reader) (*event, error) {
	var r rpcResponse
	if err := json.NewDecoder(io.LimitReader(body, 64<<20)).Decode(&r); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, &Error{Agent: c.name, Method: method, Message: "the response ended early: " + err.Error(), Transient: true, Err: err}
		}
		return nil, &Error{Agent: c.name, Method: method, Message: "not a JSON-RPC response: " + err.Error()}
	}
	if r.Error != nil {
		return nil, c.rpcFailure(method, r.Error)
	}
	ev, err := parseEvent(r.Result)
	if err != nil {
		return nil, &Error{Agent: c.name, Method: method, Message: "unreadable result: " + err.Error()}
	}
	return ev, nil
}

// stream makes a streaming request and calls each with every event, until
// each returns false or the stream ends. A server may answer a streaming
// method with a single JSON response (an error, typically).
//
// A stream silent for longer than the idle limit ends with errStreamIdle.
func (c *client) stream(ctx context.Context, v1 string, params any, each func(*event) bool) error {
	method := c.method(v1)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var idle *time.Timer
	if c.idle > 0 {
		idle = time.AfterFunc(c.idle, func() { cancel(errStreamIdle) })
		defer idle.Stop()
	}
	silent := func(err error) error {
		if errors.Is(context.Cause(ctx), errStreamIdle) {
			return errStreamIdle
		}
		return err
	}
	resp, err := c.post(ctx, method, params, "text/event-stream")
	if err != nil {
		return silent(err)
	}
	defer resp.Body.Close()
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		ev, err := c.decodeResponse(ctx, method, resp.Body)
		if err != nil {
			return err
		}
		each(ev)
		return nil
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	var data []byte
	dispatch := func() (bool, error) {
		if len(data) == 0 {
			return true, nil
		}
		var r rpcResponse
		err := json.Unmarshal(data, &r)
		data = data[:0]
		if err != nil {
			return false, &Error{Agent: c.name, Method: method, Message: "unreadable stream event: " + err.Error()}
		}
		if r.Error != nil {
			return false, c.rpcFailure(method, r.Error)
		}
		ev, err := parseEvent(r.Result)
		if err != nil {
			return false, &Error{Agent: c.name, Method: method, Message: "unreadable stream event: " + err.Error()}
		}
		return each(ev), nil
	}
	for sc.Scan() {
		if idle != nil {
			idle.Reset(c.idle)
		}
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if more, err := dispatch(); err != nil || !more {
				return err
			}
		case line[0] == ':':
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			if string(field) == "data" {
				value = bytes.TrimPrefix(value, []byte(" "))
				if len(data) > 0 {
					data = append(data, '\n')
				}
				data = append(data, value...)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return silent(c.transportError(ctx, method, err))
	}
	_, err = dispatch()
	return err
}
