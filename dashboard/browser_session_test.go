package dashboard_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// A 10,000-step session opens with a windowed timeline: a few dozen rows in
// the page, the scroller sized for every step, and the last step reachable.
func TestBrowserLongSession(t *testing.T) {
	e := newEnv(t, nil, nil)
	id := seedLong(t, e, 10_000)
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/#/s/" + id))
	p.waitJS(`document.querySelector('#timeline [data-seq="1"][data-loaded="1"]')`)
	rows := eval[int](p, `document.querySelectorAll('#timeline .tl-row').length`)
	if rows < 10 || rows > 120 {
		t.Fatalf("%d rows in the page for a 10,000-step session; want a window of a few dozen", rows)
	}
	height := eval[int](p, `document.querySelector('.tl-spacer').offsetHeight`)
	if height != 10_000*30 {
		t.Fatalf("scroller height %d, want %d", height, 10_000*30)
	}
	if got := eval[string](p, `document.querySelector('#main h1').textContent`); got != "10000-step session" {
		t.Fatalf("title %q", got)
	}
	p.screenshot("session-10k-top")
	// The server has the eval endpoints: the step detail offers Score.
	p.do(chromedp.Click(chromedp.CSS(`#timeline [data-seq="2"]`)))
	p.waitJS(`document.querySelector('#detail').dataset.evals === 'present'`)
	if !eval[bool](p, `!!document.querySelector('#detail button[data-action="score"]')`) {
		t.Fatal("Score hidden although the eval endpoint exists")
	}

	// Keyboard: from step 2, j j k selects step 3 and shows its detail; G
	// jumps to the end.
	p.do(chromedp.Focus(chromedp.ID("timeline")), chromedp.KeyEvent("jjk"))
	p.waitJS(`document.querySelector('#detail .seqbig')?.textContent === '#3'`)
	if got := eval[string](p, `location.hash`); !strings.HasSuffix(got, "/3") {
		t.Fatalf("hash after selecting step 3: %q", got)
	}
	p.do(chromedp.KeyEvent("G"))
	p.waitJS(`document.querySelector('#timeline [data-seq="10000"][data-loaded="1"]') && document.querySelector('#detail .seqbig')?.textContent === '#10000'`)
	rows = eval[int](p, `document.querySelectorAll('#timeline .tl-row').length`)
	if rows > 120 {
		t.Fatalf("%d rows after jumping to the end", rows)
	}
	if got := eval[string](p, `document.querySelector('#detail').innerText`); !strings.Contains(got, "All products are summarized.") {
		t.Fatalf("detail of the last step:\n%s", got)
	}
	p.screenshot("session-10k-end")

	// A sub-agent step (hop 1) is indented; an error step shows its class.
	first200, err := e.st.StepList(context.Background(), &store.StepListParams{SessionID: id, EndSeq: 300})
	if err != nil {
		t.Fatal(err)
	}
	var hopSeq, errSeq int64
	for _, s := range first200 {
		if s.Hop == 1 && hopSeq == 0 {
			hopSeq = s.Sequence
		}
		if s.Kind == steptype.KindError && errSeq == 0 {
			errSeq = s.Sequence
		}
	}
	p.do(chromedp.Navigate(fmt.Sprintf("%s/#/s/%s/%d", e.url, id, hopSeq)))
	p.waitJS(fmt.Sprintf(`document.querySelector('#timeline [data-seq="%d"][data-loaded="1"]')`, hopSeq))
	if n := eval[int](p, fmt.Sprintf(`document.querySelectorAll('#timeline [data-seq="%d"] .indent i').length`, hopSeq)); n != 1 {
		t.Fatalf("step %d (hop 1) is indented %d levels, want 1", hopSeq, n)
	}
	if n := eval[int](p, fmt.Sprintf(`document.querySelectorAll('#timeline [data-seq="%d"] .indent i').length`, hopSeq-1)); n != 0 {
		t.Fatalf("step %d (hop 0) is indented %d levels", hopSeq-1, n)
	}
	p.do(chromedp.Navigate(fmt.Sprintf("%s/#/s/%s/%d", e.url, id, errSeq)))
	p.waitJS(fmt.Sprintf(`document.querySelector('#timeline [data-seq="%d"][data-loaded="1"]')`, errSeq))
	p.do(chromedp.Click(chromedp.CSS(fmt.Sprintf(`#timeline [data-seq="%d"]`, errSeq))))
	p.waitJS(`/transient/.test(document.querySelector('#detail .d-sec.err')?.innerText || '')`)
	p.screenshot("step-error-detail")
}

// The sessions list shows status, steps, tokens, cost; search filters it.
func TestBrowserSessionsList(t *testing.T) {
	e := newEnv(t, nil, nil)
	seedLong(t, e, 300)
	seedLong(t, e, 40)
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/"))
	p.waitJS(`document.querySelectorAll('table.sessions tbody tr[data-id]').length === 2`)
	text := eval[string](p, `document.querySelector('table.sessions').innerText`)
	for _, want := range []string{"300-step session", "40-step session", "idle", "bulk", "300"} {
		if !strings.Contains(text, want) {
			t.Fatalf("sessions table lacks %q:\n%s", want, text)
		}
	}
	p.screenshot("sessions")
	// Sort by steps, descending then ascending.
	first := func() string {
		return eval[string](p, `document.querySelector('table.sessions tbody tr[data-id] td.title a').textContent`)
	}
	p.do(chromedp.Click(chromedp.Search(`//th/button[starts-with(normalize-space(.), "Steps")]`)))
	if got := first(); got != "300-step session" {
		t.Fatalf("sorted by steps (desc), first row %q", got)
	}
	p.do(chromedp.Click(chromedp.Search(`//th/button[starts-with(normalize-space(.), "Steps")]`)))
	if got := first(); got != "40-step session" {
		t.Fatalf("sorted by steps (asc), first row %q", got)
	}
	p.do(chromedp.KeyEvent("/"))
	if eval[string](p, `document.activeElement.id`) != "q" {
		t.Fatal(`"/" did not focus the search`)
	}
	// (CDP delivers the "/" character even though keydown was handled.)
	eval[chromedp.Void](p, `document.getElementById('q').value = ''`)
	p.do(chromedp.SendKeys(chromedp.ID("q"), "300"))
	p.waitJS(`document.querySelectorAll('table.sessions tbody tr[data-id]').length === 1`)
	if !strings.Contains(eval[string](p, `location.hash`), "q=300") {
		t.Fatal("search not kept in the URL")
	}
}
