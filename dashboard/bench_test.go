package dashboard_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// BenchmarkFirstRender10k measures the time from navigating to a
// 10,000-step session to its first timeline rows on screen: page, scripts,
// the session and the first chunk of steps from the API, and rendering.
// ms-to-rows is measured in the page (performance.now() when the first
// loaded rows are in the DOM); ns/op adds the benchmark's navigation and
// polling overhead. Target: under 1 s.
func BenchmarkFirstRender10k(b *testing.B) {
	e := newEnv(b, nil, nil)
	id := seedLong(b, e, 10_000)
	p := newPage(b)
	url := e.url + "/#/s/" + id
	total := 0.0
	for b.Loop() {
		p.do(chromedp.Navigate("about:blank"))
		p.do(chromedp.Navigate(url))
		p.waitJS(`window.__stepwiseFirstRender`)
		total += eval[float64](p, `window.__stepwiseFirstRender`)
	}
	b.ReportMetric(total/float64(b.N), "ms-to-rows")
}

// BenchmarkScroll10k scrolls the timeline of a 10,000-step session from
// top to bottom, one step of 600 px per animation frame, and reports the
// mean and worst frame time measured in the page (requestAnimationFrame
// deltas, which include rendering the rows that came into view and
// fetching their chunks).
func BenchmarkScroll10k(b *testing.B) {
	e := newEnv(b, nil, nil)
	id := seedLong(b, e, 10_000)
	p := newPage(b)
	p.do(chromedp.Navigate(e.url + "/#/s/" + id))
	p.waitJS(`window.__stepwiseFirstRender`)
	mean, worst := scroll(b, p, "timeline")
	b.ReportMetric(mean, "ms/frame")
	b.ReportMetric(worst, "worst-ms/frame")
}

// scroll scrolls the element with id from top to bottom, 600 px per
// animation frame, b.N times; it returns the mean frame time and the worst
// one, measured in the page.
func scroll(b *testing.B, p *page, id string) (mean, worst float64) {
	for b.Loop() {
		p.do(chromedp.Evaluate[chromedp.Void](`(() => {
			const el = document.getElementById('` + id + `');
			el.scrollTop = 0;
			window.__scrollDone = false; window.__frames = [];
			let last = performance.now();
			const tick = (t) => {
				window.__frames.push(t - last); last = t;
				if (el.scrollTop + el.clientHeight >= el.scrollHeight - 1) { window.__scrollDone = true; return; }
				el.scrollTop += 600;
				requestAnimationFrame(tick);
			};
			requestAnimationFrame(tick);
		})()`))
		p.waitJSFor(`window.__scrollDone`, 10*time.Minute)
		fr := eval[[]float64](p, `window.__frames.slice(1)`)
		sum, mx := 0.0, 0.0
		for _, f := range fr {
			sum += f
			mx = max(mx, f)
		}
		mean += sum / float64(len(fr))
		worst = max(worst, mx)
	}
	return mean / float64(b.N), worst
}

// BenchmarkScrollWaterfall10k is BenchmarkScroll10k over the time view.
func BenchmarkScrollWaterfall10k(b *testing.B) {
	e := newEnv(b, nil, nil)
	id := seedLong(b, e, 10_000)
	p := newPage(b)
	p.do(chromedp.Navigate(e.url + "/#/s/" + id + "?tab=time"))
	p.waitJS(`document.querySelector('#waterfall [data-seq="2"][data-loaded="1"]')`)
	mean, worst := scroll(b, p, "waterfall")
	b.ReportMetric(mean, "ms/frame")
	b.ReportMetric(worst, "worst-ms/frame")
}
