package dashboard_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// TestBrowserBreakpoints steps through a run from the session page: a
// pause shows where the run is with Continue / Step / Edit state; Step
// pauses again before the next step, an edited state reaches the run;
// the composer's debug toggle starts the next turn paused.
func TestBrowserBreakpoints(t *testing.T) {
	e := newEnv(t, []*stepwise.Agent{chatAgent()}, nil)
	ctx := context.Background()
	r, err := e.eng.StartRun(ctx, stepwise.StartParams{Agent: "chat", Input: "What is 6*7?", Breakpoints: &stepwise.Breakpoints{Before: []string{"llm"}}})
	if err != nil {
		t.Fatal(err)
	}
	waitRun(t, e, r.ID, steptype.RunWaiting)
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/#/s/" + r.SessionID))
	card := `.pending .input-card`
	p.waitJS(`document.querySelector('` + card + ` .bp-where[data-step="llm"]')`)
	if got := eval[string](p, `document.querySelector('`+card+`').textContent`); !strings.Contains(got, "Paused at a breakpoint") || !strings.Contains(got, "Paused before step llm") {
		t.Fatalf("pause card %.200q", got)
	}
	p.screenshot("breakpoint")
	// Step: the model answers, the run pauses before the tools.
	p.do(chromedp.Click(chromedp.CSS(card + ` [data-action="bp-step"]`)))
	p.waitJS(`document.querySelector('` + card + ` .bp-where[data-step="tools"][data-when="before"]')`)
	if got := eval[string](p, `document.querySelector('`+card+` .bp-where').textContent`); !strings.Contains(got, "calc") || !strings.Contains(got, "stepping") {
		t.Fatalf("stepping pause %.200q", got)
	}
	// Edit the state, then continue: the tools run, the breakpoint on llm
	// pauses before the second model call, showing the edited state.
	p.do(chromedp.Click(chromedp.CSS(card + ` [data-action="bp-edit"]`)))
	p.waitJS(`document.querySelector('` + card + ` .bp-state') && !document.querySelector('` + card + ` .bp-state').closest('.field').hidden`)
	eval[bool](p, `(document.querySelector('`+card+` .bp-state').value = '{"debugged": true}', true)`)
	p.do(chromedp.Click(chromedp.CSS(card + ` [data-action="bp-edit"]`)))
	p.waitJS(`document.querySelector('` + card + ` .bp-where[data-step="llm"]') && /debugged/.test(document.querySelector('` + card + ` .bp-state').value)`)
	p.do(chromedp.Click(chromedp.CSS(card + ` [data-action="bp-continue"]`)))
	done := waitRun(t, e, r.ID, steptype.RunCompleted)
	if string(done.State) != `{"debugged":true}` || done.Output != "The answer is 42." {
		t.Fatalf("state %s output %q", done.State, done.Output)
	}
	p.waitJS(`!document.querySelector('` + card + `')`)

	// The debug toggle: the next turn starts with a breakpoint before
	// every step and pauses at once.
	p.do(chromedp.Navigate(e.url+"/#/sessions"), chromedp.Navigate(e.url+"/#/s/"+r.SessionID))
	p.waitJS(`!document.querySelector('form.composer').hidden && !document.getElementById('next-turn').disabled`)
	p.do(chromedp.Click(chromedp.CSS(`[data-action="debug-run"]`)),
		chromedp.SendKeys(chromedp.ID("next-turn"), "And 7*8?"),
		chromedp.Click(chromedp.CSS(`[data-action="send-turn"]`)))
	p.waitJS(`document.querySelector('` + card + ` .bp-where[data-step="llm"]')`)
	pend, err := e.eng.Pending(ctx, "")
	if err != nil || len(pend) != 1 || pend[0].Request.Breakpoint == nil || pend[0].Request.Breakpoint.Matched != "*" {
		t.Fatalf("pending %v %+v", err, pend)
	}
	runs, err := e.st.RunList(ctx, &store.RunListParams{SessionID: r.SessionID})
	if err != nil || len(runs) != 2 {
		t.Fatalf("runs %v %d", err, len(runs))
	}
}
