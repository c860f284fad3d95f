package dashboard_test

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
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
