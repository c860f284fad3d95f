package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/eval"
	"github.com/stepwise-run/stepwise/otlpingest"
	"github.com/stepwise-run/stepwise/recall"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/worker"
)

// MaxNextStepTimeout bounds the timeout of a next-step long-poll.
const MaxNextStepTimeout = 120 * time.Second

// DefaultStoreTimeout is the default of Config.StoreTimeout.
const DefaultStoreTimeout = 5 * time.Second

// Config configures a Server. Only Engine is required.
type Config struct {
	// Engine serves the API. Required. New starts its background executor
	// (runs created over HTTP are executed there); Shutdown stops it.
	Engine *stepwise.Engine
	// Tokens are the accepted bearer tokens. When set, every /v1 request
	// must carry "Authorization: Bearer <token>" with one of them. When
	// empty, requests are not authenticated: ListenAndServe allows that on
	// loopback addresses only (see RequireTokens).
	Tokens []string
	// Logger receives internal errors (their cause never reaches clients).
	// Default slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes limits request bodies; larger ones get 413. Default 1 MiB.
	MaxBodyBytes int64
	// MaxOTLPBytes limits OTLP export bodies (POST /v1/traces, /v1/logs)
	// after gzip decompression; larger ones get 413. Default 16 MiB.
	MaxOTLPBytes int64
	// OTLP configures the OTLP receiver (its Engine is set by New).
	OTLP otlpingest.Config
	// A2ADefaultAgent is the agent whose A2A card is served at
	// /.well-known/agent-card.json. Default: the first agent by name.
	A2ADefaultAgent string
	// Heartbeat is the interval of SSE comment lines that keep idle streams
	// open through proxies. Default 15s.
	Heartbeat time.Duration
	// NextStepTimeout is the default wait of GET /v1/runs/{id}/next when the
	// request names no timeout. Default 30s; at most MaxNextStepTimeout.
	NextStepTimeout time.Duration
	// WriteTimeout bounds each write to a stream: a client that reads
	// nothing for this long is disconnected (it can resume with its last
	// event id). Default 30s.
	WriteTimeout time.Duration
	// ShutdownTimeout bounds the graceful shutdown of ListenAndServe and
	// Serve: requests in flight, then executing runs reaching a step
	// boundary. Default 30s.
	ShutdownTimeout time.Duration
	// Judges, when set, are the LLM judges of POST /v1/runs/{id}/judge and
	// /v1/sessions/{id}/judge.
	Judges *eval.Judges
	// SearchEmbedder embeds the queries of GET /v1/search: the embedder the
	// steps were embedded with. Default recall.DefaultEmbedder().
	SearchEmbedder recall.Embedder
	// StoreTimeout bounds every API request but the streams, long-polls,
	// judges, search, attachments and OTLP ingestion: a request the store has not
	// answered within it fails with 503 storage_unavailable and
	// Retry-After, instead of hanging on a paused or unreachable database.
	// Default DefaultStoreTimeout; negative: no bound.
	StoreTimeout time.Duration
	// ViewCacheBytes bounds the memory (an estimate) of the steps the agent
	// overview and graph keep between calls, so that a call reads only the
	// steps appended since the previous one. Default DefaultViewCacheBytes;
	// negative: none kept (every call reads every step it covers).
	ViewCacheBytes int64
	// Workers, when set, serves the worker protocol (/v1/workers/...,
	// docs/workers.md); without it those endpoints answer 404.
	Workers *worker.Service
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 1 << 20
	}
	if c.MaxOTLPBytes == 0 {
		c.MaxOTLPBytes = otlpingest.DefaultMaxBodyBytes
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = 15 * time.Second
	}
	if c.NextStepTimeout == 0 {
		c.NextStepTimeout = 30 * time.Second
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = 30 * time.Second
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 30 * time.Second
	}
	if c.ViewCacheBytes == 0 {
		c.ViewCacheBytes = DefaultViewCacheBytes
	}
	if c.StoreTimeout == 0 {
		c.StoreTimeout = DefaultStoreTimeout
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.Engine == nil {
		errs = append(errs, errors.New("an engine is required (Engine)"))
	}
	if c.MaxBodyBytes < 0 || c.MaxOTLPBytes < 0 || c.Heartbeat < 0 || c.NextStepTimeout < 0 || c.WriteTimeout < 0 || c.ShutdownTimeout < 0 {
		errs = append(errs, errors.New("sizes and durations must not be negative"))
	}
	if c.NextStepTimeout > MaxNextStepTimeout {
		errs = append(errs, fmt.Errorf("next-step timeout %s is above the maximum %s", c.NextStepTimeout, MaxNextStepTimeout))
	}
	if err := ValidTokens(c.Tokens); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stepwise server: config: %w", err)
	}
	return nil
}

