package dashboard_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/stepwise-run/stepwise"
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
