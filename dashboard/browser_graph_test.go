package dashboard_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
)

// The workflow graph of a long session: states clustered, loops drawn;
// clicking a state lists its steps, and a step link opens it.
func TestBrowserGraphClickNode(t *testing.T) {
	e := newEnv(t, nil, nil)
	id := seedLong(t, e, 2000)
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/#/s/" + id + "/graph"))
	p.waitJS(`document.querySelectorAll('svg.graph .node').length > 3`)
	nodes := eval[int](p, `document.querySelectorAll('svg.graph .node').length`)
	loops := eval[int](p, `document.querySelectorAll('svg.graph .edge.back, svg.graph .edge.self').length`)
	if nodes > 40 || loops == 0 {
		t.Fatalf("%d nodes, %d loop edges for a 2,000-step crawl over 5 annotated states", nodes, loops)
	}
	if eval[int](p, `document.querySelectorAll('svg.graph .node.repeated').length`) == 0 {
		t.Fatal("no repeated state highlighted")
	}
	p.screenshot("graph-session")
	// Click the tool state "search" and list its steps.
	p.do(chromedp.Click(chromedp.CSS(`svg.graph .node[aria-label^="tools: search"]`)))
	p.waitJS(`document.querySelectorAll('#node-detail .node-steps li').length > 10`)
	side := strings.ToLower(eval[string](p, `document.querySelector('#node-detail').innerText`))
	for _, want := range []string{"search", "visits", "leads to", "comes from", "steps ("} {
		if !strings.Contains(side, want) {
			t.Fatalf("node panel lacks %q:\n%s", want, side)
		}
	}
	p.screenshot("graph-node")
	// A step of the node opens in the session timeline.
	seq := eval[string](p, `document.querySelector('#node-detail .node-steps a').textContent.replace('#', '')`)
	p.do(chromedp.Click(chromedp.CSS(`#node-detail .node-steps a`)))
	p.waitJS(`document.querySelector('#detail .seqbig')?.textContent === '#` + seq + `'`)
	if got := eval[string](p, `document.querySelector('#detail .d-name').textContent`); got != "tools" {
		t.Fatalf("opened step %s is %q", seq, got)
	}
	// Keyboard: a state is focusable and Enter opens it.
	p.do(chromedp.Navigate(e.url + "/#/s/" + id + "/graph"))
	p.waitJS(`document.querySelector('svg.graph .node')`)
	p.do(chromedp.Focus(chromedp.CSS(`svg.graph .node`)), chromedp.KeyEvent("\r"))
	p.waitJS(`document.querySelector('#node-detail .node-steps li')`)
}

// The agent overview and the agent's merged graph over several sessions.
func TestBrowserAgentOverviewAndGraph(t *testing.T) {
	e := newEnv(t, []*stepwise.Agent{chatAgent()}, nil)
	for range 3 {
		runUntil(t, e, "chat", "What is six times seven?", steptype.RunCompleted)
	}
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/#/agents"))
	p.waitJS(`document.querySelector('.agent-card')`)
	p.screenshot("agents")
	p.do(chromedp.Click(chromedp.CSS(`.agent-card`)))
	// The overview and the recent sessions are two requests: wait for both.
	p.waitJS(`document.querySelector('.kpis') && document.querySelector('.overview table') && document.querySelector('ul.recent')`)
	text := strings.ToLower(eval[string](p, `document.querySelector('#main').innerText`))
	for _, want := range []string{"runs", "error rate", "repeated-step ratio", "latency per step kind", "p99", "recent sessions"} {
		if !strings.Contains(text, want) {
			t.Fatalf("overview lacks %q:\n%s", want, text)
		}
	}
	if got := eval[string](p, `document.querySelector('.kpi .kpi-v').textContent`); got != "3" {
		t.Fatalf("runs KPI %q, want 3", got)
	}
	p.screenshot("agent-overview")
	p.do(chromedp.Click(chromedp.CSS(`a.button[href$="/graph"]`)))
	p.waitJS(`document.querySelectorAll('svg.graph .node').length === 3`)
	if !strings.Contains(eval[string](p, `document.querySelector('.meta').innerText`), "3 sessions") {
		t.Fatal("merged graph does not say it covers 3 sessions")
	}
	p.do(chromedp.Click(chromedp.CSS(`svg.graph .node[aria-label^="llm"]`)))
	p.waitJS(`document.querySelectorAll('#node-detail .node-steps li').length === 6`)
	p.screenshot("agent-graph")
}

