package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// contrastJS lists the text in the page whose contrast with its background
// is below WCAG AA: 4.5:1 for body text, 3:1 for large text (24 px, or
// 18.66 px bold). The text colour and the backgrounds under it (every
// ancestor's background-color, composited with its alpha and opacity) come
// from computed styles. Hidden, disabled and SVG text is skipped.
const contrastJS = `(() => {
  const ctx = document.createElement('canvas').getContext('2d');
  const parse = (c) => {
    // The canvas resolves any CSS colour (rgb, rgba, color-mix results) to RGBA.
    ctx.clearRect(0, 0, 1, 1); ctx.fillStyle = 'rgba(0,0,0,0)'; ctx.fillStyle = c; ctx.fillRect(0, 0, 1, 1);
    const d = ctx.getImageData(0, 0, 1, 1).data;
    return [d[0], d[1], d[2], d[3] / 255];
  };
  const over = (top, under) => [0, 1, 2].map((i) => top[i] * top[3] + under[i] * (1 - top[3])).concat(1);
  const lum = (c) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); }; return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const ratio = (a, b) => { const x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
  const bgOf = (el) => {
    const layers = [];
    for (let e = el; e && e.nodeType === 1; e = e.parentElement) {
      const cs = getComputedStyle(e);
      const c = parse(cs.backgroundColor);
      if (c[3] > 0) { layers.push(c); if (c[3] >= 1) break; }
    }
    let bg = [255, 255, 255, 1];
    if (!layers.length || layers[layers.length - 1][3] < 1) bg = parse(getComputedStyle(document.body).backgroundColor);
    for (let i = layers.length - 1; i >= 0; i--) bg = over(layers[i], bg);
    return bg;
  };
  const bad = [];
  let checked = 0;
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const seen = new Set();
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (!n.data.trim()) continue;
    const el = n.parentElement;
    if (!el || seen.has(el) || el.closest('svg, [hidden], option, select, .tip') || el.closest('button:disabled, :disabled')) continue;
    seen.add(el);
    const r = el.getBoundingClientRect();
    if (!r.width || !r.height || !el.getClientRects().length) continue;
    const cs = getComputedStyle(el);
    if (cs.visibility === 'hidden' || parseFloat(cs.opacity) === 0) continue;
    let op = 1;
    for (let e = el; e && e.nodeType === 1; e = e.parentElement) op *= parseFloat(getComputedStyle(e).opacity);
    const bg = bgOf(el);
    const fg = parse(cs.color);
    fg[3] *= op;
    const c = over(fg, bg);
    const size = parseFloat(cs.fontSize), bold = parseInt(cs.fontWeight, 10) >= 700;
    const need = size >= 24 || (size >= 18.66 && bold) ? 3 : 4.5;
    const got = ratio(c, bg);
    checked++;
    if (got < need - 0.005) bad.push(got.toFixed(2) + ':1 < ' + need + ' "' + n.data.trim().slice(0, 40) + '" (' + el.tagName.toLowerCase() + '.' + (el.className.baseVal ?? el.className) + ', ' + cs.color + ' on rgb(' + bg.slice(0, 3).map(Math.round).join(',') + '))');
  }
  return JSON.stringify({ checked, bad });
})()`

type contrastResult struct {
	Checked int      `json:"checked"`
	Bad     []string `json:"bad"`
}

// sizes are the viewports every page is checked at.
var sizes = []struct {
	name string
	w, h int64
}{{"desktop", 1440, 900}, {"phone", 390, 844}}

// checkPage checks the page on screen at every size and theme: text
// contrast (AA), no horizontal overflow, no literal markdown backticks, a
// screenshot of each. ready is a JavaScript condition the page meets when
// loaded.
func checkPage(t *testing.T, p *page, name, ready string) {
	t.Helper()
	for _, sz := range sizes {
		p.do(chromedp.EmulateViewport(sz.w, sz.h))
		for _, theme := range []string{"light", "dark"} {
			eval[chromedp.Void](p, `document.documentElement.dataset.theme = '`+theme+`'`)
			p.waitJS(ready)
			// Let layout settle after the resize and theme change.
			p.waitJS(`new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))`)
			var res contrastResult
			raw := eval[string](p, contrastJS)
			if err := jsonUnmarshal(raw, &res); err != nil {
				t.Fatal(err)
			}
			if res.Checked < 5 {
				t.Fatalf("%s %s %s: only %d text elements checked", name, sz.name, theme, res.Checked)
			}
			if len(res.Bad) > 0 {
				t.Errorf("%s %s %s: %d text elements below AA contrast:\n%s", name, sz.name, theme, len(res.Bad), strings.Join(res.Bad, "\n"))
			}
			if over := eval[int](p, `document.documentElement.scrollWidth - window.innerWidth`); over > 0 {
				culprit := eval[string](p, `[...document.querySelectorAll('body *')].filter((e) => e.getBoundingClientRect().right > window.innerWidth + 1 && !e.closest('.table-wrap, .graph-canvas, pre, .timeline')).slice(0, 3).map((e) => e.tagName + '.' + (e.className.baseVal ?? e.className)).join(', ')`)
				t.Errorf("%s %s %s: the page overflows horizontally by %d px (%s)", name, sz.name, theme, over, culprit)
			}
			if txt := eval[string](p, `document.body.innerText`); strings.Contains(txt, "`") {
				i := strings.Index(txt, "`")
				t.Errorf("%s %s %s: literal backtick in %q", name, sz.name, theme, txt[max(0, i-40):min(len(txt), i+40)])
			}
			p.screenshot(fmt.Sprintf("%s-%s-%s", name, sz.name, theme))
		}
	}
	p.do(chromedp.EmulateViewport(1440, 900))
}

