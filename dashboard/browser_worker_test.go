package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/internal/workertest"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/wire"
	"github.com/stepwise-run/stepwise/worker"
)

// TestBrowserWorkerStep: a step served by a worker process
// (docs/workers.md) names its worker in the step detail, from its
// metadata.worker; a step the server ran names none.
func TestBrowserWorkerStep(t *testing.T) {
	e := newEnv(t, []*stepwise.Agent{chatAgent()}, nil)
	ctx := context.Background()
	sess, err := e.eng.CreateSession(ctx, "refunds", "Worker steps")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.eng.Ingest(ctx, stepwise.IngestParams{SessionID: sess.ID, Steps: []*stepwise.Step{
		{Kind: steptype.KindUser, Name: "user", Role: steptype.RoleUser, Content: "refund A-17"},
		{Kind: steptype.KindCustom, Name: "validate", Content: "valid",
			Metadata: map[string]any{"worker": "py-billing-7", "task": "0193-task"}},
		{Kind: steptype.KindTool, Name: "tools", Role: steptype.RoleTool, ToolCallID: "c1", ToolName: "refund", Content: "refunded",
			Metadata: map[string]any{"worker": "<b>ts-2</b>", "task": "0194-task"}},
	}}); err != nil {
		t.Fatal(err)
	}
	worker := func(seq string) string {
		t.Helper()
		p := newPage(t)
		p.do(chromedp.Navigate(e.url + "/#/s/" + sess.ID + "/" + seq))
		p.waitJS(`document.querySelector('#detail .seqbig')?.textContent === '#` + seq + `'`)
		return eval[string](p, `(() => { const c = document.querySelector('#detail .d-head code.worker'); return c ? c.closest('.ids').textContent.includes('served by worker') + ':' + c.textContent : ''; })()`)
	}
	if got := worker("2"); got != "true:py-billing-7" {
		t.Errorf("the custom step's detail shows the worker %q, want served by worker py-billing-7", got)
	}
	if got := worker("3"); got != "true:<b>ts-2</b>" {
		t.Errorf("the tool step's detail shows the worker %q, want the id as text", got)
	}
	if got := worker("1"); got != "" {
		t.Errorf("a step no worker served shows a worker: %q", got)
	}
}

// TestBrowserWorkers: the Workers page lists each worker the server has
// seen with what it did, links to the steps it served, and says so when
// the server serves no workers.
func TestBrowserWorkers(t *testing.T) {
	e := newEnvWith(t, envOptions{workers: func(eng *stepwise.Engine) *worker.Service {
		svc, err := worker.New(worker.Config{Engine: eng, Build: func(_ context.Context, def json.RawMessage) (*stepwise.Agent, error) {
			var d struct {
				Name string `json:"name"`
			}
			if err := json.Unmarshal(def, &d); err != nil {
				return nil, err
			}
			return &stepwise.Agent{Name: d.Name, StartStep: "check"}, nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}})
	ctx := t.Context()
	w := &workertest.Worker{URL: e.url, ID: "dash-w1"}
	if _, err := w.Register(ctx, &wire.WorkerAgent{Definition: json.RawMessage(`{"name":"checks"}`),
		Steps: []*wire.WorkerStep{{Name: "check", Next: []string{"end"}}}}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		r, err := e.eng.Wait(ctx, e.eng.Run(ctx, stepwise.StartParams{Agent: "checks", Input: "check A-1"}))
		if err == nil && r.Status != steptype.RunCompleted {
			err = fmt.Errorf("run %s", r.Status)
		}
		done <- err
	}()
	ts, err := w.Poll(ctx, []string{"checks"}, 1, 10*time.Second)
	if err != nil || len(ts) != 1 {
		t.Fatalf("poll: %v, %v", ts, err)
	}
	if _, err := w.Complete(ctx, ts[0], &wire.TaskComplete{Next: "end", Content: "checked"}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/#/workers"))
	p.waitJS(`!!document.querySelector('[data-table=workers] tr[data-worker="dash-w1"]')`)
	row := eval[[]string](p, `[...document.querySelectorAll('[data-table=workers] tr[data-worker="dash-w1"] td')].map((td) => td.textContent)`)
	if len(row) != 13 || row[0] != "dash-w1" || row[1] != "checks" || row[5] != "1" || row[6] != "1" || row[7] != "0" || row[12] == "—" {
		t.Errorf("the worker's row: %q, want dash-w1 of checks with 1 task claimed and completed, timed", row)
	}
	if href := eval[string](p, `document.querySelector('[data-table=workers] tr[data-worker="dash-w1"] a').getAttribute('href')`); href != "#/search?meta=worker%3Ddash-w1" {
		t.Errorf("the worker's link %q, want the search of its steps", href)
	}
	if cur := eval[string](p, `document.querySelector('[data-nav=workers]').getAttribute('aria-current') || ''`); cur != "page" {
		t.Errorf("the Workers nav link is not current: %q", cur)
	}

	plain := newEnv(t, nil, nil)
	q := newPage(t)
	q.do(chromedp.Navigate(plain.url + "/#/workers"))
	q.waitJS(`document.querySelector('#main .empty')?.textContent.includes('serves no workers')`)
}
