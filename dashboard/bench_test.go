package dashboard_test

import (
	"testing"

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
