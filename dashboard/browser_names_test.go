package dashboard_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/internal/demo"
	"github.com/stepwise-run/stepwise/steptype"
)

// TestBrowserNamesNotIDs: inbox cards, the step header and the graph's
// breadcrumb name sessions and runs instead of printing their ids; the id
// is on hover and a button copies it.
func TestBrowserNamesNotIDs(t *testing.T) {
	e := newEnv(t, []*stepwise.Agent{askerAgent()}, nil)
	r, err := e.eng.StartRun(context.Background(), stepwise.StartParams{Agent: "asker", Input: "Print my report", Title: "Quarterly report"})
	if err != nil {
		t.Fatal(err)
	}
	run := waitRun(t, e, r.ID, steptype.RunWaiting)
	ids := []string{run.ID, run.SessionID}
	p := newPage(t)
	visible := func(where string) string {
		t.Helper()
		text := eval[string](p, `document.querySelector('main').innerText`)
		for _, id := range ids {
			if strings.Contains(text, id) || strings.Contains(text, id[len(id)-8:]) {
				t.Errorf("%s shows the id %s:\n%s", where, id, text)
			}
		}
		return text
	}
	p.do(chromedp.Navigate(e.url + "/#/inputs"))
	p.waitJS(`document.querySelector('.inbox .input-card a[data-id]')?.textContent === 'Quarterly report'`)
	visible("the inbox")
	if got := eval[string](p, `document.querySelector('.inbox .input-card a[data-id]').title + ' ' + document.querySelector('.inbox .input-card button.copy-id').title`); !strings.Contains(got, run.SessionID) {
		t.Errorf("the inbox card's link and copy button: %q, want the session id on hover", got)
	}

	p.do(chromedp.Navigate(e.url + "/#/s/" + run.SessionID + "/2"))
	p.waitJS(`document.querySelector('#detail .seqbig')?.textContent === '#2' && document.querySelector('#detail .ids button.copy-id')`)
	visible("the step detail")
	if got := eval[string](p, `[...document.querySelectorAll('#detail .ids button.copy-id')].map((b) => b.title).join(' ')`); !strings.Contains(got, run.ID) {
		t.Errorf("the step header's copy buttons: %q, want the run id", got)
	}

	p.do(chromedp.Navigate(e.url + "/#/s/" + run.SessionID + "/graph"))
	p.waitJS(`document.querySelector('.crumbs a[data-id]')?.textContent === 'Quarterly report'`)
	visible("the workflow graph")
}

// TestBrowserForeignAgentActions: on a session of an agent this server does
// not run, Retry from here and Replay are disabled with the reason, and
// what works (fork, copy) stays offered; a session of a registered agent
// keeps them.
func TestBrowserForeignAgentActions(t *testing.T) {
	e := newEnv(t, []*stepwise.Agent{chatAgent()}, nil)
	ctx := context.Background()
	sess, err := e.eng.CreateSession(ctx, "elsewhere", "Recorded elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.eng.Ingest(ctx, stepwise.IngestParams{SessionID: sess.ID, Steps: []*stepwise.Step{
		{Kind: steptype.KindUser, Name: "user", Role: steptype.RoleUser, Content: "hello"},
		{Kind: steptype.KindLLM, Name: "llm", Role: steptype.RoleAssistant, Content: "hi"},
	}}); err != nil {
		t.Fatal(err)
	}
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/#/s/" + sess.ID + "/2"))
	p.waitJS(`document.querySelector('#detail button[data-action="retry"]')?.disabled && document.querySelector('button[data-action="replay"]').disabled`)
	got := eval[string](p, `[document.querySelector('#detail button[data-action="retry"]').title, document.querySelector('#detail .agent-note').textContent,
		document.querySelector('.toolbar .agent-note').textContent, String(document.querySelector('#detail button[data-action="fork"]').disabled)].join(' | ')`)
	if !strings.Contains(got, "The agent elsewhere does not run on this server") || !strings.Contains(got, "Retry from here") ||
		!strings.Contains(got, "Replay") || !strings.HasSuffix(got, "false") {
		t.Fatalf("foreign agent: %s", got)
	}
	run := runUntil(t, e, "chat", "What is 6*7?", steptype.RunCompleted)
	p.do(chromedp.Navigate(e.url + "/#/s/" + run.SessionID + "/2"))
	p.waitJS(`document.querySelector('#detail .seqbig')?.textContent === '#2' && document.querySelector('#detail button[data-action="retry"]')`)
	p.waitJS(`new Promise((r) => setTimeout(() => r(true), 200))`)
	if eval[bool](p, `document.querySelector('#detail button[data-action="retry"]').disabled || document.querySelector('button[data-action="replay"]').disabled`) {
		t.Fatal("retry or replay disabled on a session of a registered agent")
	}
}

// TestBrowserDemoSecondTurn: a second message to a demo agent from the
// session page is answered by its closing turn, which says what the agent
// is and how to use a real model, not "(script exhausted)".
func TestBrowserDemoSecondTurn(t *testing.T) {
	analyst, err := demo.Agents(demo.Options{Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, []*stepwise.Agent{analyst}, nil)
	run := runUntil(t, e, "analyst", "What is the population of Paris and Berlin?", steptype.RunCompleted)
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/#/s/" + run.SessionID))
	p.waitJS(`!document.querySelector('form.composer').hidden && !document.getElementById('next-turn').disabled`)
	p.do(chromedp.SendKeys(chromedp.ID("next-turn"), "And Rome?"), chromedp.Click(chromedp.CSS(`button[data-action="send-turn"]`)))
	p.waitJS(`document.querySelectorAll('.status-slot .badge').length && document.querySelector('.status-slot .badge').textContent === 'completed' && [...document.querySelectorAll('#timeline .tl-row .sum')].some((s) => s.textContent.includes('And Rome?'))`)
	p.waitJS(`[...document.querySelectorAll('#timeline .tl-row .sum')].some((s) => s.textContent.includes('scripted example agent'))`)
	text := eval[string](p, `[...document.querySelectorAll('#timeline .tl-row .sum')].map((s) => s.textContent).join('\n')`)
	if strings.Contains(text, "script exhausted") || !strings.Contains(text, "real model") {
		t.Fatalf("second turn:\n%s", text)
	}
}

// TestBrowserForkTreeEditedAt: the fork tree places a fork that edits a
// step at that step, not at the last step it shares.
func TestBrowserForkTreeEditedAt(t *testing.T) {
	e := newEnv(t, []*stepwise.Agent{chatAgent()}, nil)
	run := runUntil(t, e, "chat", "What is 6*7?", steptype.RunCompleted)
	edit := "And 7*8?"
	fork, err := e.eng.Fork(context.Background(), stepwise.ForkParams{SessionID: run.SessionID, At: 4, Edit: &edit})
	if err != nil {
		t.Fatal(err)
	}
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/#/s/" + fork.ID + "?tab=forks"))
	p.waitJS(`document.querySelector('.fork-node.current .fork-at')?.textContent === ' edited at #4'`)
}
