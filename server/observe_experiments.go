package server

import (
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strings"

	"github.com/stepwise-run/stepwise/eval"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
)

// The dataset and experiment endpoints of observe.go.

// MaxDatasetBytes bounds a JSONL dataset upload (the general body limit,
// Config.MaxBodyBytes, is for JSON requests).
const MaxDatasetBytes = 32 << 20

// maxObservationList bounds ?limit= of the dataset and experiment lists.
const maxObservationList = 1000

// datasets: GET /v1/datasets?limit=, newest first.
func (o *observationAPI) datasets(w http.ResponseWriter, r *http.Request) error {
	obs := o.s.eng.Store()
	limit, err := queryInt(r, "limit", maxObservationList)
	if err != nil {
		return err
	}
	ds, err := obs.DatasetList(r.Context(), &store.DatasetListParams{Limit: int(limit)})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.DatasetList{Datasets: nonNil(ds)})
	return nil
}

// importProblem is the problem of an import that created nothing, with
// the lines refused.
type importProblem struct {
	*Problem
	Errors []wire.LineError `json:"errors"`
}

// importDataset: POST /v1/datasets?name=&description= with a JSONL body
// (one {"input","expected","metadata"} object per line). Malformed lines
// are listed with their line numbers and the rest is imported (201); with
// no valid line nothing is created (422, the lines in the problem's
// errors); a taken name is 409.
func (o *observationAPI) importDataset(w http.ResponseWriter, r *http.Request) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		switch {
		case err != nil:
			return errorf(http.StatusUnsupportedMediaType, CodeUnsupportedType, "Content-Type %q: %v", ct, err)
		case mt != "application/x-ndjson" && mt != "application/jsonl" && mt != "application/json" && mt != "text/plain":
			return errorf(http.StatusUnsupportedMediaType, CodeUnsupportedType, "Content-Type must be application/x-ndjson (JSON Lines), got %q", ct)
		}
	}
	q := r.URL.Query()
	name := strings.TrimSpace(q.Get("name"))
	if name == "" {
		return badParam("query parameter name is required: the dataset's unique name")
	}
	if len(name) > maxIDLen {
		return badParam("query parameter name: at most %d characters", maxIDLen)
	}
	body := http.MaxBytesReader(w, r.Body, MaxDatasetBytes)
	res, err := eval.ImportJSONL(r.Context(), o.s.eng.Store(), body, eval.ImportParams{Name: name, Description: q.Get("description")})
	var lines []wire.LineError
	if res != nil {
		for _, le := range res.Errors {
			lines = append(lines, wire.LineError{Line: le.Line, Error: le.Err.Error()})
		}
	}
	if errors.Is(err, eval.ErrEmptyDataset) {
		p, _ := problemOf(observationError(err))
		writeJSONProblem(w, importProblem{Problem: p, Errors: nonNil(lines)})
		return nil
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, wire.ImportResult{Dataset: res.Dataset, Imported: res.Imported, Errors: nonNil(lines)})
	return nil
}

// writeJSONProblem writes a problem with extension members, with the
// headers of writeProblem.
func writeJSONProblem(w http.ResponseWriter, p importProblem) {
	body, _ := json.Marshal(p)
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}

// experiments: GET /v1/experiments?dataset=&limit=, newest first.
func (o *observationAPI) experiments(w http.ResponseWriter, r *http.Request) error {
	obs := o.s.eng.Store()
	limit, err := queryInt(r, "limit", maxObservationList)
	if err != nil {
		return err
	}
	p := &store.ExperimentListParams{Limit: int(limit)}
	if ref := r.URL.Query().Get("dataset"); ref != "" {
		ds, err := datasetByRef(r, obs, ref)
		if err != nil {
			return err
		}
		p.DatasetID = ds.ID
	}
	xs, err := obs.ExperimentList(r.Context(), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.ExperimentList{Experiments: nonNil(xs)})
	return nil
}

// datasetByRef finds a dataset by id, else by name.
func datasetByRef(r *http.Request, obs store.ObservationStore, ref string) (*store.Dataset, error) {
	ds, err := obs.DatasetGet(r.Context(), &store.DatasetGetParams{ID: ref})
	if errors.Is(err, store.ErrNotFound) {
		ds, err = obs.DatasetGet(r.Context(), &store.DatasetGetParams{Name: ref})
	}
	return ds, err
}

// reportView is the wire form of eval.Report.
type reportView struct {
	Experiment *store.Experiment `json:"experiment"`
	Dataset    *store.Dataset    `json:"dataset"`
	Summary    *eval.Summary     `json:"summary"`
	Items      []eval.ReportItem `json:"items"`
}

// experiment: GET /v1/experiments/{id} (an id or a name): the experiment,
// its dataset, summary and each item with its result.
func (o *observationAPI) experiment(w http.ResponseWriter, r *http.Request) error {
	ref, err := pathID(r, "id")
	if err != nil {
		return err
	}
	rep, err := eval.LoadReport(r.Context(), o.s.eng.Store(), ref)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, reportView{Experiment: rep.Experiment, Dataset: rep.Dataset, Summary: rep.Summary, Items: nonNil(rep.Items)})
	return nil
}

// comparisonView is the wire form of eval.Comparison.
type comparisonView struct {
	A       *store.Experiment `json:"a"`
	B       *store.Experiment `json:"b"`
	Dataset *store.Dataset    `json:"dataset"`
	Metrics []eval.MetricRow  `json:"metrics"`
	Items   []eval.ItemRow    `json:"items"`
}

// compare: GET /v1/experiments/compare?a=&b= (ids or names) sets two
// experiments over the same dataset side by side; 422 when their datasets
// differ.
func (o *observationAPI) compare(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	a, b := q.Get("a"), q.Get("b")
	for _, p := range []struct{ name, v string }{{"a", a}, {"b", b}} {
		if err := checkID("query parameter "+p.name, p.v); err != nil {
			return err
		}
	}
	c, err := eval.Compare(r.Context(), o.s.eng.Store(), a, b)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, comparisonView{A: c.A, B: c.B, Dataset: c.Dataset, Metrics: nonNil(c.Metrics), Items: nonNil(c.Items)})
	return nil
}