// Every page, at 1440×900 and 390×844, in the light and dark themes: AA
// contrast for all text, no horizontal overflow, no literal backticks.
func TestBrowserEveryPageContrastAndLayout(t *testing.T) {
	chat := chatAgent()
	chat.Description = "Answers with the `calc` tool."
	e := newEnv(t, []*stepwise.Agent{chat, askerAgent()}, nil)
	run := runUntil(t, e, "chat", "What is `6*7`?", steptype.RunCompleted)
	runUntil(t, e, "asker", "Print", steptype.RunWaiting)
	fork, err := e.eng.Fork(context.Background(), stepwise.ForkParams{SessionID: run.SessionID, At: 2})
	if err != nil {
		t.Fatal(err)
	}
	long := seedLong(t, e, 400)
	p := newPage(t)
	pages := []struct{ name, hash, ready string }{
		{"sessions", "#/", `document.querySelectorAll('table.sessions tbody tr[data-id]').length === 4`},
		{"session", "#/s/" + run.SessionID + "/2", `document.querySelector('#detail .model-request')?.dataset.request === 'rebuilt'`},
		{"session-long", "#/s/" + long, `document.querySelector('#timeline [data-seq="1"][data-loaded="1"]') && document.querySelector('#detail .seqbig')`},
		{"waterfall", "#/s/" + long + "?tab=time", `document.querySelector('#waterfall [data-seq="2"][data-loaded="1"] .wf-bar')`},
		{"fork", "#/s/" + fork.ID, `document.querySelector('#detail .seqbig') && /inherited/.test(document.querySelector('.meta').textContent)`},
		{"fork-tree", "#/s/" + fork.ID + "?tab=forks", `document.querySelectorAll('.fork-tree li').length === 2`},
		{"session-graph", "#/s/" + run.SessionID + "/graph", `document.querySelector('svg.graph .node')`},
		{"search", "#/search?q=item", `document.querySelector('table.steps-found tbody tr[data-step]')`},
		{"agents", "#/agents", `document.querySelector('.agent-card')`},
		{"agent", "#/a/chat", `document.querySelector('.kpis')`},
		{"agent-graph", "#/a/chat/graph", `document.querySelector('svg.graph .node')`},
		{"inbox", "#/inputs", `document.querySelector('.input-card')`},
		{"experiments", "#/experiments", `!document.querySelector('#main .loading')`},
		{"compare", "#/compare?a=" + run.SessionID + "&b=" + fork.ID, `document.querySelector('.cmp-table tbody tr')`},
	}
	for _, pg := range pages {
		p.do(chromedp.Navigate(e.url + "/" + pg.hash))
		p.waitJS(pg.ready)
		checkPage(t, p, pg.name, pg.ready)
	}
}