// The dark theme applies on toggle and is remembered.
func TestBrowserThemeToggle(t *testing.T) {
	e := newEnv(t, nil, nil)
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/"))
	p.waitJS(`document.querySelector('table.sessions')`)
	p.do(chromedp.Click(chromedp.ID("theme-btn")), chromedp.Click(chromedp.ID("theme-btn")))
	if got := eval[string](p, `document.documentElement.dataset.theme`); got != "dark" {
		t.Fatalf("theme %q after two toggles, want dark", got)
	}
	bg := eval[string](p, `getComputedStyle(document.body).backgroundColor`)
	if bg != "rgb(15, 18, 23)" {
		t.Fatalf("dark background %s", bg)
	}
	p.do(chromedp.Reload())
	p.waitJS(`document.documentElement.dataset.theme === 'dark'`)
	p.screenshot("sessions-dark")
}

// labelOverlapsJS lists pairs of edge labels whose drawn boxes intersect,
// and labels drawn over a state's box.
const labelOverlapsJS = `(() => {
  const r = (el) => { const b = el.getBBox(); return [b.x, b.y, b.x + b.width, b.y + b.height]; };
  const hit = (a, b) => a[0] < b[2] - 0.5 && b[0] < a[2] - 0.5 && a[1] < b[3] - 0.5 && b[1] < a[3] - 0.5;
  const labels = [...document.querySelectorAll('svg.graph .elabel')].map((el) => ({ t: el.textContent, b: r(el) }));
  const nodes = [...document.querySelectorAll('svg.graph .node')].map((el) => {
    const m = /translate\(([-\d.]+),([-\d.]+)\)/.exec(el.getAttribute('transform'));
    const rect = el.querySelector('rect');
    return { t: el.getAttribute('aria-label'), b: [+m[1], +m[2], +m[1] + +rect.getAttribute('width'), +m[2] + +rect.getAttribute('height')] };
  });
  const out = [];
  for (let i = 0; i < labels.length; i++) {
    for (let j = i + 1; j < labels.length; j++) if (hit(labels[i].b, labels[j].b)) out.push(labels[i].t + ' / ' + labels[j].t);
    for (const n of nodes) if (hit(labels[i].b, n.b)) out.push(labels[i].t + ' over ' + n.t);
  }
  return JSON.stringify({ labels: labels.length, out });
})()`

// Edge labels are placed so that none overlaps another or a state, and a
// sub-agent's states are framed as a labelled cluster.
func TestBrowserGraphLabelsAndSubAgentCluster(t *testing.T) {
	e := newEnv(t, nil, nil)
	id := seedLong(t, e, 2000)
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/#/s/" + id + "/graph"))
	p.waitJS(`document.querySelectorAll('svg.graph .node').length > 3 && document.querySelector('svg.graph .elabel')`)
	var res struct {
		Labels int      `json:"labels"`
		Out    []string `json:"out"`
	}
	if err := jsonUnmarshal(eval[string](p, labelOverlapsJS), &res); err != nil {
		t.Fatal(err)
	}
	if res.Labels < 5 || len(res.Out) > 0 {
		t.Fatalf("%d edge labels, overlapping: %q", res.Labels, res.Out)
	}
	cl := eval[string](p, `document.querySelector('svg.graph .cluster .clabel')?.textContent || ''`)
	if !strings.HasPrefix(cl, "sub-agent") {
		t.Fatalf("sub-agent cluster label %q", cl)
	}
	// Every hop-1 state is inside its cluster's frame.
	inside := eval[bool](p, `(() => {
		const f = document.querySelector('svg.graph .cluster rect').getBBox();
		const sub = [...document.querySelectorAll('svg.graph .node')].filter((n) => n.getAttribute('aria-label').startsWith('llm: ') && /Sub-agent|Done/.test(n.getAttribute('aria-label')));
		return sub.every((n) => { const b = n.getBBox(), m = n.getCTM(); const x = +/translate\(([-\d.]+)/.exec(n.getAttribute('transform'))[1], y = +/,([-\d.]+)\)/.exec(n.getAttribute('transform'))[1];
			return x >= f.x && y >= f.y && x + b.width <= f.x + f.width + 0.5 && y + b.height <= f.y + f.height + 0.5; });
	})()`)
	if !inside {
		t.Fatal("a sub-agent state lies outside its cluster")
	}
	p.screenshot("graph-labels-cluster")
}
