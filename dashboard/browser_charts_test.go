package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/stepwise-run/stepwise"
	evalpkg "github.com/stepwise-run/stepwise/eval"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// metricsRecorder records the queries the page sends to GET /v1/metrics
// and passes them to the real API.
type metricsRecorder struct {
	mu      sync.Mutex
	queries []url.Values
}

func (m *metricsRecorder) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/metrics" {
			m.mu.Lock()
			m.queries = append(m.queries, r.URL.Query())
			m.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

func (m *metricsRecorder) last() url.Values {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.queries) == 0 {
		return url.Values{}
	}
	return m.queries[len(m.queries)-1]
}

// olderServer answers GET /v1/metrics like a server without the metrics
// API (404 problem).
func olderServer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/metrics" {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"type":"about:blank","title":"Not Found","status":404,"code":"route_not_found"}`))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// The agent page charts runs, latency percentiles, tokens, cost, error
// rate and eval scores from the metrics API, one line per value of a
// metadata key; a server without the API says so.
func TestBrowserAgentCharts(t *testing.T) {
	md := &metricsRecorder{}
	e := newEnvWith(t, envOptions{agents: []*stepwise.Agent{chatAgent()}, wrap: md.wrap})
	// Runs in sessions tagged by region, through the engine: the charts
	// read the real metrics API of the server.
	for i, region := range []string{"eu", "us", "eu"} {
		r, err := e.eng.StartRun(context.Background(), stepwise.StartParams{Agent: "chat", Input: fmt.Sprintf("hi %d", i), Metadata: map[string]any{"region": region}})
		if err != nil {
			t.Fatal(err)
		}
		waitRun(t, e, r.ID, steptype.RunCompleted)
		if _, err := evalpkg.Score(context.Background(), e.st, evalpkg.ScoreParams{TargetKind: store.TargetRun, TargetID: r.ID, Score: 0.5 + float64(i)/10}); err != nil {
			t.Fatal(err)
		}
	}
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/#/a/chat"))
	p.waitJS(`document.querySelectorAll('svg.chart').length === 6`)
	p.do(chromedp.SendKeys(chromedp.ID("chart-split"), "region"))
	p.waitJS(`document.querySelector('svg.chart[data-chart="runs"] polyline[data-series="us"]')`)
	charts := eval[[]string](p, `[...document.querySelectorAll('svg.chart')].map((s) => s.dataset.chart + ':' + s.querySelectorAll('polyline').length)`)
	if got := strings.Join(charts, ","); got != "runs:2,latency:6,tokens:2,cost:2,errors:2,evals:2" {
		t.Fatalf("charts and lines: %s", got)
	}
	// Every run counted: the runs series of the split sum to the three runs.
	total := eval[int](p, `[...document.querySelectorAll('svg.chart[data-chart="runs"] circle title')].map((t) => +t.textContent.split(' · ').pop()).reduce((a, b) => a + b, 0)`)
	if total != 3 {
		t.Fatalf("runs charted %d, want 3", total)
	}
	p.screenshot("agent-charts")
	last := md.last()
	from, err1 := time.Parse(time.RFC3339, last.Get("from"))
	to, err2 := time.Parse(time.RFC3339, last.Get("to"))
	if last.Get("agent") != "chat" || last.Get("split") != "region" || last.Get("bucket") != "hour" || err1 != nil || err2 != nil || to.Sub(from).Round(time.Hour) != 7*24*time.Hour {
		t.Fatalf("query %v", last)
	}
	p.do(chromedp.SetValue(chromedp.ID("chart-range"), "30d"))
	eval[chromedp.Void](p, `document.getElementById('chart-range').dispatchEvent(new Event('change'))`)
	p.waitJS(`true`)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got := md.last().Get("bucket")
		if got == "day" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 days asked with bucket %q", got)
		}
	}

	// Without the metrics API, the page says so.
	plain := newEnvWith(t, envOptions{agents: []*stepwise.Agent{chatAgent()}, wrap: olderServer})
	p.do(chromedp.Navigate(plain.url + "/#/a/chat"))
	p.waitJS(`/metrics API/.test(document.querySelector('.charts')?.textContent || '')`)
}
