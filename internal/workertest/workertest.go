// Package workertest is a worker of the worker protocol (docs/workers.md)
// written in Go over plain HTTP, for the tests of the server and the
// binary: the protocol as a worker in any language speaks it, without an
// SDK.
package workertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/stepwise-run/stepwise/wire"
)

// Worker talks to one server as one worker id.
type Worker struct {
	URL    string // the server's base URL
	Token  string // bearer token, when the server has tokens
	ID     string // worker id
	Client *http.Client
}

// Problem is a problem answer of the server.
type Problem struct {
	Status int
	wire.Problem
}

func (p *Problem) Error() string {
	return fmt.Sprintf("%d %s: %s", p.Status, p.Code, p.Detail)
}

// Code returns the problem code of err, or "".
func Code(err error) string {
	var p *Problem
	if errors.As(err, &p) {
		return p.Code
	}
	return ""
}

// Call posts body to path and decodes a 200 answer into out (when not
// nil). It returns the status; an error answer is a *Problem.
func (w *Worker) Call(ctx context.Context, path string, body, out any) (int, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL+path, bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if w.Token != "" {
		req.Header.Set("Authorization", "Bearer "+w.Token)
	}
	hc := w.Client
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 400 {
		p := &Problem{Status: resp.StatusCode}
		if err := json.Unmarshal(data, &p.Problem); err != nil {
			return resp.StatusCode, fmt.Errorf("%d: %s", resp.StatusCode, data)
		}
		return resp.StatusCode, p
	}
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode %s: %w", path, err)
		}
	}
	return resp.StatusCode, nil
}

// Register registers agents.
func (w *Worker) Register(ctx context.Context, agents ...*wire.WorkerAgent) (*wire.WorkerRegistered, error) {
	var out wire.WorkerRegistered
	_, err := w.Call(ctx, "/v1/workers/register", &wire.WorkerRegister{WorkerID: w.ID, Agents: agents}, &out)
	return &out, err
}

// Poll claims up to max tasks of agents, waiting up to wait.
func (w *Worker) Poll(ctx context.Context, agents []string, max int, wait time.Duration) ([]*wire.Task, error) {
	var out wire.TaskBatch
	_, err := w.Call(ctx, "/v1/workers/poll", &wire.TaskPoll{WorkerID: w.ID, Agents: agents, Max: max, WaitMS: wait.Milliseconds()}, &out)
	return out.Tasks, err
}

// Heartbeat renews a task's lease.
func (w *Worker) Heartbeat(ctx context.Context, t *wire.Task) (*wire.TaskLease, error) {
	var out wire.TaskLease
	_, err := w.Call(ctx, "/v1/workers/tasks/"+t.ID+"/heartbeat", &wire.TaskToken{Token: t.Token}, &out)
	return &out, err
}

// Events reports a task's live events.
func (w *Worker) Events(ctx context.Context, t *wire.Task, evs ...*wire.TaskEvent) (*wire.TaskLease, error) {
	var out wire.TaskLease
	_, err := w.Call(ctx, "/v1/workers/tasks/"+t.ID+"/events", &wire.TaskEvents{Token: t.Token, Events: evs}, &out)
	return &out, err
}

// Complete completes a task; c.Token is set from t.
func (w *Worker) Complete(ctx context.Context, t *wire.Task, c *wire.TaskComplete) (*wire.TaskResult, error) {
	c.Token = t.Token
	var out wire.TaskResult
	_, err := w.Call(ctx, "/v1/workers/tasks/"+t.ID+"/complete", c, &out)
	return &out, err
}

// Fail fails a task; f.Token is set from t.
func (w *Worker) Fail(ctx context.Context, t *wire.Task, f *wire.TaskFail) (*wire.TaskResult, error) {
	f.Token = t.Token
	var out wire.TaskResult
	_, err := w.Call(ctx, "/v1/workers/tasks/"+t.ID+"/fail", f, &out)
	return &out, err
}

// Input parks a step task with a human-input request; in.Token is set.
func (w *Worker) Input(ctx context.Context, t *wire.Task, in *wire.TaskInputRequest) (*wire.TaskResult, error) {
	in.Token = t.Token
	var out wire.TaskResult
	_, err := w.Call(ctx, "/v1/workers/tasks/"+t.ID+"/input", in, &out)
	return &out, err
}

// Release hands every task of the worker back.
func (w *Worker) Release(ctx context.Context) (int, error) {
	var out wire.TaskReleased
	_, err := w.Call(ctx, "/v1/workers/release", &wire.TaskRelease{WorkerID: w.ID}, &out)
	return out.Released, err
}

// Finish is what a Handler decides for a task: exactly one of its fields.
type Finish struct {
	Complete *wire.TaskComplete
	Fail     *wire.TaskFail
	Input    *wire.TaskInputRequest
}

// Handler works on one task; it may report events through w meanwhile.
type Handler func(ctx context.Context, w *Worker, t *wire.Task) Finish

// Serve polls for tasks of agents and runs handle on each, with a
// heartbeat every heartbeat while it runs, until ctx ends; then it
// releases what it still holds (a graceful stop). Errors of single calls
// are reported to onErr (when set) and do not stop it.
func (w *Worker) Serve(ctx context.Context, agents []string, parallel int, heartbeat time.Duration, handle Handler, onErr func(error)) {
	if onErr == nil {
		onErr = func(error) {}
	}
	var wg sync.WaitGroup
	for range max(1, parallel) {
		wg.Go(func() {
			for ctx.Err() == nil {
				ts, err := w.Poll(ctx, agents, 1, 10*time.Second)
				if err != nil {
					if ctx.Err() == nil {
						onErr(err)
						sleep(ctx, 100*time.Millisecond)
					}
					continue
				}
				for _, t := range ts {
					w.run(ctx, t, heartbeat, handle, onErr)
				}
			}
		})
	}
	wg.Wait()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := w.Release(rctx); err != nil {
		onErr(err)
	}
}

func (w *Worker) run(ctx context.Context, t *wire.Task, heartbeat time.Duration, handle Handler, onErr func(error)) {
	hctx, stop := context.WithCancel(ctx)
	beat := make(chan struct{})
	go func() {
		defer close(beat)
		tick := time.NewTicker(heartbeat)
		defer tick.Stop()
		for {
			select {
			case <-hctx.Done():
				return
			case <-tick.C:
				if l, err := w.Heartbeat(hctx, t); err != nil && hctx.Err() == nil {
					onErr(err)
				} else if err == nil && l.Cancel {
					stop()
				}
			}
		}
	}()
	f := handle(hctx, w, t)
	stop()
	<-beat
	if ctx.Err() != nil {
		return // stopping: the task is released
	}
	var err error
	switch {
	case f.Complete != nil:
		_, err = w.Complete(ctx, t, f.Complete)
	case f.Fail != nil:
		_, err = w.Fail(ctx, t, f.Fail)
	case f.Input != nil:
		_, err = w.Input(ctx, t, f.Input)
	}
	if err != nil {
		onErr(err)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
