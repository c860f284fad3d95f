package dashboard_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/stepwise-run/stepwise"
	evalpkg "github.com/stepwise-run/stepwise/eval"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/store"
)

// experimentDouble answers the experiment endpoints of server/observe.go
// with the same JSON, from the eval package over st: a test double until
// registerObservationAPI is part of the server's routes (then the real
// endpoints are shadowed by it, with identical answers).
func experimentDouble(st func() store.Store, next http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", next)
	write := func(w http.ResponseWriter, v any, err error) {
		if err != nil {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(map[string]any{"status": 404, "code": "not_found", "title": "Not Found", "detail": err.Error()})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /v1/experiments", func(w http.ResponseWriter, r *http.Request) {
		xs, err := st().ExperimentList(r.Context(), &store.ExperimentListParams{})
		write(w, map[string]any{"experiments": xs}, err)
	})
	mux.HandleFunc("GET /v1/datasets", func(w http.ResponseWriter, r *http.Request) {
		ds, err := st().DatasetList(r.Context(), &store.DatasetListParams{})
		write(w, map[string]any{"datasets": ds}, err)
	})
	mux.HandleFunc("GET /v1/experiments/compare", func(w http.ResponseWriter, r *http.Request) {
		c, err := evalpkg.Compare(r.Context(), st(), r.URL.Query().Get("a"), r.URL.Query().Get("b"))
		if err != nil {
			write(w, nil, err)
			return
		}
		write(w, map[string]any{"a": c.A, "b": c.B, "dataset": c.Dataset, "metrics": c.Metrics, "items": c.Items}, nil)
	})
	return mux
}

// solver answers each question with answers[question].
func solver(name string, answers map[string]string) *stepwise.Agent {
	var ut []scripted.UserTurn
	for q, a := range answers {
		ut = append(ut, scripted.UserTurn{Match: q, Turns: []scripted.Turn{{Text: a}}})
	}
	return &stepwise.Agent{Name: name, Model: scripted.New(name, scripted.Script{UserTurns: ut})}
}

// The Experiments page lists two experiments over one dataset; picking
// them as A and B shows the metric rows (exact_match won by B) and the
// item rows (the item whose score changed marked).
func TestBrowserExperimentsCompare(t *testing.T) {
	var e *env
	e = newEnvWith(t, envOptions{
		agents: []*stepwise.Agent{solver("v1", map[string]string{"q1": "4", "q2": "5"}), solver("v2", map[string]string{"q1": "4", "q2": "6"})},
		wrap:   func(h http.Handler) http.Handler { return experimentDouble(func() store.Store { return e.st }, h) },
	})
	ctx := t.Context()
	if _, err := evalpkg.ImportJSONL(ctx, e.st, strings.NewReader(`{"input":"q1: 2+2","expected":"4"}`+"\n"+`{"input":"q2: 3+3","expected":"6"}`), evalpkg.ImportParams{Name: "arith"}); err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct{ agent, name string }{{"v1", "baseline"}, {"v2", "candidate"}} {
		if _, err := evalpkg.RunExperiment(ctx, evalpkg.ExperimentConfig{Engine: e.eng, Agent: x.agent, Dataset: "arith", Name: x.name,
			Evaluators: []evalpkg.Evaluator{&evalpkg.ExactMatch{}}}); err != nil {
			t.Fatal(err)
		}
	}
	p := newPage(t)
	p.do(chromedp.Navigate(e.url + "/#/experiments"))
	p.waitJS(`document.querySelectorAll('#experiments tbody tr').length === 2`)
	if got := eval[string](p, `document.querySelector('nav [data-nav="experiments"]').getAttribute('aria-current')`); got != "page" {
		t.Fatalf("navigation: Experiments aria-current %q", got)
	}
	p.screenshot("experiments")
	p.do(chromedp.SetValue(chromedp.ID("cmp-a"), eval[string](p, `[...document.querySelectorAll('#cmp-a option')].find((o) => o.textContent.startsWith('baseline')).value`)))
	p.do(chromedp.SetValue(chromedp.ID("cmp-b"), eval[string](p, `[...document.querySelectorAll('#cmp-b option')].find((o) => o.textContent.startsWith('candidate')).value`)))
	p.do(chromedp.Click(chromedp.CSS(`#compare-form button[type=submit]`)))
	p.waitJS(`location.hash.startsWith('#/experiments/compare?') && document.querySelectorAll('#compare-items tbody tr').length === 2`)
	if got := eval[string](p, `document.querySelector('#compare-metrics tr[data-metric="exact_match"]').dataset.winner`); got != "b" {
		t.Fatalf("exact_match winner %q, want b", got)
	}
	row := eval[string](p, `document.querySelector('#compare-metrics tr[data-metric="exact_match"]').innerText`)
	if !strings.Contains(row, "0.50") || !strings.Contains(row, "1.00") {
		t.Fatalf("exact_match row %q", row)
	}
	if got := eval[string](p, `[...document.querySelectorAll('#compare-items tbody tr')].map((r) => r.dataset.changed).join('|')`); got != "|exact_match" {
		t.Fatalf("changed per item %q, want only the second item changed", got)
	}
	items := eval[string](p, `document.querySelector('#compare-items').innerText`)
	for _, want := range []string{"q2: 3+3", "5", "6", "completed"} {
		if !strings.Contains(items, want) {
			t.Fatalf("item rows lack %q:\n%s", want, items)
		}
	}
	p.screenshot("experiments-compare")
	// An unknown experiment is reported, not thrown.
	p.do(chromedp.Navigate(e.url + "/#/experiments/compare?a=baseline&b=nope"))
	p.waitJS(`document.querySelector('#compare-result .error')`)
}
