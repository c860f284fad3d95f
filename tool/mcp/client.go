// Package mcp turns the tools of Model Context Protocol servers into Stepwise
// tools. It speaks to a server started as a subprocess (stdio), over
// streamable HTTP, or over any transport of the official Go SDK
// (github.com/modelcontextprotocol/go-sdk):
//
//	c, err := mcp.Connect(ctx, mcp.ServerConfig{Name: "fs", Command: "mcp-server-filesystem", Args: []string{"/data"}, ToolPrefix: "fs_"})
//	if err != nil { ... }
//	defer c.Close()
//	tools, err := c.Tools(ctx) // []tool.Tool, ready for a tool.Set
//
// Arguments are checked against the server's input schema before a call.
// A tool that reports an error (isError) gives a result with IsError set; a
// transport failure is a transient Go error, after which the client
// reconnects (restarting a stdio server) on the next call.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// ErrClosed is returned by a Client, and its tools, after Close.
var ErrClosed = errors.New("stepwise: mcp client closed")

// ServerConfig says how to reach one MCP server. Set exactly one of
// Command (stdio), URL (streamable HTTP) or Transport.
type ServerConfig struct {
	// Name names the server in errors. Default: the base name of Command,
	// or the host of URL, or "mcp".
	Name string

	// Command starts a server that speaks MCP on stdin/stdout.
	Command string
	// Args are the command's arguments.
	Args []string
	// Env holds extra "KEY=value" variables for the command. The command
	// does not inherit the whole environment (which may hold secrets such
	// as API keys): only HOME, PATH, USER, LOGNAME, SHELL, TERM, TMPDIR,
	// LANG and the platform's essentials are passed, then Env, unless
	// InheritEnv is set.
	Env []string
	// InheritEnv passes the whole environment of this process, then Env.
	InheritEnv bool
	// Dir is the command's working directory. Default: this process's.
	Dir string
	// Stderr receives the command's standard error. Default: discarded.
	Stderr io.Writer

	// URL is the endpoint of a server speaking streamable HTTP.
	URL string
	// Headers are sent with every HTTP request (e.g. Authorization).
	Headers map[string]string
	// HTTPClient sends the HTTP requests. Default http.DefaultClient.
	HTTPClient *http.Client

	// Transport connects to the server by other means, e.g. in-process
	// with sdk.NewInMemoryTransports. A transport that cannot connect twice
	// cannot be reconnected after a failure.
	Transport sdk.Transport

	// ToolPrefix starts the name of every tool, e.g. "github_", to keep
	// tools of different servers apart.
	ToolPrefix string

	// Elicitation declares the elicitation capability (form mode): a
	// server's elicitation/create during a tool call ends the call with
	// tool.InputNeeded (the engine records a waiting input request with the
	// message and requested schema, and parks the run); the call is then
	// made again, with the same idempotency key, and the server's requests
	// are answered in order with the person's answers. Calls of the server
	// run one at a time, so that each request belongs to one call.
	Elicitation bool
}

func (c *ServerConfig) withDefaults() {
	if c.Name != "" {
		return
	}
	c.Name = "mcp"
	switch {
	case c.Command != "":
		c.Name = filepath.Base(c.Command)
	case c.URL != "":
		if u, err := url.Parse(c.URL); err == nil && u.Host != "" {
			c.Name = u.Host
		}
	}
}

func (c *ServerConfig) validate() error {
	n := 0
	for _, set := range []bool{c.Command != "", c.URL != "", c.Transport != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return errors.New("mcp: set exactly one of Command, URL or Transport")
	}
	if c.URL != "" {
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("mcp: invalid URL %q", c.URL)
		}
	}
	return nil
}

// Client is a connection to one MCP server. It is safe for concurrent use.
type Client struct {
	cfg    ServerConfig
	client *sdk.Client

	mu      sync.Mutex
	session *sdk.ClientSession // nil after a transport failure, until reconnected
	closed  bool

	el elicitState // with cfg.Elicitation
}

