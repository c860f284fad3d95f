package dashboard_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// A pending ask_human request is answered through the form generated from
// its JSON Schema; the run resumes and finishes, and the page shows it live.
func TestBrowserAnswerInput(t *testing.T) {
	e := newEnv(t, []*stepwise.Agent{askerAgent()}, nil)
	run := runUntil(t, e, "asker", "Print my report", steptype.RunWaiting)
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/#/s/" + run.SessionID))
	p.waitJS(`document.querySelector('.pending .input-card form')`)
	if got := eval[string](p, `document.querySelector('.pending .input-card .prompt').textContent`); got != "How many copies, and for whom?" {
		t.Fatalf("prompt %q", got)
	}
	// The form has a field per property: text, number, select, checkbox.
	kinds := eval[string](p, `[...document.querySelectorAll('.pending .input-card form .field')].map(f => f.querySelector('input,select,textarea').type).join(',')`)
	if kinds != "text,number,select-one,checkbox" {
		t.Fatalf("generated fields %q", kinds)
	}
	p.screenshot("input-form")
	// An empty required field is refused in the page, nothing is sent.
	p.do(chromedp.Click(chromedp.CSS(`.pending .input-card button[type="submit"]`)))
	p.waitJS(`/required/.test(document.querySelector('.pending .input-card .error')?.textContent || '') || document.querySelector('.pending .input-card :invalid')`)
	if r := waitRun(t, e, run.ID, steptype.RunWaiting); r.Status != steptype.RunWaiting {
		t.Fatal("run moved on an invalid answer")
	}
	p.do(
		chromedp.SendKeys(chromedp.CSS(`.pending .input-card input[type="text"]`), "Ada"),
		chromedp.SendKeys(chromedp.CSS(`.pending .input-card input[type="number"]`), "3"),
		chromedp.SetValue(chromedp.CSS(`.pending .input-card select`), "2"),
		chromedp.Click(chromedp.CSS(`.pending .input-card input[type="checkbox"]`)),
		chromedp.Click(chromedp.CSS(`.pending .input-card button[type="submit"]`)),
	)
	done := waitRun(t, e, run.ID, steptype.RunCompleted, steptype.RunFailed)
	if done.Status != steptype.RunCompleted {
		t.Fatalf("run %s: %+v", done.Status, done.Error)
	}
	// The answer recorded is the form's value, typed by the schema.
	steps, err := e.st.StepList(context.Background(), &store.StepListParams{SessionID: run.SessionID, Kinds: []steptype.Kind{steptype.KindInput}})
	if err != nil || len(steps) != 1 {
		t.Fatalf("input steps %v %v", steps, err)
	}
	var answer map[string]any
	if err := json.Unmarshal(steps[0].Outputs, &answer); err != nil {
		t.Fatal(err)
	}
	if answer["name"] != "Ada" || answer["copies"] != float64(3) || answer["color"] != "blue" || answer["rush"] != true {
		t.Fatalf("answer %v", answer)
	}
	// Live: the final answer and the completed status appear without a reload.
	p.waitJS(`[...document.querySelectorAll('#timeline .tl-row .sum')].some(s => s.textContent.includes('Printing the copies now.'))`)
	p.waitJS(`document.querySelector('.status-slot .badge')?.textContent === 'completed' && !document.querySelector('.pending .input-card')`)
	p.screenshot("input-answered")
}