// Server is the HTTP API of an engine. It is an http.Handler.
type Server struct {
	cfg     Config
	eng     *stepwise.Engine
	log     *slog.Logger
	mux     *http.ServeMux
	handler http.Handler
	routes  []route
	tokens  [][32]byte // sha256 of each token, compared in constant time
	otlp    *otlpingest.Ingester
	views   *viewCache // steps of the agent views' sessions; nil: none kept
	started time.Time  // when New returned the server

	base       context.Context // cancelled by Close: ends streams and long-polls
	cancelBase context.CancelFunc
	closeOnce  sync.Once
}

// route is one registered endpoint.
type route struct {
	method, pattern string
}

// New returns the server of cfg.Engine and starts the engine's background
// executor.
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	// Start fails only when the engine is closed or already started; the
	// latter is fine (the caller may run its own executor).
	if err := cfg.Engine.Start(context.Background()); errors.Is(err, stepwise.ErrEngineClosed) {
		return nil, fmt.Errorf("stepwise server: %w", err)
	}
	s := &Server{cfg: cfg, eng: cfg.Engine, log: cfg.Logger, mux: http.NewServeMux(), views: newViewCache(cfg.ViewCacheBytes)}
	for _, t := range cfg.Tokens {
		s.tokens = append(s.tokens, sha256.Sum256([]byte(t)))
	}
	s.base, s.cancelBase = context.WithCancel(context.Background())
	s.started = time.Now()
	oc := cfg.OTLP
	oc.Engine = cfg.Engine
	if oc.Logger == nil {
		oc.Logger = cfg.Logger
	}
	var err error
	if s.otlp, err = otlpingest.New(oc); err != nil {
		return nil, fmt.Errorf("stepwise server: %w", err)
	}
	s.register()
	if err := s.registerMCP(); err != nil {
		return nil, err
	}
	s.mux.HandleFunc("/", s.notFound)
	s.handler = s.recoverPanics(s.authenticate(s.validText(s.mux)))
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Close ends every open stream and long-poll (clients may reconnect
// elsewhere with their last event id). It does not stop the engine.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.cancelBase()
		s.otlp.Close()
	})
}

