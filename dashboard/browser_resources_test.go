package dashboard_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
)

// TestBrowserAgentResources: the agent page shows what its steps cost the
// machine, per step kind.
func TestBrowserAgentResources(t *testing.T) {
	e := newEnv(t, []*stepwise.Agent{chatAgent()}, nil)
	runUntil(t, e, "chat", "What is 6*7?", steptype.RunCompleted)
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/#/a/chat"))
	p.waitJS(`document.querySelector('[data-card="resources"] tbody tr')`)
	got := eval[string](p, `document.querySelector('[data-card="resources"]').textContent`)
	for _, want := range []string{"Resource use per step kind", "CPU / step", "Allocated", "llm"} {
		if !strings.Contains(got, want) {
			t.Errorf("resources card %.200q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "NaN") || strings.Contains(got, "undefined") {
		t.Errorf("resources card %.200q", got)
	}
}

// TestBrowserStepResources: a step's detail shows its CPU time and
// allocation.
func TestBrowserStepResources(t *testing.T) {
	e := newEnv(t, []*stepwise.Agent{chatAgent()}, nil)
	run := runUntil(t, e, "chat", "What is 6*7?", steptype.RunCompleted)
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/#/s/" + run.SessionID + "/2"))
	p.waitJS(`/CPU time/.test(document.querySelector('#detail')?.textContent || '')`)
	got := eval[string](p, `document.querySelector('#detail').textContent`)
	for _, want := range []string{"CPU time", "allocated", "overlapping steps"} {
		if !strings.Contains(got, want) {
			t.Errorf("step detail lacks %q", want)
		}
	}
}