// A tool call that needs an approval is approved from the page; the tool
// runs and the run finishes.
func TestBrowserApproveToolCall(t *testing.T) {
	deployed := 0
	e := newEnv(t, []*stepwise.Agent{deployerAgent(&deployed)}, nil)
	run := runUntil(t, e, "deployer", "Ship it", steptype.RunWaiting)
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/#/inputs"))
	p.waitJS(`document.querySelector('.inbox .input-card button[data-action="approve"]')`)
	text := eval[string](p, `document.querySelector('.inbox .input-card').innerText`)
	for _, want := range []string{"Approval needed", "deploy", `"version": "1.4.2"`} {
		if !strings.Contains(text, want) {
			t.Fatalf("approval card lacks %q:\n%s", want, text)
		}
	}
	p.waitJS(`document.getElementById('inbox-count').textContent === '1'`)
	p.screenshot("approval")
	if deployed != 0 {
		t.Fatal("the tool ran before the approval")
	}
	p.do(chromedp.Click(chromedp.CSS(`.inbox .input-card button[data-action="approve"]`)))
	done := waitRun(t, e, run.ID, steptype.RunCompleted, steptype.RunFailed)
	if done.Status != steptype.RunCompleted || deployed != 1 || done.Output != "Deployed 1.4.2 to prod." {
		t.Fatalf("run %s output %q, deployed %d times", done.Status, done.Output, deployed)
	}
	p.waitJS(`document.querySelector('.inbox .empty') && document.getElementById('inbox-count').hidden`)
}

// Rejecting an approval tells the model; the tool never runs.
func TestBrowserRejectToolCall(t *testing.T) {
	deployed := 0
	e := newEnv(t, []*stepwise.Agent{deployerAgent(&deployed)}, nil)
	run := runUntil(t, e, "deployer", "Ship it", steptype.RunWaiting)
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/#/s/" + run.SessionID))
	p.waitJS(`document.querySelector('.pending button[data-action="reject"]')`)
	p.do(chromedp.SendKeys(chromedp.CSS(`.pending .input-card input[type="text"]`), "not on a Friday"),
		chromedp.Click(chromedp.CSS(`.pending button[data-action="reject"]`)))
	waitRun(t, e, run.ID, steptype.RunCompleted, steptype.RunFailed)
	if deployed != 0 {
		t.Fatal("a rejected tool ran")
	}
	steps, _ := e.st.StepList(context.Background(), &store.StepListParams{SessionID: run.SessionID, Kinds: []steptype.Kind{steptype.KindInput}})
	if len(steps) != 1 || steps[0].Content != "rejected: not on a Friday" {
		t.Fatalf("input step %+v", steps)
	}
}

// Fork at a step with an edited message: the page moves to the fork, which
// shares the earlier steps; the fork tree shows both sessions.
func TestBrowserForkWithEdit(t *testing.T) {
	e := newEnv(t, []*stepwise.Agent{chatAgent()}, nil)
	run := runUntil(t, e, "chat", "What is six times seven?", steptype.RunCompleted)
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/#/s/" + run.SessionID + "/1"))
	p.waitJS(`document.querySelector('#detail .seqbig')?.textContent === '#1'`)
	p.do(chromedp.Click(chromedp.CSS(`#detail button[data-action="fork"]`)))
	p.waitJS(`document.querySelector('dialog[open] #fork-edit')`)
	p.do(chromedp.Click(chromedp.ID("fork-edit")))
	eval[chromedp.Void](p, `document.getElementById('fork-text').value = ''`)
	p.do(chromedp.SendKeys(chromedp.ID("fork-text"), "What is seven times eight?"),
		chromedp.SendKeys(chromedp.ID("fork-title"), "edited question"))
	p.screenshot("fork-dialog")
	p.do(chromedp.Click(chromedp.CSS(`dialog[open] button[type="submit"]`)))
	p.waitJS(`document.querySelector('#main h1.title')?.textContent === 'edited question'`)
	forkID := strings.TrimPrefix(eval[string](p, `location.hash`), "#/s/")
	forkID, _, _ = strings.Cut(forkID, "/")
	fork, err := e.st.SessionGet(context.Background(), &store.SessionGetParams{ID: forkID})
	if err != nil {
		t.Fatal(err)
	}
	first, err := e.st.StepGet(context.Background(), &store.StepGetParams{SessionID: fork.ID, Sequence: 1})
	if err != nil || first.Content != "What is seven times eight?" {
		t.Fatalf("fork's step 1: %+v %v", first, err)
	}
	orig, _ := e.st.StepGet(context.Background(), &store.StepGetParams{SessionID: run.SessionID, Sequence: 1})
	if orig.Content != "What is six times seven?" {
		t.Fatal("the original changed")
	}
	// Editing step 1 shares nothing: the new session notes where it came from.
	p.waitJS(`document.querySelector('.meta a[data-origin]')`)

	// Fork at step 2 without an edit, from the timeline: steps 1–2 shared.
	p.do(chromedp.Navigate(e.url + "/#/s/" + run.SessionID + "/2"))
	p.waitJS(`document.querySelector('#detail .seqbig')?.textContent === '#2'`)
	p.do(chromedp.Click(chromedp.CSS(`#detail button[data-action="fork"]`)))
	p.waitJS(`document.querySelector('dialog[open] button[type="submit"]')`)
	p.do(chromedp.Click(chromedp.CSS(`dialog[open] button[type="submit"]`)))
	p.waitJS(`/forked from/.test(document.querySelector('.meta')?.innerText || '') && document.querySelector('#timeline [data-seq="2"][data-loaded="1"]')`)
	if n := eval[int](p, `document.querySelectorAll('#timeline .tl-row[data-loaded="1"]').length`); n != 2 {
		t.Fatalf("fork at 2 shows %d steps", n)
	}
	// The fork tree: the original as root, the fork under it, current marked.
	p.do(chromedp.Click(chromedp.CSS(`.tabs button[role="tab"]:nth-child(2)`)))
	p.waitJS(`document.querySelectorAll('.fork-tree li').length === 2 && document.querySelector('.fork-tree ul ul .fork-node.current')`)
	p.screenshot("fork-tree")
}