// Shutdown closes the server (see Close) and stops the engine: executing
// runs stop at a step boundary and go back to the queue, to be resumed by
// the next start. It returns once no run is leased by this engine any more,
// or when ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.Close()
	if err := s.eng.Stop(ctx); err != nil {
		// Stop gave up (ctx ended, or the store refused the hand-back):
		// name the runs left leased, with a short bound of their own, so
		// that an operator can find them. The next start (or another
		// instance, once the lease lapses) takes them over.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), heldListTimeout)
		defer cancel()
		if held, lerr := s.heldRuns(lctx); lerr == nil && len(held) > 0 {
			return fmt.Errorf("stepwise server: stop engine: runs still leased (%s): %w", strings.Join(held, ", "), err)
		}
		return fmt.Errorf("stepwise server: stop engine: %w", err)
	}
	// A run handed back to the queue while the executor was stopping can be
	// claimed once more and handed back again just after Stop returns: wait
	// for that, so that a store closed after Shutdown holds no run of ours
	// in the running state.
	for {
		held, err := s.heldRuns(ctx)
		if err != nil {
			return fmt.Errorf("stepwise server: stop engine: %w", err)
		}
		if len(held) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stepwise server: stop engine: runs still leased (%s): %w", strings.Join(held, ", "), ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// heldListTimeout bounds the listing of the runs a shutdown that gave up
// leaves leased.
const heldListTimeout = 2 * time.Second

// heldRuns returns the ids of the running runs this server's engine
// leases.
func (s *Server) heldRuns(ctx context.Context) ([]string, error) {
	runs, err := s.eng.Store().RunList(ctx, &store.RunListParams{Statuses: []steptype.RunStatus{steptype.RunRunning}})
	if err != nil {
		return nil, err
	}
	var held []string
	for _, r := range runs {
		if r.LeaseOwner == s.eng.Owner() {
			held = append(held, r.ID)
		}
	}
	return held, nil
}

// handlerFunc is an endpoint: it returns an error instead of writing one.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// handle registers an endpoint; errors become problem responses. Unless
// the endpoint streams or waits by design, its request context ends after
// Config.StoreTimeout.
func (s *Server) handle(method, pattern string, h handlerFunc) {
	s.routes = append(s.routes, route{method: method, pattern: pattern})
	bound := s.cfg.StoreTimeout
	if bound < 0 || unbounded(pattern) {
		bound = 0
	}
	s.mux.HandleFunc(method+" "+pattern, func(w http.ResponseWriter, r *http.Request) {
		if bound > 0 {
			ctx, cancel := context.WithTimeoutCause(r.Context(), bound, errStoreDeadline)
			defer cancel()
			r = r.WithContext(ctx)
		}
		if err := h(w, r); err != nil {
			s.fail(w, r, storeDeadlineErr(r.Context(), err))
		}
	})
}

// unbounded reports whether the endpoint of pattern runs longer than a
// store call by design: event streams, the next-step long-poll, AG-UI runs,
// LLM judges, search (which may embed the query remotely), attachments and
// OTLP and LangSmith ingestion (large bodies).
func unbounded(pattern string) bool {
	return strings.HasSuffix(pattern, "/events") || strings.HasSuffix(pattern, "/next") || strings.HasPrefix(pattern, "/v1/agui/") ||
		strings.HasSuffix(pattern, "/judge") || strings.Contains(pattern, "attachments") ||
		pattern == "/v1/search" || pattern == "/v1/workers/poll" || pattern == "/v1/traces" || pattern == "/v1/logs" ||
		strings.HasPrefix(pattern, langSmithPrefix+"/runs") || pattern == mcpPath ||
		strings.HasPrefix(pattern, a2aPrefix) || langGraphUnbounded(pattern)
}

// requestContext is the request's context, also cancelled when the server
// closes.
func (s *Server) requestContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(s.base, cancel)
	return ctx, func() { stop(); cancel() }
}

// notFound answers requests no route matches: 405 with Allow when the path
// exists under another method, else 404.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete, http.MethodPut, http.MethodPatch} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "/" && pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeProblem(w, newProblem(http.StatusMethodNotAllowed, CodeMethodNotAllowed, fmt.Sprintf("%s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, strings.Join(allow, ", "))))
		return
	}
	writeProblem(w, newProblem(http.StatusNotFound, CodeRouteNotFound, fmt.Sprintf("no endpoint %s %s; see /v1/openapi.json", r.Method, r.URL.Path)))
}

// authenticate checks the bearer token of every request when tokens are
// configured. The 401 says nothing about why a token was refused.
func (s *Server) authenticate(next http.Handler) http.Handler {
	if len(s.tokens) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Get("Authorization")
		if k := langSmithKey(r); k != "" && h == "" {
			h = k
		}
		if k := langGraphKey(r); k != "" && h == "" {
			h = k
		}
		if !s.authorized(h) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="stepwise"`)
			if strings.HasPrefix(r.URL.Path, langGraphPrefix+"/") {
				writeJSON(w, http.StatusUnauthorized, obj{"detail": "a valid token is required (x-api-key or Authorization: Bearer)"})
				return
			}
			writeProblem(w, newProblem(http.StatusUnauthorized, CodeUnauthorized, "a valid bearer token is required"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) authorized(header string) bool {
	scheme, tok, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	match := 0
	for _, want := range s.tokens {
		match |= subtle.ConstantTimeCompare(got[:], want[:])
	}
	return match == 1
}

// recoverPanics turns a handler panic into a logged 500.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("stepwise server: handler panicked", "method", r.Method, "path", r.URL.Path, "panic", v)
				writeProblem(w, newProblem(http.StatusInternalServerError, CodeInternal, "internal error; the cause is in the server log"))
			}
		}()
		next.ServeHTTP(w, r)
	})
}
