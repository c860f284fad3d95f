package dashboard_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
)

// metricsDouble answers GET /v1/metrics with the contract of the metrics
// API (being built in parallel; this double lives only in the test): one
// series per value of the split key, hourly points. It records the
// queries it got.
type metricsDouble struct {
	mu      sync.Mutex
	queries []url.Values
}

func (m *metricsDouble) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/metrics" {
			next.ServeHTTP(w, r)
			return
		}
		q := r.URL.Query()
		m.mu.Lock()
		m.queries = append(m.queries, q)
		m.mu.Unlock()
		from, _ := time.Parse(time.RFC3339, q.Get("from"))
		keys := []string{""}
		if q.Get("split") != "" {
			keys = []string{"eu", "us"}
		}
		var series []map[string]any
		for i, k := range keys {
			var pts []map[string]any
			for j := range 12 {
				var eval any = 0.5 + float64(j)/40
				if j == 3 {
					eval = nil
				}
				pts = append(pts, map[string]any{"t": from.Add(time.Duration(j*12) * time.Hour).Format(time.RFC3339), "runs": 3 + j + i, "runs_failed": j % 2, "steps": 30 + j,
					"errors": j % 3, "error_rate": float64(j%3) / 30, "input_tokens": 1000 * (j + 1), "output_tokens": 200 * (j + 1), "cost": 0.01 * float64(j+i+1),
					"latency_p50_ms": 200 + 10*j, "latency_p95_ms": 600 + 20*j, "latency_p99_ms": 900 + 30*j, "eval_score_avg": eval})
			}
			series = append(series, map[string]any{"key": k, "points": pts})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"bucket": q.Get("bucket"), "from": q.Get("from"), "to": q.Get("to"), "agent": q.Get("agent"), "split": q.Get("split"), "series": series})
	})
}

// The agent page charts runs, latency percentiles, tokens, cost, error
// rate and eval scores from the metrics API, one line per value of a
// metadata key; a server without the API says so.
func TestBrowserAgentCharts(t *testing.T) {
	md := &metricsDouble{}
	e := newEnvWith(t, envOptions{agents: []*stepwise.Agent{chatAgent()}, wrap: md.wrap})
	runUntil(t, e, "chat", "hi", steptype.RunCompleted)
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/#/a/chat"))
	p.waitJS(`document.querySelectorAll('svg.chart').length === 6`)
	p.do(chromedp.SendKeys(chromedp.ID("chart-split"), "region"))
	p.waitJS(`document.querySelector('svg.chart[data-chart="runs"] polyline[data-series="us"]')`)
	charts := eval[[]string](p, `[...document.querySelectorAll('svg.chart')].map((s) => s.dataset.chart + ':' + s.querySelectorAll('polyline').length)`)
	if got := strings.Join(charts, ","); got != "runs:2,latency:6,tokens:2,cost:2,errors:2,evals:2" {
		t.Fatalf("charts and lines: %s", got)
	}
	// The eval line skips the bucket without a score.
	if n := eval[int](p, `document.querySelectorAll('svg.chart[data-chart="evals"] polyline[data-series="eu"]')[0].getAttribute('points').split(' ').length`); n != 11 {
		t.Fatalf("eval points %d, want 11", n)
	}
	if got := eval[string](p, `document.querySelector('svg.chart[data-chart="runs"] circle title').textContent`); !strings.Contains(got, "eu") || !strings.Contains(got, "3") {
		t.Fatalf("point tooltip %q", got)
	}
	p.screenshot("agent-charts")
	md.mu.Lock()
	last := md.queries[len(md.queries)-1]
	md.mu.Unlock()
	from, err1 := time.Parse(time.RFC3339, last.Get("from"))
	to, err2 := time.Parse(time.RFC3339, last.Get("to"))
	if last.Get("agent") != "chat" || last.Get("split") != "region" || last.Get("bucket") != "hour" || err1 != nil || err2 != nil || to.Sub(from).Round(time.Hour) != 7*24*time.Hour {
		t.Fatalf("query %v", last)
	}
	p.do(chromedp.SetValue(chromedp.ID("chart-range"), "30d"))
	eval[chromedp.Void](p, `document.getElementById('chart-range').dispatchEvent(new Event('change'))`)
	p.waitJS(`true`)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		md.mu.Lock()
		got := md.queries[len(md.queries)-1].Get("bucket")
		md.mu.Unlock()
		if got == "day" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 days asked with bucket %q", got)
		}
	}

	// Without the metrics API, the page says so.
	plain := newEnv(t, []*stepwise.Agent{chatAgent()}, nil)
	p.do(chromedp.Navigate(plain.url + "/#/a/chat"))
	p.waitJS(`/metrics API/.test(document.querySelector('.charts')?.textContent || '')`)
}
