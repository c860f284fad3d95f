package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
)

// hostile is HTML and JavaScript that must show as text, never run.
const hostile = `<img src=x onerror="window.__pwned='img'"><script>window.__pwned='script'</script>`

// onePixelPNG is a 1×1 PNG, served as a screenshot attachment.
var onePixelPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xff\xff?\x00\x05\xfe\x02\xfe\xa75\x81\x84\x00\x00\x00\x00IEND\xaeB`\x82")

// observationDouble serves the step endpoints of evals, attachments and
// events (another engineer's work) with hostile names, so the page's
// rendering of them is tested now.
func observationDouble() http.Handler {
	mux := http.NewServeMux()
	write := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /v1/steps/{id}/attachments", func(w http.ResponseWriter, r *http.Request) {
		write(w, map[string]any{"attachments": []map[string]any{{"id": "att1", "name": `<img src=x onerror="window.__pwned='attachment'">.png`, "kind": "screenshot", "content_type": "image/png", "size": len(onePixelPNG)}}})
	})
	mux.HandleFunc("GET /v1/steps/{id}/evals", func(w http.ResponseWriter, r *http.Request) {
		write(w, map[string]any{"evals": []map[string]any{{"name": "<b>eval</b>", "score": 0.25, "label": `<svg onload="window.__pwned='eval'">`, "source": "user"}}})
	})
	mux.HandleFunc("GET /v1/steps/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		write(w, map[string]any{"events": []map[string]any{{"type": "http_request", "name": hostile, "payload": map[string]any{"body": hostile}}}})
	})
	mux.HandleFunc("GET /v1/attachments/att1/content", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(onePixelPNG)
	})
	return mux
}

// Step content, tool names, state annotations, titles, agent names, evals,
// events and attachment names full of HTML are shown as text everywhere; no
// script of theirs runs.
func TestBrowserHostileContentEscaped(t *testing.T) {
	e := newEnv(t, nil, observationDouble())
	ctx := context.Background()
	sess, err := e.eng.CreateSession(ctx, `<svg onload="window.__pwned='agent'">`, `<img src=x onerror="window.__pwned='title'">`)
	if err != nil {
		t.Fatal(err)
	}
	toolName := `"><img src=x onerror="window.__pwned='tool'">`
	steps := []*stepwise.Step{
		{Kind: steptype.KindUser, Name: "user", Role: steptype.RoleUser, Content: hostile},
		{Kind: steptype.KindLLM, Name: `<i onmouseover="window.__pwned='name'">llm</i>`, Role: steptype.RoleAssistant, Content: hostile, Reasoning: hostile,
			ToolCalls:   []steptype.ToolCall{{ID: "c1", Name: toolName, Arguments: json.RawMessage(`{"html":"<iframe src=\"javascript:window.__pwned='iframe'\"></iframe>"}`)}},
			Annotations: steptype.Annotations{State: hostile, Goal: hostile, Action: hostile}},
		{Kind: steptype.KindTool, Name: "tools", Role: steptype.RoleTool, ToolCallID: "c1", ToolName: toolName, Content: hostile,
			Metadata: map[string]any{"attachments": []any{map[string]any{"name": `<script>window.__pwned='meta-attachment'</script>`, "content_type": "text/html"}}}},
		{Kind: steptype.KindError, Name: "llm", Status: steptype.StepFailed, Error: &steptype.StepError{Message: hostile, Cause: hostile, Class: steptype.ErrorPermanent}},
	}
	if _, err := e.eng.Ingest(ctx, stepwise.IngestParams{SessionID: sess.ID, Steps: steps}); err != nil {
		t.Fatal(err)
	}
	p := newPage(t)
	check := func(where string) {
		t.Helper()
		if v := eval[string](p, `String(window.__pwned ?? '')`); v != "" {
			t.Fatalf("%s: hostile script ran (window.__pwned = %q)", where, v)
		}
		if n := eval[int](p, `document.querySelectorAll('img[src="x"], script:not([src]), iframe, [onerror], [onload], [onmouseover]').length`); n != 0 {
			t.Fatalf("%s: %d hostile elements in the DOM", where, n)
		}
	}
	p.do(chromedp.Navigate(e.url + "/"))
	p.waitJS(`document.querySelector('table.sessions tbody tr[data-id]')`)
	if !strings.Contains(eval[string](p, `document.querySelector('table.sessions').innerText`), `<img src=x onerror="window.__pwned='title'">`) {
		t.Fatal("the hostile title is not shown as text in the list")
	}
	check("sessions list")

	for seq := 1; seq <= len(steps); seq++ {
		p.do(chromedp.Navigate(e.url + "/#/s/" + sess.ID + "/" + string(rune('0'+seq))))
		p.waitJS(`document.querySelector('#detail .seqbig')?.textContent === '#` + string(rune('0'+seq)) + `'`)
		check("step " + string(rune('0'+seq)))
	}
	// Step 3 (the tool result): tool name, metadata attachment, attachment
	// double (with its image), eval and event all shown as text.
	p.do(chromedp.Navigate(e.url + "/#/s/" + sess.ID + "/3"))
	p.waitJS(`document.querySelector('#detail .attachment img') && document.querySelector('#detail .event') && document.querySelector('#detail button[data-action="score"]')`)
	p.do(chromedp.Click(chromedp.CSS(`#detail .event summary`)))
	detail := eval[string](p, `document.querySelector('#detail').innerText`)
	for _, want := range []string{toolName, `<img src=x onerror="window.__pwned='attachment'">.png`, `<script>window.__pwned='meta-attachment'</script>`, `<svg onload="window.__pwned='eval'">`, "<b>eval</b>", hostile} {
		if !strings.Contains(detail, want) {
			t.Fatalf("step detail does not show %q as text:\n%s", want, detail)
		}
	}
	if src := eval[string](p, `document.querySelector('#detail .attachment img').src`); !strings.HasPrefix(src, "blob:") {
		t.Fatalf("attachment image src %q, want a blob: URL fetched with the token", src)
	}
	check("step 3 with observations")
	p.screenshot("hostile-step")

	// The graph: node labels (state annotations) and tool names as text.
	p.do(chromedp.Navigate(e.url + "/#/s/" + sess.ID + "/graph"))
	p.waitJS(`document.querySelectorAll('svg.graph .node').length >= 3`)
	for i := range 3 {
		p.do(chromedp.Click(chromedp.CSS(`svg.graph .node:nth-child(` + string(rune('1'+i)) + `)`)))
		p.waitJS(`document.querySelector('#node-detail .node-steps li')`)
		check("graph node")
	}
	if !strings.Contains(eval[string](p, `document.querySelector('svg.graph').textContent`), "<img src=x") {
		t.Fatal("graph labels lost the hostile text")
	}
	p.screenshot("hostile-graph")
	p.do(chromedp.Navigate(e.url + "/#/a/" + "%3Csvg%20onload%3D%22window.__pwned%3D'agent'%22%3E"))
	p.waitJS(`document.querySelector('.kpis') || document.querySelector('.overview .error')`)
	check("agent page")
}
