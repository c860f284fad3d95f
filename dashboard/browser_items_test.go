package dashboard_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/observe"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// An llm step shows what the model received: rebuilt from the session (the
// user message, the assistant's tool call, the tool result, the tools
// offered), long messages folded, the raw JSON one click away; and, when
// the server recorded the provider request, that request.
func TestBrowserModelRequest(t *testing.T) {
	e := newEnv(t, []*stepwise.Agent{chatAgent()}, nil)
	long := strings.Repeat("Please check this figure carefully. ", 30) + "TAIL"
	run := runUntil(t, e, "chat", long, steptype.RunCompleted)
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/#/s/" + run.SessionID + "/4"))
	p.waitJS(`document.querySelector('#detail .model-request')?.dataset.request === 'rebuilt'`)
	roles := eval[[]string](p, `[...document.querySelectorAll('#detail .model-request .msg')].map((m) => m.dataset.role)`)
	if strings.Join(roles, ",") != "user,assistant,tool" {
		t.Fatalf("messages by role: %v", roles)
	}
	req := eval[string](p, `document.querySelector('#detail .model-request').innerText`)
	for _, want := range []string{"calls calc", `"expr": "6*7"`, "42", "Tools offered (1): calc", "Rebuilt from the session: the messages before step 4."} {
		if !strings.Contains(req, want) {
			t.Fatalf("request view lacks %q:\n%s", want, req)
		}
	}
	// The long user message is folded; one click shows all of it.
	if strings.Contains(req, "TAIL") {
		t.Fatal("the long message is not folded")
	}
	p.do(chromedp.Click(chromedp.CSS(`#detail .model-request button[data-action="unfold"]`)))
	p.waitJS(`document.querySelector('#detail .model-request').innerText.includes('TAIL')`)
	p.screenshot("model-request-chat")
	p.do(chromedp.Click(chromedp.CSS(`#detail button[data-action="raw-request"]`)))
	p.waitJS(`!document.querySelector('#detail .req-raw').hidden && document.querySelector('#detail .req-view').hidden`)
	if raw := eval[string](p, `document.querySelector('#detail .req-raw').innerText`); !strings.Contains(raw, `"messages"`) || !strings.Contains(raw, `"tool_call_id"`) {
		t.Fatalf("raw request:\n%s", raw)
	}
	p.screenshot("model-request-raw")

	// With a recorder, the step's provider_request event is shown instead.
	rec, err := observe.NewRecorder(observe.RecorderConfig{Store: e.st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.eng.Observe(rec))
	chat := e.eng.Agents()[0]
	chat.Instructions = "You compute."
	run2 := runUntil(t, e, "chat", "Again?", steptype.RunCompleted)
	obs := e.st
	step2, err := e.st.StepGet(context.Background(), &store.StepGetParams{SessionID: run2.SessionID, Sequence: 2})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		evs, err := obs.StepEventList(context.Background(), &store.StepEventListParams{StepID: step2.ID, Types: []string{"provider_request"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the recorder wrote no provider_request event")
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.do(chromedp.Navigate(e.url + "/#/s/" + run2.SessionID + "/2"))
	p.waitJS(`document.querySelector('#detail .model-request')?.dataset.request === 'recorded'`)
	if got := eval[string](p, `document.querySelector('#detail .model-request').innerText`); !strings.Contains(got, "Recorded request") || !strings.Contains(got, "You compute.") {
		t.Fatalf("recorded request:\n%s", got)
	}
	p.screenshot("model-request-recorded")
}

// The whole flow through the page only: send the next turn from the
// message box (it streams in live), edit a message into a fork, run the
// fork from there, and compare it with its origin.
func TestBrowserEditForkRunFromHereCompare(t *testing.T) {
	e := newEnv(t, []*stepwise.Agent{chatAgent()}, nil)
	run := runUntil(t, e, "chat", "What is six times seven?", steptype.RunCompleted)
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/#/s/" + run.SessionID))
	p.waitJS(`document.querySelector('#timeline [data-seq="4"][data-loaded="1"]') && !document.querySelector('form.composer').hidden && !document.getElementById('next-turn').disabled`)

	// The next turn, from the message box; its steps stream in.
	p.do(chromedp.SendKeys(chromedp.ID("next-turn"), "And seven times eight?"),
		chromedp.Click(chromedp.CSS(`button[data-action="send-turn"]`)))
	p.waitJS(`document.querySelector('#timeline [data-seq="8"][data-loaded="1"]') && document.querySelector('.status-slot .badge')?.textContent === 'completed'`)
	if got := eval[string](p, `document.querySelector('#timeline [data-seq="5"] .sum').textContent`); got != "And seven times eight?" {
		t.Fatalf("step 5 is %q", got)
	}
	p.screenshot("flow-next-turn")

	// Edit step 5 into a fork.
	p.do(chromedp.Click(chromedp.CSS(`#timeline [data-seq="5"]`)))
	p.waitJS(`document.querySelector('#detail .seqbig')?.textContent === '#5'`)
	p.do(chromedp.Click(chromedp.CSS(`#detail button[data-action="fork"]`)))
	p.waitJS(`document.querySelector('dialog[open] #fork-edit')`)
	p.do(chromedp.Click(chromedp.ID("fork-edit")))
	eval[chromedp.Void](p, `document.getElementById('fork-text').value = ''`)
	p.do(chromedp.SendKeys(chromedp.ID("fork-text"), "And nine times nine?"),
		chromedp.Click(chromedp.CSS(`dialog[open] button[type="submit"]`)))
	p.waitJS(`/^edit of /.test(document.querySelector('#main h1.title')?.textContent) && !document.querySelector('button[data-action="run-from-here"]').hidden`)
	if got := eval[string](p, `document.querySelector('.status-slot .badge').textContent`); got != "idle" {
		t.Fatalf("the edited fork is %s before running", got)
	}
	p.screenshot("flow-edited-fork")

	// Run from here: the fork's own steps stream in after the edited one.
	p.do(chromedp.Click(chromedp.CSS(`button[data-action="run-from-here"]`)))
	p.waitJS(`document.querySelector('#timeline [data-seq="8"][data-loaded="1"]') && document.querySelector('.status-slot .badge')?.textContent === 'completed'`)
	// Run from here is withdrawn after the run: the composer decides after
	// reading the last step (a request of its own, which may answer after
	// the badge changed), so wait for it; waitJS fails if it never is.
	p.waitJS(`document.querySelector('button[data-action="run-from-here"]').hidden`)
	p.screenshot("flow-ran-from-here")

	// Compare with the origin: aligned, fork point #4, divergence at #5.
	p.do(chromedp.Click(chromedp.CSS(`a[data-action="compare"]`)))
	p.waitJS(`document.querySelector('.cmp-table tr.diverged')`)
	if got := eval[string](p, `document.querySelector('.cmp-table tr.diverged').dataset.seq`); got != "5" {
		t.Fatalf("first divergence at %s", got)
	}
	if got := eval[string](p, `document.querySelector('.cmp-table tr.fork-row').dataset.seq`); got != "4" {
		t.Fatalf("fork point at %s", got)
	}
	if n := eval[int](p, `document.querySelectorAll('.cmp-table tr.before-fork').length`); n != 4 {
		t.Fatalf("%d shared rows", n)
	}
	totals := eval[[]string](p, `[...document.querySelectorAll('.cmp-totals')].map((x) => x.innerText)`)
	if len(totals) != 2 || !strings.Contains(totals[0], "8 steps") || !strings.Contains(totals[1], "8 steps (4 shared)") || !strings.Contains(totals[1], "tokens") || !strings.Contains(totals[1], "$") {
		t.Fatalf("totals %q", totals)
	}
	if left := eval[string](p, `document.querySelector('.cmp-table tr.diverged td:nth-child(2)').innerText`); !strings.Contains(left, "And seven times eight?") {
		t.Fatalf("left at #5: %q", left)
	}
	if right := eval[string](p, `document.querySelector('.cmp-table tr.diverged td:nth-child(3)').innerText`); !strings.Contains(right, "And nine times nine?") {
		t.Fatalf("right at #5: %q", right)
	}
	p.screenshot("flow-compare")

	// The same comparison from the sessions list: pick two, compare.
	p.do(chromedp.Navigate(e.url + "/#/"))
	p.waitJS(`document.querySelectorAll('table.sessions input.pick').length === 2`)
	p.do(chromedp.Click(chromedp.CSS(`table.sessions tr[data-id="` + run.SessionID + `"] input.pick`)))
	if !eval[bool](p, `document.querySelector('button[data-action="compare-picked"]').disabled`) {
		t.Fatal("compare offered with one session picked")
	}
	p.do(chromedp.Click(chromedp.CSS(`table.sessions tr:not([data-id="`+run.SessionID+`"]) input.pick`)),
		chromedp.Click(chromedp.CSS(`button[data-action="compare-picked"]`)))
	p.waitJS(`document.querySelector('.cmp-table tr.diverged')?.dataset.seq === '5' && location.hash.includes('a=` + run.SessionID + `')`)
}

// Every attachment can be opened and downloaded: a text file as well as an
// image, fetched with the token.
func TestBrowserAttachmentsOpenDownload(t *testing.T) {
	e := newEnv(t, []*stepwise.Agent{chatAgent()}, nil)
	run := runUntil(t, e, "chat", "Look at these", steptype.RunCompleted)
	ctx := context.Background()
	step, err := e.st.StepGet(ctx, &store.StepGetParams{SessionID: run.SessionID, Sequence: 2})
	if err != nil {
		t.Fatal(err)
	}
	att, err := observe.NewAttachments(e.st, observe.AttachmentConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := att.Add(ctx, observe.AttachParams{StepID: step.ID, Name: "notes.txt", ContentType: "text/plain", Data: []byte("line one\nline two\n")}); err != nil {
		t.Fatal(err)
	}
	if _, err := att.Add(ctx, observe.AttachParams{StepID: step.ID, Name: "shot.png", ContentType: "image/png", Data: onePixelPNG}); err != nil {
		t.Fatal(err)
	}
	p := newPage(t)
	// The test reads the blob: URLs back with fetch, which the page's CSP
	// (connect-src 'self') refuses; the links are the page's own.
	p.do(chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, cdppage.SetBypassCSP, cdppage.SetBypassCSPParams{Enabled: true})
		return err
	}))
	p.do(chromedp.Navigate(e.url + "/#/s/" + run.SessionID + "/2"))
	p.waitJS(`document.querySelectorAll('#detail .attachment a[data-action="download-attachment"]').length === 2`)
	links := eval[[]string](p, `[...document.querySelectorAll('#detail .attachment')].map((li) => li.querySelector('.att-name').textContent + ' ' + [...li.querySelectorAll('a[data-action]')].map((a) => a.dataset.action + '=' + (a.getAttribute('download') || '') + (a.href.startsWith('blob:') ? ':blob' : '')).join(' '))`)
	want := []string{"notes.txt open-attachment=:blob download-attachment=notes.txt:blob", "shot.png open-attachment=:blob download-attachment=shot.png:blob"}
	if strings.Join(links, "|") != strings.Join(want, "|") {
		t.Fatalf("attachment links %q, want %q", links, want)
	}
	p.waitJS(`fetch(document.querySelector('#detail .attachment a[download="notes.txt"]').href).then((r) => r.text()).then((t) => t === 'line one\nline two\n')`)
	p.screenshot("attachments")
}

// A request of a run cancelled elsewhere stops being answerable on the
// open page, live: the card goes, the input step says it has ended.
func TestBrowserStaleRequestGoesLive(t *testing.T) {
	e := newEnv(t, []*stepwise.Agent{askerAgent()}, nil)
	run := runUntil(t, e, "asker", "Print", steptype.RunWaiting)
	sess, err := e.st.SessionGet(context.Background(), &store.SessionGetParams{ID: run.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/#/s/" + run.SessionID + "/" + itoa(sess.LastSequence)))
	p.waitJS(`document.querySelector('.pending .input-card') && document.querySelector('#detail .input-card')`)
	p.screenshot("stale-before")
	if _, err := e.eng.Cancel(context.Background(), run.ID, "cancelled elsewhere"); err != nil {
		t.Fatal(err)
	}
	p.waitJS(`!document.querySelector('.input-card') && document.querySelector('.status-slot .badge')?.textContent === 'cancelled'`)
	if eval[int](p, `document.querySelectorAll('form.answer').length`) != 0 {
		t.Fatal("an answer form is still shown")
	}
	p.screenshot("stale-after")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A replay is named by what it is, and the comparison with its source marks
// each replayed step reused or live.
func TestBrowserReplayCompare(t *testing.T) {
	e := newEnv(t, []*stepwise.Agent{chatAgent()}, nil)
	src := runUntil(t, e, "chat", "What is six times seven?", steptype.RunCompleted)
	r, err := e.eng.Replay(context.Background(), stepwise.ReplayParams{SessionID: src.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	waitRun(t, e, r.ID, steptype.RunCompleted)
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/#/s/" + r.SessionID))
	p.waitJS(`document.querySelector('#main h1.title')?.textContent.startsWith('replay of ') && document.querySelector('#timeline [data-loaded="1"]')`)
	if got := eval[string](p, `document.querySelector('#main h1.title').textContent`); got != `replay of "What is six times seven?"` {
		t.Fatalf("replay named %q", got)
	}
	p.do(chromedp.Click(chromedp.CSS(`a[data-action="compare"]`)))
	p.waitJS(`document.querySelector('.cmp-table tbody tr')`)
	marks := eval[[]string](p, `[...document.querySelectorAll('.cmp-table td:nth-child(3) .badge[class*="replay-"]')].map((b) => b.textContent)`)
	if len(marks) == 0 {
		t.Fatal("no replayed step marked reused or live")
	}
	for _, m := range marks {
		if m != "reused" && m != "live" {
			t.Fatalf("replay mark %q", m)
		}
	}
	p.screenshot("replay-compare")
}