// Cancel a waiting run, retry from a step and replay a session, from the
// session page.
func TestBrowserCancelRetryReplay(t *testing.T) {
	e := newEnv(t, []*stepwise.Agent{askerAgent(), chatAgent()}, nil)
	waiting := runUntil(t, e, "asker", "Print", steptype.RunWaiting)
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/#/s/" + waiting.SessionID))
	p.waitJS(`document.querySelector('button[data-action="cancel"]:not([hidden])')`)
	p.do(chromedp.Click(chromedp.CSS(`button[data-action="cancel"]`)))
	p.waitJS(`document.querySelector('dialog[open] #cancel-reason')`)
	p.do(chromedp.SendKeys(chromedp.ID("cancel-reason"), "changed my mind"), chromedp.Click(chromedp.CSS(`dialog[open] button[type="submit"]`)))
	if r := waitRun(t, e, waiting.ID, steptype.RunCancelled); r.Error == nil || r.Error.Message != "changed my mind" {
		t.Fatalf("cancelled run %+v", r)
	}
	p.waitJS(`document.querySelector('.status-slot .badge')?.textContent === 'cancelled' && document.querySelector('button[data-action="cancel"]').hidden`)

	done := runUntil(t, e, "chat", "What is six times seven?", steptype.RunCompleted)
	p.do(chromedp.Navigate(e.url + "/#/s/" + done.SessionID + "/2"))
	p.waitJS(`document.querySelector('#main h1.title')?.title === ` + js(done.SessionID) + ` && document.querySelector('#detail .seqbig')?.textContent === '#2'`)
	p.do(chromedp.Click(chromedp.CSS(`#detail button[data-action="retry"]`)))
	p.waitJS(`document.querySelector('dialog[open] button[type="submit"]')`)
	p.do(chromedp.Click(chromedp.CSS(`dialog[open] button[type="submit"]`)))
	p.waitJS(`/forked from/.test(document.querySelector('.meta')?.innerText || '') && document.querySelector('.status-slot .badge')?.textContent === 'completed' && document.querySelector('#timeline [data-seq="4"][data-loaded="1"]')`)
	retried := strings.TrimPrefix(eval[string](p, `location.hash`), "#/s/")
	retried, _, _ = strings.Cut(retried, "/")
	s, err := e.st.SessionGet(context.Background(), &store.SessionGetParams{ID: retried})
	if err != nil || s.ParentSessionID != done.SessionID || s.ForkSequence != 1 {
		t.Fatalf("retry session %+v %v", s, err)
	}

	p.do(chromedp.Navigate(e.url + "/#/s/" + done.SessionID))
	p.waitJS(`document.querySelector('#main h1.title')?.title === ` + js(done.SessionID) + ` && !/forked from/.test(document.querySelector('.meta')?.innerText || '') && document.querySelector('button[data-action="replay"]')`)
	p.do(chromedp.Click(chromedp.CSS(`button[data-action="replay"]`)))
	p.waitJS(`document.querySelector('dialog[open] button[type="submit"]')`)
	p.do(chromedp.Click(chromedp.CSS(`dialog[open] button[type="submit"]`)))
	p.waitJS(`/forked from/.test(document.querySelector('.meta')?.innerText || '') && document.querySelector('.status-slot .badge')?.textContent === 'completed' && document.querySelector('#timeline [data-seq="4"][data-loaded="1"]')`)
	p.screenshot("replayed")
}

