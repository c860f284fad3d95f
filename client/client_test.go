package client_test

import (
	"context"
	"errors"
	"github.com/stepwise-run/stepwise/stepwisetest"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/client"
	"github.com/stepwise-run/stepwise/server"
	"github.com/stepwise-run/stepwise/store"
)

func newServer(t *testing.T, agents ...*stepwise.Agent) (*httptest.Server, *stepwise.Engine) {
	t.Helper()
	eng := stepwisetest.NewEngine(t, stepwise.Config{Agents: agents})
	srv, err := server.New(server.Config{Engine: eng})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv)
	ts.Config.ConnContext = server.ConnContext // as server.Serve
	ts.Start()
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Close)
	return ts, eng
}

func TestNewValidatesURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "localhost:7700", "ftp://x", "http://", "::"} {
		if _, err := client.New(u); err == nil {
			t.Errorf("New(%q) accepted", u)
		}
	}
	if _, err := client.New("https://example.com/prefix/"); err != nil {
		t.Fatal(err)
	}
}

func TestErrorIs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err  *client.Error
		is   []error
		isnt []error
	}{
		{&client.Error{Status: 404, Code: "not_found"}, []error{stepwise.ErrNotFound}, []error{stepwise.ErrConflict, stepwise.ErrUnknownAgent}},
		{&client.Error{Status: 404, Code: "unknown_agent"}, []error{stepwise.ErrUnknownAgent, stepwise.ErrNotFound}, []error{store.ErrInvalid}},
		{&client.Error{Status: 409, Code: "already_answered"}, []error{stepwise.ErrAlreadyAnswered, stepwise.ErrConflict}, []error{stepwise.ErrRunFinished}},
		{&client.Error{Status: 409, Code: "run_finished"}, []error{stepwise.ErrRunFinished, stepwise.ErrConflict}, []error{stepwise.ErrAlreadyAnswered}},
		{&client.Error{Status: 409, Code: "conflict"}, []error{stepwise.ErrConflict}, []error{stepwise.ErrNotFound}},
		{&client.Error{Status: 422, Code: "invalid_answer"}, []error{stepwise.ErrInvalidAnswer, store.ErrInvalid}, []error{stepwise.ErrConflict}},
		{&client.Error{Status: 422, Code: "invalid_argument"}, []error{store.ErrInvalid}, []error{stepwise.ErrInvalidAnswer}},
		{&client.Error{Status: 503, Code: "unavailable"}, []error{stepwise.ErrEngineClosed}, []error{stepwise.ErrNotFound}},
		{&client.Error{Status: 503, Code: "storage_full"}, []error{store.ErrStorageFull}, []error{store.ErrUnavailable, stepwise.ErrEngineClosed}},
		{&client.Error{Status: 503, Code: "storage_unavailable"}, []error{store.ErrUnavailable}, []error{store.ErrStorageFull}},
		{&client.Error{Status: 401, Code: "unauthorized"}, nil, []error{stepwise.ErrNotFound, stepwise.ErrConflict}},
		{&client.Error{Status: 404, Code: "http_404"}, []error{stepwise.ErrNotFound}, nil},
	}
	for _, c := range cases {
		var err error = c.err
		for _, target := range c.is {
			if !errors.Is(err, target) {
				t.Errorf("%v is not %v", err, target)
			}
		}
		for _, target := range c.isnt {
			if errors.Is(err, target) {
				t.Errorf("%v is %v", err, target)
			}
		}
	}
}

func TestRefusedStreamIsNotRetried(t *testing.T) {
	t.Parallel()
	ts, _ := newServer(t)
	var hits atomic.Int64
	counting := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		hits.Add(1)
		return http.DefaultTransport.RoundTrip(r)
	})}
	c, _ := client.New(ts.URL, client.WithHTTPClient(counting))
	var got error
	for _, err := range c.Subscribe(context.Background(), stepwise.SubscribeParams{SessionID: "nope"}) {
		got = err
	}
	var ce *client.Error
	if !errors.Is(got, stepwise.ErrNotFound) || !errors.As(got, &ce) || ce.Code != "not_found" || hits.Load() != 1 {
		t.Fatalf("stream of unknown session: %v after %d requests", got, hits.Load())
	}
	for _, err := range c.Subscribe(context.Background(), stepwise.SubscribeParams{}) {
		if err == nil || !strings.Contains(err.Error(), "required") {
			t.Fatalf("empty params: %v", err)
		}
	}
}

func TestStreamGivesUpWhenServerIsGone(t *testing.T) {
	t.Parallel()
	ts, eng := newServer(t)
	sess, err := eng.CreateSession(context.Background(), "x", "")
	if err != nil {
		t.Fatal(err)
	}
	// A proxy in front of the server reports when the stream is connected,
	// so the server goes away in the middle of it.
	connected := make(chan struct{})
	var once sync.Once
	proxy := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/events") {
			once.Do(func() { close(connected) })
		}
		ts.Config.Handler.ServeHTTP(w, r)
	}))
	proxy.Config.ConnContext = server.ConnContext
	proxy.Start()
	t.Cleanup(proxy.Close)
	c, _ := client.New(proxy.URL, client.WithReconnect(time.Millisecond, 2*time.Millisecond, 3))
	seen := 0
	var last error
	proxy.Config.SetKeepAlivesEnabled(false)
	go func() {
		<-connected
		proxy.CloseClientConnections()
		proxy.Listener.Close()
		proxy.CloseClientConnections()
	}()
	for _, err := range c.Subscribe(context.Background(), stepwise.SubscribeParams{SessionID: sess.ID}) {
		if err != nil {
			last = err
			break
		}
		seen++
	}
	if last == nil || !strings.Contains(last.Error(), "giving up after 3 attempts") {
		t.Fatalf("after %d events: %v", seen, last)
	}
}

func TestNextStepHonoursContext(t *testing.T) {
	t.Parallel()
	waiting := &stepwise.Agent{Name: "waiter", StartStep: "wait", Steps: map[string]stepwise.Handler{
		"wait": stepwise.StepFunc(func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
			return &stepwise.Next{Step: stepwise.StepEnd, Input: &stepwise.InputRequest{Prompt: "ok?"}}, nil
		}),
	}}
	ts, _ := newServer(t, waiting)
	c, _ := client.New(ts.URL)
	inv, err := c.Initiate(context.Background(), "waiter", "go")
	if err != nil {
		t.Fatal(err)
	}
	// Read up to the request (reported again by the run_waiting event),
	// then nothing more comes: the wait ends with the context's deadline.
	requests := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		step, err := c.NextStep(ctx, inv)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch s := step.(type) {
		case *stepwise.HumanInputRequest:
			if s.Prompt != "ok?" {
				t.Fatalf("request %+v", s)
			}
			requests++
		case *stepwise.Continuation:
		default:
			t.Fatalf("unexpected %T", step)
		}
	}
	if requests == 0 {
		t.Fatal("no input request before the deadline")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