// An empty database says how to start; a server that stops answering says
// so plainly, with a Retry that recovers when it is back.
func TestBrowserEmptyAndServerDown(t *testing.T) {
	var down atomic.Bool
	e := newEnvWith(t, envOptions{wrap: func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if down.Load() && strings.HasPrefix(r.URL.Path, "/v1/") {
				// Drop the connection, as a stopped server would.
				if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
					if tc, ok := c.(*net.TCPConn); ok {
						_ = tc.SetLinger(0)
					}
					_ = c.Close()
				}
				return
			}
			next.ServeHTTP(w, r)
		})
	}})
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/#/"))
	p.waitJS(`document.querySelector('.first-run')`)
	if got := eval[string](p, `document.querySelector('.first-run').innerText`); !strings.Contains(got, "stepwise demo") || strings.Contains(got, "No sessions match") {
		t.Fatalf("empty database says %q", got)
	}
	if !eval[bool](p, `[...document.querySelectorAll('.first-run code')].some((c) => c.textContent === 'stepwise demo')`) {
		t.Fatal("the command is not shown as code")
	}
	checkPage(t, p, "empty", `document.querySelector('.first-run')`)

	down.Store(true)
	p.do(chromedp.Navigate(e.url + "/#/agents"))
	p.waitJS(`document.querySelector('.down')`)
	got := eval[string](p, `document.querySelector('#main').innerText`)
	if !strings.Contains(got, "The Stepwise server is not answering") || strings.Contains(got, "Failed to fetch") {
		t.Fatalf("server down says %q", got)
	}
	p.screenshot("server-down")
	p.do(chromedp.Navigate(e.url + "/#/"))
	p.waitJS(`document.querySelector('.down button[data-action="retry-load"]')`)
	checkPage(t, p, "server-down", `document.querySelector('.down')`)
	down.Store(false)
	p.do(chromedp.Click(chromedp.CSS(`.down button[data-action="retry-load"]`)))
	p.waitJS(`document.querySelector('.first-run') && !document.querySelector('.down')`)
}

// Truncated cells show their full text on hover and on keyboard focus; a
// session opens with a step selected; a fork's header says which numbers
// are its own.
func TestBrowserTruncationSelectionForkHeader(t *testing.T) {
	e := newEnv(t, []*stepwise.Agent{chatAgent()}, nil)
	long := strings.Repeat("a very long question about the catalogue ", 12) + "END"
	run := runUntil(t, e, "chat", long, steptype.RunCompleted)
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/#/s/" + run.SessionID))
	// Selected on open: step 1, its detail shown, the hash says so.
	p.waitJS(`document.querySelector('#detail .seqbig')?.textContent === '#1' && document.querySelector('#timeline .tl-row.sel[data-seq="1"][data-loaded="1"]')`)
	eval[chromedp.Void](p, `document.querySelector('#timeline [data-seq="1"] .sum').dispatchEvent(new MouseEvent('mouseover', { bubbles: true }))`)
	p.waitJS(`!document.getElementById('tip').hidden`)
	if got := eval[string](p, `document.getElementById('tip').textContent`); !strings.HasSuffix(got, "END") {
		t.Fatalf("tooltip %q", got)
	}
	p.screenshot("tooltip-hover")

	fork, err := e.eng.Fork(context.Background(), stepwise.ForkParams{SessionID: run.SessionID, At: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.eng.StartRun(context.Background(), stepwise.StartParams{Agent: "chat", SessionID: fork.ID, Input: "and again"}); err != nil {
		t.Fatal(err)
	}
	// The sessions list: a long title is cut, and shows in full on focus.
	if _, err := e.eng.CreateSession(context.Background(), "chat", long); err != nil {
		t.Fatal(err)
	}
	p.do(chromedp.Navigate(e.url + "/#/"))
	p.waitJS(`document.querySelectorAll('table.sessions tbody tr[data-id]').length === 3`)
	p.do(chromedp.Focus(chromedp.CSS(`table.sessions a.trunc[data-full$="END"]`)))
	p.waitJS(`!document.getElementById('tip').hidden && document.getElementById('tip').textContent.endsWith('END')`)
	p.screenshot("tooltip-focus")

	p.do(chromedp.Navigate(e.url + "/#/s/" + fork.ID))
	p.waitJS(`/completed/.test(document.querySelector('.status-slot').textContent) && document.querySelector('#detail .seqbig')`)
	// The fork's first own step is selected.
	if got := eval[string](p, `document.querySelector('#detail .seqbig').textContent`); got != "#3" {
		t.Fatalf("fork opened at %s, want #3", got)
	}
	head := eval[string](p, `document.querySelector('.meta').textContent`)
	fs, err := e.st.SessionGet(context.Background(), &store.SessionGetParams{ID: fork.ID})
	if err != nil || fs.LastSequence < 4 {
		t.Fatalf("fork %+v %v", fs, err)
	}
	for _, want := range []string{fmt.Sprintf("%d steps (2 inherited + %d own)", fs.LastSequence, fs.LastSequence-2), "own tokens", "own cost", "own time", "forked from the parent at #2"} {
		if !strings.Contains(head, want) {
			t.Fatalf("fork header %q lacks %q", head, want)
		}
	}
	if got := eval[string](p, `document.querySelector('#main h1.title').textContent`); !strings.HasPrefix(got, "fork of ") || strings.Contains(got, fork.ID) {
		t.Fatalf("fork named %q", got)
	}
	p.screenshot("fork-header")
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
