package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/eval"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
)

// solverAgent answers each question with answers[question].
func solverAgent(name string, answers map[string]string) *stepwise.Agent {
	var ut []scripted.UserTurn
	for q, a := range answers {
		ut = append(ut, scripted.UserTurn{Match: q, Turns: []scripted.Turn{{Text: a}}})
	}
	return &stepwise.Agent{Name: name, Model: scripted.New(name, scripted.Script{Strict: true, UserTurns: ut})}
}

func TestObservationDatasetsAndExperiments(t *testing.T) {
	t.Parallel()
	forObsStores(t, func(t *testing.T, st store.Store) {
		jsonl := "{\"input\":\"q1: 2+2\",\"expected\":\"4\"}\n\n{\"input\":\"q2: 3+3\",\"expected\":\"6\"}\n{\"input\": oops}\n{\"expected\":\"no input\"}\n"
		// The experiments run before the server starts its executor.
		env := newObsEnv(t, st, func(eng *stepwise.Engine) {
			if _, err := eval.ImportJSONL(t.Context(), st, strings.NewReader(jsonl), eval.ImportParams{Name: "qa"}); err != nil {
				t.Fatal(err)
			}
			for _, x := range []struct{ agent, name string }{{"v1", "baseline"}, {"v2", "candidate"}} {
				if _, err := eval.RunExperiment(t.Context(), eval.ExperimentConfig{Engine: eng, Agent: x.agent, Dataset: "qa", Name: x.name,
					Evaluators: []eval.Evaluator{&eval.ExactMatch{}}}); err != nil {
					t.Fatal(err)
				}
			}
		}, solverAgent("v1", map[string]string{"q1": "4", "q2": "5"}), solverAgent("v2", map[string]string{"q1": "4", "q2": "6"}))

		res := decode[wire.ImportResult](t, env.want(201, "", "POST", "/v1/datasets?name=qa2", "application/x-ndjson", []byte(jsonl)))
		if res.Imported != 2 || res.Dataset == nil || res.Dataset.ItemCount != 2 || len(res.Errors) != 2 || res.Errors[0].Line != 4 || res.Errors[1].Line != 5 {
			t.Fatalf("import = %+v", res)
		}
		env.want(409, CodeConflict, "POST", "/v1/datasets?name=qa2", "application/x-ndjson", []byte(jsonl))
		env.want(400, CodeInvalidParam, "POST", "/v1/datasets", "application/x-ndjson", []byte(jsonl))
		env.want(415, CodeUnsupportedType, "POST", "/v1/datasets?name=x", "text/html", []byte(jsonl))
		var bad importProblem
		if err := json.Unmarshal(env.want(422, CodeInvalidArgument, "POST", "/v1/datasets?name=empty", "application/x-ndjson", []byte("nope\n{\"input\":\"\"}\n")), &bad); err != nil ||
			len(bad.Errors) != 2 || bad.Errors[0].Line != 1 || bad.Errors[1].Line != 2 {
			t.Fatalf("empty import problem = %+v (%v)", bad, err)
		}
		if l := decode[wire.DatasetList](t, env.want(200, "", "GET", "/v1/datasets", "", nil)); len(l.Datasets) != 2 || l.Datasets[0].Name != "qa2" {
			t.Fatalf("datasets = %+v", l.Datasets)
		}

		xs := decode[wire.ExperimentList](t, env.want(200, "", "GET", "/v1/experiments?dataset=qa", "", nil))
		if len(xs.Experiments) != 2 {
			t.Fatalf("experiments = %+v", xs.Experiments)
		}
		rep := decode[struct {
			Experiment *store.Experiment `json:"experiment"`
			Summary    *eval.Summary     `json:"summary"`
			Items      []eval.ReportItem `json:"items"`
		}](t, env.want(200, "", "GET", "/v1/experiments/baseline", "", nil))
		if rep.Experiment.Name != "baseline" || len(rep.Items) != 2 || rep.Items[1].Result == nil || rep.Summary.Scores["exact_match"] != 0.5 {
			t.Fatalf("report = %+v", rep)
		}

		candidate := xs.Experiments[0]
		if candidate.Name != "candidate" {
			candidate = xs.Experiments[1]
		}
		cmp := decode[comparisonView](t, env.want(200, "", "GET", "/v1/experiments/compare?a=baseline&b="+urlEscape(candidate.ID), "", nil))
		var exact *eval.MetricRow
		for i := range cmp.Metrics {
			if cmp.Metrics[i].Name == "exact_match" {
				exact = &cmp.Metrics[i]
			}
		}
		if cmp.A.Name != "baseline" || cmp.B.Name != "candidate" || exact == nil || *exact.A != 0.5 || *exact.B != 1 || exact.Winner != "b" ||
			len(cmp.Items) != 2 || len(cmp.Items[1].Changed) == 0 || len(cmp.Items[0].Changed) != 0 {
			t.Fatalf("comparison = %s", mustJSON(t, cmp))
		}

		env.want(400, CodeInvalidParam, "GET", "/v1/experiments/compare?a=baseline", "", nil)
		env.want(404, CodeNotFound, "GET", "/v1/experiments/compare?a=baseline&b=nope", "", nil)
		env.want(404, CodeNotFound, "GET", "/v1/experiments/nope", "", nil)
		env.want(404, CodeNotFound, "GET", "/v1/experiments?dataset=nope", "", nil)
	})
}

// TestObservationOpenAPI checks that observationOps documents exactly the
// routes registerObservationAPI installs, with declared path parameters
// and resolvable schema references.
func TestObservationOpenAPI(t *testing.T) {
	t.Parallel()
	s := &Server{mux: http.NewServeMux()}
	s.registerObservationAPI()
	routed := map[string]bool{}
	for _, r := range s.routes {
		routed[r.method+" "+r.pattern] = true
	}
	all := schemas()
	for k, v := range observationSchemas() {
		if all[k] != nil {
			t.Errorf("schema %s is already defined", k)
		}
		all[k] = v
	}
	ids := map[string]bool{}
	for _, op := range apiOps() {
		ids[op.id] = true
	}
	for _, op := range observationOps() {
		key := op.method + " " + op.path
		if !routed[key] {
			t.Errorf("documented %s is not routed", key)
		}
		delete(routed, key)
		if ids[op.id] {
			t.Errorf("%s: operationId %s duplicated", key, op.id)
		}
		ids[op.id] = true
		for _, name := range []string{op.body, op.resp} {
			if name != "" && all[name] == nil {
				t.Errorf("%s: schema %s undefined", key, name)
			}
		}
		for _, code := range op.errors {
			if code == 501 {
				t.Errorf("%s: no Problem501 response component", key)
			}
		}
		for _, m := range strings.Split(op.path, "{")[1:] {
			name := m[:strings.IndexByte(m, '}')]
			found := false
			for _, p := range op.params {
				found = found || (p.in == "path" && p.name == name && p.required)
			}
			if !found {
				t.Errorf("%s: path parameter %s not declared", key, name)
			}
		}
	}
	for r := range routed {
		t.Errorf("route %s is not documented", r)
	}
	data, _ := json.Marshal(observationSchemas())
	for _, m := range strings.Split(string(data), `"$ref":"#/components/schemas/`)[1:] {
		if name := m[:strings.IndexByte(m, '"')]; all[name] == nil {
			t.Errorf("unresolved $ref %s", name)
		}
	}
}
