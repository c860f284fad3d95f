package dashboard_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/performance"
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
	mean, worst, task := scroll(b, p, "timeline")
	b.ReportMetric(mean, "ms/frame")
	b.ReportMetric(worst, "worst-ms/frame")
	b.ReportMetric(task, "cpu-ms/frame")
}

// scroll scrolls the element with id from top to bottom, 600 px per
// animation frame, b.N times; it returns the mean frame time and the worst
// one, measured in the page, and the renderer's main-thread time per frame
// (Chromium's TaskDuration: scripts, style, layout, paint), which depends
// less on how busy the machine is than frame times do.
func scroll(b *testing.B, p *page, id string) (mean, worst, task float64) {
	p.do(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, performance.Enable, performance.EnableParams{TimeDomain: performance.EnableTimeDomainThreadTicks})
		return err
	}))
	taskNow := func() float64 {
		r, err := chromedp.Run(p.ctx, chromedp.Action[float64](func(ctx context.Context, t *chromedp.Target) (float64, error) {
			m, err := cdp.Call(ctx, t, performance.GetMetrics, cdp.Empty{})
			if err != nil {
				return 0, err
			}
			for _, x := range m.Metrics {
				if x.Name == "TaskDuration" {
					return x.Value * 1000, nil
				}
			}
			return 0, nil
		}))
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	frames := 0
	for b.Loop() {
		t0 := taskNow()
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
		task += taskNow() - t0
		fr := eval[[]float64](p, `window.__frames.slice(1)`)
		frames += len(fr) + 1
		sum, mx := 0.0, 0.0
		for _, f := range fr {
			sum += f
			mx = max(mx, f)
		}
		mean += sum / float64(len(fr))
		worst = max(worst, mx)
	}
	return mean / float64(b.N), worst, task / float64(frames)
}

// BenchmarkScrollWaterfall10k is BenchmarkScroll10k over the time view.
func BenchmarkScrollWaterfall10k(b *testing.B) {
	e := newEnv(b, nil, nil)
	id := seedLong(b, e, 10_000)
	p := newPage(b)
	p.do(chromedp.Navigate(e.url + "/#/s/" + id + "?tab=time"))
	p.waitJS(`document.querySelector('#waterfall [data-seq="2"][data-loaded="1"]')`)
	mean, worst, task := scroll(b, p, "waterfall")
	b.ReportMetric(mean, "ms/frame")
	b.ReportMetric(worst, "worst-ms/frame")
	b.ReportMetric(task, "cpu-ms/frame")
}