// With tokens, the page asks for one on the first 401, keeps it for the
// tab, and says so when it is wrong.
func TestBrowserLoginWithToken(t *testing.T) {
	e := newEnvWith(t, envOptions{tokens: []string{"s3cret"}})
	seedLong(t, e, 5)
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/"))
	p.waitJS(`document.getElementById('login').open`)
	p.screenshot("login")
	p.do(chromedp.SendKeys(chromedp.ID("login-token"), "wrong"), chromedp.Click(chromedp.CSS(`#login button[type="submit"]`)))
	p.waitJS(`document.getElementById('login').open && /refused/.test(document.getElementById('login-error').textContent)`)
	p.do(chromedp.SendKeys(chromedp.ID("login-token"), "s3cret"), chromedp.Click(chromedp.CSS(`#login button[type="submit"]`)))
	p.waitJS(`!document.getElementById('login').open && document.querySelector('table.sessions tbody tr[data-id]')`)
	if eval[string](p, `sessionStorage.getItem('stepwise-token')`) != "s3cret" {
		t.Fatal("token not kept in sessionStorage")
	}
	// The live stream carries the token too.
	id := eval[string](p, `document.querySelector('table.sessions tbody tr[data-id]').dataset.id`)
	p.do(chromedp.Navigate(e.url + "/#/s/" + id))
	p.waitJS(`document.getElementById('conn').textContent.includes('live') && document.querySelector('#timeline [data-seq="5"][data-loaded="1"]')`)
}

// The inbox follows the store live: a run cancelled elsewhere leaves it at
// once, even while a field of its card (or of another card) has focus, and
// a card being filled in keeps what was typed.
func TestBrowserInboxFollowsCancel(t *testing.T) {
	deployed := 0
	e := newEnv(t, []*stepwise.Agent{deployerAgent(&deployed), askerAgent()}, nil)
	ship := runUntil(t, e, "deployer", "Ship it", steptype.RunWaiting)
	runUntil(t, e, "asker", "Print", steptype.RunWaiting)
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/#/inputs"))
	p.waitJS(`document.querySelectorAll('.inbox .input-card').length === 2 && document.querySelector('.inbox .input-card button[data-action="approve"]')`)
	// Type into the asker's form, then focus the approval's message field.
	asker := `.inbox .input-card:not(:has(button[data-action="approve"])) input[type="text"]`
	p.do(chromedp.SendKeys(chromedp.CSS(asker), "Ada"))
	p.do(chromedp.Focus(chromedp.CSS(`.inbox .input-card:has(button[data-action="approve"]) input[type="text"]`)))
	if _, err := e.eng.Cancel(context.Background(), ship.ID, "cancelled elsewhere"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p.waitJSFor(`document.querySelectorAll('.inbox .input-card').length === 1 && !document.querySelector('.inbox button[data-action="approve"]')`, 3*time.Second)
	t.Logf("the cancelled run's card left the inbox after %s", time.Since(start))
	if got := eval[string](p, `document.querySelector(`+js(asker)+`).value`); got != "Ada" {
		t.Fatalf("the other card's field holds %q, want what was typed", got)
	}
}