// Connect starts or dials the server and performs the MCP handshake. The
// server (a stdio subprocess, say) lives until Close, not until ctx ends.
func Connect(ctx context.Context, cfg ServerConfig) (*Client, error) {
	cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg}
	// An empty capability set: Stepwise serves no roots or sampling to
	// servers, and elicitation only when asked to.
	opts := &sdk.ClientOptions{Capabilities: &sdk.ClientCapabilities{}}
	if cfg.Elicitation {
		opts.ElicitationHandler = c.elicit
		opts.Capabilities.Elicitation = &sdk.ElicitationCapabilities{Form: &sdk.FormElicitationCapabilities{}}
	}
	c.client = sdk.NewClient(&sdk.Implementation{Name: "stepwise", Version: "1"}, opts)
	s, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	c.session = s
	return c, nil
}

// Name returns the server's configured name.
func (c *Client) Name() string { return c.cfg.Name }

func (c *Client) connect(ctx context.Context) (*sdk.ClientSession, error) {
	s, err := c.client.Connect(ctx, c.transport(), nil)
	if err != nil {
		return nil, fmt.Errorf("mcp %s: connect: %w", c.cfg.Name, err)
	}
	return s, nil
}

// transport returns a fresh transport for one connection attempt.
func (c *Client) transport() sdk.Transport {
	switch {
	case c.cfg.Transport != nil:
		return c.cfg.Transport
	case c.cfg.URL != "":
		hc := c.cfg.HTTPClient
		if hc == nil {
			hc = http.DefaultClient
		}
		if len(c.cfg.Headers) > 0 {
			copied := *hc
			base := hc.Transport
			if base == nil {
				base = http.DefaultTransport
			}
			copied.Transport = &headerTransport{base: base, headers: c.cfg.Headers}
			hc = &copied
		}
		return &sdk.StreamableClientTransport{Endpoint: c.cfg.URL, HTTPClient: hc}
	}
	// Not CommandContext: the server outlives the ctx of Connect.
	cmd := exec.Command(c.cfg.Command, c.cfg.Args...)
	cmd.Env = commandEnv(c.cfg.Env, c.cfg.InheritEnv)
	cmd.Dir = c.cfg.Dir
	cmd.Stderr = c.cfg.Stderr
	return &sdk.CommandTransport{Command: cmd}
}

// session returns the live session, reconnecting after a transport failure.
func (c *Client) getSession(ctx context.Context) (*sdk.ClientSession, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if c.session == nil {
		s, err := c.connect(ctx)
		if err != nil {
			return nil, err
		}
		c.session = s
	}
	return c.session, nil
}

// broken drops a session after a transport failure, so the next call
// reconnects.
func (c *Client) broken(s *sdk.ClientSession) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session == s {
		c.session = nil
		go s.Close() // may wait for a stdio server to exit
	}
}

// Close ends the session and stops a stdio server. Tools of a closed
// client fail with ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	s := c.session
	c.session, c.closed = nil, true
	c.mu.Unlock()
	if s == nil {
		return nil
	}
	if err := s.Close(); err != nil && !errors.Is(err, sdk.ErrConnectionClosed) {
		return fmt.Errorf("mcp %s: close: %w", c.cfg.Name, err)
	}
	return nil
}

// headerTransport adds fixed headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

// RoundTrip sends a copy of req with the headers set.
func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range t.headers {
		req.Header.Set(k, v)
	}
	return t.base.RoundTrip(req)
}

// inheritedEnv are the variables a stdio server gets from this process.
var inheritedEnv = []string{"HOME", "PATH", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "LANG",
	"SYSTEMROOT", "SYSTEMDRIVE", "WINDIR", "APPDATA", "LOCALAPPDATA", "USERPROFILE", "TEMP", "TMP", "PROGRAMFILES", "COMSPEC", "PATHEXT"}

func commandEnv(extra []string, inherit bool) []string {
	var env []string
	if inherit {
		env = os.Environ()
	} else {
		for _, k := range inheritedEnv {
			if v, ok := os.LookupEnv(k); ok {
				env = append(env, k+"="+v)
			}
		}
	}
	return append(env, extra...)
}
