package dashboard_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The time view of a 10,000-step session: windowed rows, one bar per step
// on a shared axis; model time with first-token latency, tool time, a
// failed attempt followed by its retry's back-off, sub-agent steps nested;
// the last step ends at the right edge; selecting a bar shows its detail.
func TestBrowserWaterfall(t *testing.T) {
	e := newEnv(t, nil, nil)
	id := seedLong(t, e, 10_000)
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/#/s/" + id + "?tab=time"))
	p.waitJS(`document.querySelector('#waterfall [data-seq="2"][data-loaded="1"] .wf-bar') && !isNaN(parseFloat(document.querySelector('.wf-tick:last-child').textContent))`)
	if rows := eval[int](p, `document.querySelectorAll('#waterfall .tl-row').length`); rows < 10 || rows > 120 {
		t.Fatalf("%d waterfall rows in the page; want a window", rows)
	}
	if h := eval[int](p, `document.querySelector('#waterfall .tl-spacer').offsetHeight`); h != 10_000*24 {
		t.Fatalf("waterfall height %d", h)
	}
	// Step 2 is an llm call with a first-token latency of 300 ms in 1.2 s.
	ttft := eval[float64](p, `(() => { const b = document.querySelector('#waterfall [data-seq="2"] .wf-bar'); return b.querySelector('.seg-ttft').getBoundingClientRect().width / b.getBoundingClientRect().width; })()`)
	if ttft < 0.2 || ttft > 0.3 {
		t.Fatalf("first-token share of step 2's bar %.2f, want 0.25", ttft)
	}
	if !eval[bool](p, `!!document.querySelector('#waterfall [data-seq="3"] .seg-tool')`) {
		t.Fatal("no tool bar for step 3")
	}
	// Bars follow one another on the shared axis.
	order := eval[bool](p, `(() => { const x = (q) => parseFloat(document.querySelector('#waterfall [data-seq="' + q + '"] .wf-bar').style.left); return x(2) < x(3) && x(3) < x(4) && x(4) < x(5); })()`)
	if !order {
		t.Fatal("bars are not in time order on the axis")
	}
	// A sub-agent exchange is nested (hop 1, indented).
	p.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('waterfall').scrollTop = 50 * 24`))
	p.waitJS(`document.querySelector('#waterfall [data-hop="1"][data-loaded="1"]')`)
	if !eval[bool](p, `parseFloat(document.querySelector('#waterfall [data-hop="1"] .wf-name').style.paddingLeft) > 0`) {
		t.Fatal("sub-agent steps are not indented")
	}
	p.screenshot("waterfall-top")
	// Zoomed to the steps in view, each bar gets a visible width.
	p.do(chromedp.Click(chromedp.CSS(`button[data-action="fit-axis"]`)))
	p.waitJS(`parseFloat(document.querySelector('#waterfall [data-seq="52"] .wf-bar')?.style.width) > 5`)
	p.screenshot("waterfall-zoomed")
	p.do(chromedp.Click(chromedp.CSS(`button[data-action="fit-axis"]`)))
	p.waitJS(`parseFloat(document.querySelector('#waterfall [data-seq="52"] .wf-bar')?.style.width) < 1`)
	// A failed attempt, then the back-off before the next step.
	p.do(chromedp.Evaluate[chromedp.Void](`document.getElementById('waterfall').scrollTop = 185 * 24`))
	p.waitJS(`(() => { const r = document.querySelector('#waterfall .tl-row[data-kind="error"][data-loaded="1"] .seg-error')?.closest('.tl-row'); return r && document.querySelector('#waterfall [data-seq="' + (+r.dataset.seq + 1) + '"][data-loaded="1"]'); })()`)
	if !eval[bool](p, `(() => { const r = document.querySelector('#waterfall .tl-row[data-kind="error"]'); const next = document.querySelector('#waterfall [data-seq="' + (+r.dataset.seq + 1) + '"]'); return !!next.querySelector('.wf-backoff') && /back-off/.test(next.querySelector('.wf-track').dataset.full); })()`) {
		t.Fatal("no back-off drawn after the failed attempt: " + eval[string](p, `(() => { const r = document.querySelector("#waterfall .tl-row[data-kind=error]"); return r.outerHTML + document.querySelector("#waterfall [data-seq=\"" + (+r.dataset.seq + 1) + "\"]").outerHTML; })()`))
	}
	p.screenshot("waterfall-error")
	// The end of the session reaches the right edge of the axis.
	p.do(chromedp.Focus(chromedp.ID("waterfall")), chromedp.KeyEvent("G"))
	p.waitJS(`document.querySelector('#waterfall [data-seq="10000"][data-loaded="1"]') && document.querySelector('#detail .seqbig')?.textContent === '#10000'`)
	right := eval[float64](p, `(() => { const b = document.querySelector('#waterfall [data-seq="10000"] .wf-bar').getBoundingClientRect(), tr = document.querySelector('#waterfall [data-seq="10000"] .wf-track').getBoundingClientRect(); return (b.right - tr.left) / tr.width; })()`)
	if right < 0.99 {
		t.Fatalf("the last step ends at %.3f of the axis", right)
	}
	if rows := eval[int](p, `document.querySelectorAll('#waterfall .tl-row').length`); rows > 120 {
		t.Fatalf("%d rows after jumping to the end", rows)
	}
	if got := eval[string](p, `location.hash`); !strings.Contains(got, "/10000") || !strings.Contains(got, "tab=time") {
		t.Fatalf("hash %q", got)
	}
	p.screenshot("waterfall-end")
}
