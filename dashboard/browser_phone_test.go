package dashboard_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
)

// TestBrowserNarrowSessionTabs: at tablet and phone widths the session
// tabs keep their height and take clicks (each opens its view), and in the
// timeline the kind label is whole and does not overlap the summary.
func TestBrowserNarrowSessionTabs(t *testing.T) {
	e := newEnv(t, []*stepwise.Agent{chatAgent()}, nil)
	run := runUntil(t, e, "chat", "What is 6*7?", steptype.RunCompleted)
	// Steps of every kind, for the longest kind labels.
	var more []*stepwise.Step
	for _, k := range []steptype.Kind{steptype.KindDecision, steptype.KindAgent, steptype.KindCustom, steptype.KindSystem, steptype.KindError} {
		s := &stepwise.Step{Kind: k, Name: string(k), Content: "a " + string(k) + " step with a summary"}
		if k == steptype.KindError {
			s.Status, s.Error = steptype.StepFailed, &steptype.StepError{Message: "boom", Class: steptype.ErrorPermanent}
		}
		more = append(more, s)
	}
	if _, err := e.eng.Ingest(context.Background(), stepwise.IngestParams{SessionID: run.SessionID, Steps: more}); err != nil {
		t.Fatal(err)
	}
	p := newPage(t)
	for _, w := range []int64{760, 600, 390} {
		p.do(chromedp.EmulateViewport(w, 844))
		p.do(chromedp.Navigate(e.url + "/#/s/" + run.SessionID))
		p.waitJS(`document.querySelector('#timeline .tl-row[data-seq="1"][data-loaded="1"]')`)
		p.waitJS(`new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))`)
		// Each tab is tall enough to tap, and a tap at its centre lands on it.
		bad := eval[string](p, `[...document.querySelectorAll('.tabs [role="tab"], .tabs .tab-link')].map((b) => {
			b.scrollIntoView({ block: 'nearest', inline: 'nearest' });
			const r = b.getBoundingClientRect();
			const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
			return r.height < 24 || !(hit === b || b.contains(hit)) ? b.textContent + ' ' + Math.round(r.height) + 'px' : '';
		}).filter(Boolean).join(', ')`)
		if bad != "" {
			t.Errorf("%d px: tabs not clickable: %s", w, bad)
			p.screenshot(fmt.Sprintf("tabs-%d", w))
			continue
		}
		eval[chromedp.Void](p, `[...document.querySelectorAll('.tabs [role="tab"]')].find((b) => b.textContent === 'Time').click()`)
		p.waitJS(`document.querySelector('.wf-box') && document.querySelector('.tabs [aria-selected="true"]').textContent === 'Time'`)
		eval[chromedp.Void](p, `[...document.querySelectorAll('.tabs [role="tab"]')].find((b) => b.textContent === 'Timeline').click()`)
		p.waitJS(`document.querySelector('#timeline .tl-row[data-seq="2"][data-loaded="1"]')`)
		// The kind label and the summary of a row do not overlap.
		p.waitJS(`document.querySelector('#timeline .tl-row[data-seq="9"][data-loaded="1"]')`)
		overlap := eval[string](p, `[...document.querySelectorAll('#timeline .tl-row[data-loaded="1"]')].map((row) => {
			const k = row.querySelector('.kind'), s = row.querySelector('.sum');
			if (!k || !s) return '';
			const text = document.createRange();
			text.selectNodeContents(k);
			const a = text.getBoundingClientRect(), b = s.getBoundingClientRect();
			return a.right > b.left + 1 && a.left < b.right && a.width > 0 && b.width > 0 ? row.dataset.seq + ': kind ' + Math.round(a.left) + '-' + Math.round(a.right) + ', summary from ' + Math.round(b.left) : '';
		}).filter(Boolean).join('; ')`)
		if overlap != "" {
			t.Errorf("%d px: kind label overlaps the summary: %s", w, overlap)
		}
		if cut := eval[string](p, `[...document.querySelectorAll('#timeline .tl-row[data-loaded="1"] .kind')].filter((k) => k.scrollWidth > k.clientWidth).map((k) => k.textContent).join(', ')`); cut != "" {
			t.Errorf("%d px: kind labels cut: %s", w, cut)
		}
		p.screenshot(fmt.Sprintf("session-%d", w))
	}
	p.do(chromedp.EmulateViewport(1440, 900))
}
