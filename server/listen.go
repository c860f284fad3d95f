package server

import (
	"context"
	"errors"
	"fmt"
	"github.com/stepwise-run/stepwise/dashboard"
	"net"
	"net/http"
	"strings"
	"time"
)

// ErrTokensRequired is returned when a server would listen on a
// non-loopback address without bearer tokens.
var ErrTokensRequired = errors.New("stepwise: bearer tokens are required to listen on a non-loopback address")

// RequireTokens checks the listening rule: an address that is not loopback
// (127.0.0.0/8, ::1, "localhost") needs at least one bearer token. An empty
// host (":7700") listens on every interface and so needs tokens too.
func RequireTokens(addr string, tokens []string) error {
	if len(tokens) > 0 {
		return nil
	}
	if !IsLoopback(addr) {
		return fmt.Errorf("%w: %q listens beyond this machine; pass tokens (e.g. --token or STEPWISE_TOKEN) or bind to 127.0.0.1", ErrTokensRequired, addr)
	}
	return nil
}

// ValidTokens fails when a bearer token is empty or contains whitespace
// (a token that no Authorization header can carry).
func ValidTokens(tokens []string) error {
	var errs []error
	for i, t := range tokens {
		if strings.TrimSpace(t) == "" || strings.ContainsAny(t, " \t\r\n") {
			errs = append(errs, fmt.Errorf("token %d is empty or contains whitespace", i+1))
		}
	}
	return errors.Join(errs...)
}

// IsLoopback reports whether addr ("host:port" or a bare host) names a
// loopback interface only.
func IsLoopback(addr string) bool {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	if i := strings.IndexByte(host, '%'); i >= 0 { // zone
		host = host[:i]
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ListenAndServe listens on addr and serves cfg until ctx is done; see Serve.
func ListenAndServe(ctx context.Context, addr string, cfg Config) error {
	if err := RequireTokens(addr, cfg.Tokens); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("stepwise server: listen: %w", err)
	}
	return Serve(ctx, ln, cfg)
}

// Serve serves cfg on ln until ctx is done, then shuts down gracefully: it
// stops accepting connections, ends the open streams and long-polls
// (clients resume elsewhere or later with their last event id), waits for
// other requests in flight, and stops the engine, whose executing runs stop
// at a step boundary and return to the queue, to be resumed at the next
// start. It refuses a non-loopback listener without tokens. It returns nil
// after a shutdown caused by ctx.
func Serve(ctx context.Context, ln net.Listener, cfg Config) error {
	if err := RequireTokens(ln.Addr().String(), cfg.Tokens); err != nil {
		ln.Close()
		return err
	}
	s, err := New(cfg)
	if err != nil {
		ln.Close()
		return err
	}
	hs := &http.Server{
		Handler:           s.WithDashboard(dashboard.Config{}),
		ConnContext:       ConnContext,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          nil,
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		s.Close()
		stopCtx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
		defer cancel()
		_ = s.Shutdown(stopCtx)
		return fmt.Errorf("stepwise server: %w", err)
	case <-ctx.Done():
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	s.Close() // end streams and long-polls so that Shutdown does not wait for them
	herr := hs.Shutdown(stopCtx)
	serr := s.Shutdown(stopCtx)
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("stepwise server: %w", err)
	}
	if err := errors.Join(herr, serr); err != nil {
		return fmt.Errorf("stepwise server: shutdown: %w", err)
	}
	return nil
}
