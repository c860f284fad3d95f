package dashboard_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
)

// Step search over content across sessions: text, filters and sorting
// done by the server (the oldest match comes first in ascending order
// although it is not among the newest page), paging, and similar steps.
func TestBrowserStepSearch(t *testing.T) {
	e := newEnv(t, []*stepwise.Agent{chatAgent()}, nil)
	long := seedLong(t, e, 400)
	chat := runUntil(t, e, "chat", "What is six times seven items?", steptype.RunCompleted)
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/#/search"))
	p.waitJS(`document.querySelector('table.steps-found tbody tr')`)
	p.do(chromedp.SendKeys(chromedp.ID("step-q"), "item"))
	p.waitJS(`/steps? match/.test(document.querySelector('#main [role="status"]').textContent) && document.querySelectorAll('table.steps-found tbody tr[data-step]').length === 50 && location.hash.includes('q=item')`)
	info := eval[string](p, `document.querySelector('#main [role="status"]').textContent`)
	if !strings.Contains(info, "2 sessions") && !strings.Contains(info, "sessions searched") {
		t.Fatalf("info %q", info)
	}
	// Both sessions match (the chat's user message says "items").
	p.do(chromedp.SetValue(chromedp.ID("sf-dir"), "asc"))
	eval[chromedp.Void](p, `document.getElementById('sf-dir').dispatchEvent(new Event('change'))`)
	p.waitJS(`document.querySelector('table.steps-found tbody tr[data-step] td:nth-child(3)')?.textContent === '#2' && location.hash.includes('dir=asc')`)
	// Sorted by cost, highest first, over every match (not only the page).
	p.do(chromedp.SetValue(chromedp.ID("sf-sort"), "cost"))
	eval[chromedp.Void](p, `document.getElementById('sf-sort').dispatchEvent(new Event('change'))`)
	p.do(chromedp.SetValue(chromedp.ID("sf-dir"), "desc"))
	eval[chromedp.Void](p, `document.getElementById('sf-dir').dispatchEvent(new Event('change'))`)
	p.waitJS(`location.hash.includes('sort=cost') && location.hash.includes('dir=desc') && !document.querySelector('button.more').disabled && [...document.querySelectorAll('table.steps-found tbody tr[data-step] td:last-child')].every((td) => td.textContent === '$0.0021')`)
	p.do(chromedp.Click(chromedp.CSS(`button.more`)))
	p.waitJS(`document.querySelectorAll('table.steps-found tbody tr[data-step]').length === 100 && [...document.querySelectorAll('table.steps-found tbody tr[data-step] td:last-child')].every((td) => td.textContent === '$0.0021')`)
	p.waitJS(`!document.querySelector('button.more').disabled`)
	p.do(chromedp.Click(chromedp.CSS(`button.more`)))
	p.waitJS(`document.querySelectorAll('table.steps-found tbody tr[data-step]').length === 150`)
	// Filter by tool: the llm steps calling fetch_page and the tool steps.
	p.do(chromedp.SendKeys(chromedp.ID("sf-tool"), "fetch_page"))
	p.waitJS(`location.hash.includes('tool=fetch_page') && [...document.querySelectorAll('table.steps-found tbody tr[data-step]')].every((r) => /fetch_page/.test(r.textContent))`)
	p.screenshot("search-steps")
	// Text in another session, found across sessions; a row opens the step.
	eval[chromedp.Void](p, `document.getElementById('sf-tool').value = ''; document.getElementById('sf-tool').dispatchEvent(new Event('input'))`)
	eval[chromedp.Void](p, `document.getElementById('step-q').value = 'six times'; document.getElementById('step-q').dispatchEvent(new Event('input'))`)
	p.waitJS(`document.querySelectorAll('table.steps-found tbody tr[data-step]').length === 1`)
	p.do(chromedp.Click(chromedp.CSS(`table.steps-found tbody tr[data-step] td:nth-child(4)`)))
	p.waitJS(`location.hash.startsWith('#/s/` + chat.SessionID + `/1') && document.querySelector('#detail .seqbig')?.textContent === '#1'`)
	// By agent: the chat agent's steps only.
	p.do(chromedp.Navigate(e.url + "/#/search?q=six"))
	p.waitJS(`document.querySelector('#sf-agent option[value="chat"]') && document.querySelector('table.steps-found tbody tr[data-step]')`)
	p.do(chromedp.SetValue(chromedp.ID("sf-agent"), "chat"))
	eval[chromedp.Void](p, `document.getElementById('sf-agent').dispatchEvent(new Event('change'))`)
	p.waitJS(`location.hash.includes('agent=chat') && /in 1 sessions searched/.test(document.querySelector('#main [role="status"]').textContent)`)
	_ = long
	// Similar steps: this server has no embeddings yet, and says so.
	p.do(chromedp.Navigate(e.url + "/#/search?q=catalogue"))
	p.waitJS(`document.querySelector('table.steps-found tbody tr[data-step]')`)
	p.do(chromedp.Click(chromedp.CSS(`button[data-action="similar"]`)))
	p.waitJS(`/embeddings|Similar steps \(/.test(document.querySelector('.similar').textContent)`)
}
