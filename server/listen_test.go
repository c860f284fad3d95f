package server

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/client"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

// TestGracefulShutdownAndResume serves a SQLite-backed engine, shuts the
// server down in the middle of a run, and starts it again on the same
// file: the run was handed back to the queue, resumes, and completes with a
// gap-free log in which no step was executed twice.
func TestGracefulShutdownAndResume(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "stepwise.db")
	const loops = 40
	serve := func(t *testing.T) (*client.Client, store.Store, *stepwise.Engine, context.CancelFunc, <-chan error) {
		st, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		eng, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{toolAgent("looper", loops, 2*time.Millisecond)}, PollInterval: 20 * time.Millisecond, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() {
			served <- Serve(ctx, ln, Config{Engine: eng, Logger: testLogger(t), ShutdownTimeout: 20 * time.Second})
		}()
		c, err := client.New("http://"+ln.Addr().String(), client.WithReconnect(5*time.Millisecond, 5*time.Millisecond, 3))
		if err != nil {
			t.Fatal(err)
		}
		return c, st, eng, cancel, served
	}
	ctx := context.Background()
	c, st, eng, stop, served := serve(t)
	run, inv, err := c.StartRun(ctx, "looper", "go")
	if err != nil {
		t.Fatal(err)
	}
	streamEnded := make(chan error, 1)
	go func() {
		var err error
		for _, err = range c.Subscribe(ctx, stepwise.SubscribeParams{SessionID: inv.SessionID}) {
			if err != nil {
				break
			}
		}
		streamEnded <- err
	}()
	for {
		sess, err := st.SessionGet(ctx, &store.SessionGetParams{ID: run.SessionID})
		if err != nil {
			t.Fatal(err)
		}
		if sess.LastSequence >= 10 {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	stop()
	if err := <-served; err != nil {
		t.Fatalf("Serve after shutdown: %v", err)
	}
	// The stream was ended by the shutdown; the client could not reconnect.
	if err := <-streamEnded; err == nil {
		t.Fatal("the session stream did not end")
	}
	parked, err := st.RunGet(ctx, &store.RunGetParams{ID: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	if parked.Status != steptype.RunQueued || parked.LeaseOwner != "" {
		t.Fatalf("after shutdown the run is %s (lease %q), want queued", parked.Status, parked.LeaseOwner)
	}
	if _, err := c.Run(ctx, run.ID); err == nil {
		t.Fatal("the server still answers after shutdown")
	}
	before := parked.StepCount
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// Start again: the run resumes at its cursor and completes.
	c, st, eng, stop, served = serve(t)
	defer func() {
		stop()
		<-served
		_ = eng.Close()
		_ = st.Close()
	}()
	var final *stepwise.Run
	for {
		final, err = c.Run(ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if final.Status.Terminal() {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if final.Status != steptype.RunCompleted || final.Output != "done" {
		t.Fatalf("resumed run %+v", final)
	}
	steps, err := c.Steps(ctx, client.StepQuery{SessionID: run.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(steps)) != final.StepCount || len(steps) != 2+2*loops {
		t.Fatalf("%d steps, step count %d (had %d at shutdown)", len(steps), final.StepCount, before)
	}
	calls := map[string]int{}
	for i, s := range steps {
		if s.Sequence != int64(i+1) {
			t.Fatalf("step %d has sequence %d", i, s.Sequence)
		}
		if s.Kind == steptype.KindTool {
			calls[s.ToolCallID]++
		}
	}
	for id, n := range calls {
		if n != 1 {
			t.Fatalf("tool call %s executed %d times", id, n)
		}
	}
	if len(calls) != loops {
		t.Fatalf("%d tool calls", len(calls))
	}
	if before >= final.StepCount {
		t.Fatalf("the run had finished before the shutdown (%d steps)", before)
	}
}

func TestServeRefusesPublicListenerWithoutTokens(t *testing.T) {
	t.Parallel()
	env := newEnv(t, nil)
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Skip(err)
	}
	err = Serve(context.Background(), ln, Config{Engine: env.eng})
	if !errors.Is(err, ErrTokensRequired) {
		t.Fatalf("Serve: %v", err)
	}
	// With a token it serves (and stops with its context).
	ln, err = net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, Config{Engine: env.eng, Tokens: []string{"tok"}}) }()
	c, _ := client.New("http://"+ln.Addr().String(), client.WithToken("tok"))
	for {
		if _, err := c.Agents(context.Background()); err == nil {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
