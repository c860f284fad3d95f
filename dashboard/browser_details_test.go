package dashboard_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
)

// TestBrowserDetailsThatMislead: the agent page's latency chart says it
// plots run latency; the Time view shows a sub-millisecond step's
// duration; an image result shows no base64 above its attachment; Compare
// marks the words that differ between the two sides.
func TestBrowserDetailsThatMislead(t *testing.T) {
	e := newEnv(t, []*stepwise.Agent{chatAgent()}, nil)
	ctx := context.Background()
	run := runUntil(t, e, "chat", "What is 6*7?", steptype.RunCompleted)
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/#/a/chat"))
	p.waitJS(`document.querySelector('svg.chart[data-chart="latency"]')`)
	if got := eval[string](p, `document.querySelector('svg.chart[data-chart="latency"]').closest('figure, section, div').textContent`); !strings.Contains(got, "Run latency") || strings.Contains(got, "Step latency") {
		t.Errorf("latency chart: %.80q, want it named run latency", got)
	}

	sess, err := e.eng.CreateSession(ctx, "elsewhere", "Screenshots")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	png := strings.Repeat("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk", 40)
	out, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "image", "mimeType": "image/png", "data": png}}})
	if _, err := e.eng.Ingest(ctx, stepwise.IngestParams{SessionID: sess.ID, Steps: []*stepwise.Step{
		{Kind: steptype.KindUser, Name: "user", Role: steptype.RoleUser, Content: "Take a screenshot", CreatedAt: t0,
			Metrics: steptype.Metrics{StartedAt: t0, FinishedAt: t0}},
		{Kind: steptype.KindTool, Name: "tools", Role: steptype.RoleTool, ToolCallID: "c1", ToolName: "screenshot", Content: "[image image/png, 2400 bytes]", Outputs: out,
			CreatedAt: t0, Metrics: steptype.Metrics{StartedAt: t0, FinishedAt: t0.Add(300 * time.Microsecond), Duration: 300 * time.Microsecond}},
	}}); err != nil {
		t.Fatal(err)
	}
	p.do(chromedp.Navigate(e.url + "/#/s/" + sess.ID + "/2?tab=time"))
	p.waitJS(`document.querySelector('#waterfall [data-seq="2"][data-loaded="1"]')`)
	if got := eval[string](p, `document.querySelector('#waterfall [data-seq="2"] .dur').textContent`); got != "<1ms" {
		t.Errorf("the Time view's duration of a 300 µs step: %q, want <1ms", got)
	}
	p.waitJS(`document.querySelector('#detail .seqbig')?.textContent === '#2'`)
	if got := eval[string](p, `[...document.querySelectorAll('#detail .d-sec')].filter((s) => !s.matches('details')).map((s) => s.innerText).join('\n')`); strings.Contains(got, png[:60]) || !strings.Contains(got, "see Attachments") {
		t.Errorf("the image result shows its base64:\n%.400s", got)
	}

	// Compare: a retry whose answer differs from the original's.
	fork, err := e.eng.Fork(ctx, stepwise.ForkParams{SessionID: run.SessionID, At: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.eng.Ingest(ctx, stepwise.IngestParams{SessionID: fork.ID, Steps: []*stepwise.Step{
		{Kind: steptype.KindLLM, Name: "llm", Role: steptype.RoleAssistant, Content: "The answer is 43."},
	}}); err != nil {
		t.Fatal(err)
	}
	p.do(chromedp.Navigate(e.url + "/#/compare?a=" + run.SessionID + "&b=" + fork.ID))
	p.waitJS(`document.querySelector('.cmp-table tr.diverged')`)
	got := eval[string](p, `[...document.querySelectorAll('.cmp-table tr.diverged mark')].map((m) => m.className + ':' + m.textContent).join(' ')`)
	if got != "cmp-del:42. cmp-ins:43." {
		t.Errorf("compare marks %q, want the differing words marked on each side", got)
	}
	p.screenshot("compare-diff")
}
