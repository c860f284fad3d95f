package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/stepwise-run/stepwise/eval"
	"github.com/stepwise-run/stepwise/observe"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
)

// The observation endpoints (docs/observation.md): evals of steps, runs
// and sessions; attachments of steps and their content; the events inside
// a step; annotations set after a step committed; datasets and
// experiments, read and written through the store's ObservationStore part.

// observationAPI holds the handlers of the observation endpoints and their
// attachment limits (observe's defaults).
type observationAPI struct {
	s   *Server
	att observe.AttachmentConfig
}

// observationRoutes are the observation endpoints, in document order.
func (s *Server) observationRoutes() []route {
	get, post, put := http.MethodGet, http.MethodPost, http.MethodPut
	return []route{
		{get, "/v1/steps/{id}/evals"}, {post, "/v1/steps/{id}/evals"},
		{get, "/v1/runs/{id}/evals"}, {post, "/v1/runs/{id}/evals"},
		{get, "/v1/sessions/{id}/evals"}, {post, "/v1/sessions/{id}/evals"},
		{get, "/v1/steps/{id}/attachments"}, {post, "/v1/steps/{id}/attachments"},
		{get, "/v1/attachments/{id}/content"},
		{get, "/v1/steps/{id}/events"},
		{get, "/v1/steps/{id}/annotations"}, {put, "/v1/steps/{id}/annotations"},
		{get, "/v1/datasets"}, {post, "/v1/datasets"},
		{get, "/v1/experiments"}, {get, "/v1/experiments/compare"}, {get, "/v1/experiments/{id}"},
	}
}

// registerObservationAPI installs the endpoints of observationRoutes that
// are not registered yet (so calling it twice, or after register installed
// some of them, is harmless). Attachments have observe's default limits
// (10 MiB; observe.DefaultAllowedTypes).
func (s *Server) registerObservationAPI() {
	o := &observationAPI{s: s}
	handlers := map[string]handlerFunc{
		"GET /v1/steps/{id}/evals":         o.evals(store.TargetStep),
		"POST /v1/steps/{id}/evals":        o.score(store.TargetStep),
		"GET /v1/runs/{id}/evals":          o.evals(store.TargetRun),
		"POST /v1/runs/{id}/evals":         o.score(store.TargetRun),
		"GET /v1/sessions/{id}/evals":      o.evals(store.TargetSession),
		"POST /v1/sessions/{id}/evals":     o.score(store.TargetSession),
		"GET /v1/steps/{id}/attachments":   o.attachments,
		"POST /v1/steps/{id}/attachments":  o.upload,
		"GET /v1/attachments/{id}/content": o.content,
		"GET /v1/steps/{id}/events":        o.events,
		"GET /v1/steps/{id}/annotations":   o.annotations,
		"PUT /v1/steps/{id}/annotations":   o.annotate,
		"GET /v1/datasets":                 o.datasets,
		"POST /v1/datasets":                o.importDataset,
		"GET /v1/experiments":              o.experiments,
		"GET /v1/experiments/compare":      o.compare,
		"GET /v1/experiments/{id}":         o.experiment,
	}
	for _, rt := range s.observationRoutes() {
		if s.registered(rt.method, rt.pattern) {
			continue
		}
		h := handlers[rt.method+" "+rt.pattern]
		s.handle(rt.method, rt.pattern, func(w http.ResponseWriter, r *http.Request) error {
			return observationError(h(w, r))
		})
	}
}

// observationError maps the sentinels of the observe and eval packages,
// which problemOf does not know, to API errors; others pass unchanged.
func observationError(err error) error {
	var status int
	var code string
	switch {
	case err == nil:
		return nil
	case errors.Is(err, observe.ErrTooLarge):
		status, code = http.StatusRequestEntityTooLarge, CodeBodyTooLarge
	case errors.Is(err, observe.ErrContentType):
		status, code = http.StatusUnsupportedMediaType, CodeUnsupportedType
	case errors.Is(err, observe.ErrEmpty), errors.Is(err, eval.ErrEmptyDataset), errors.Is(err, eval.ErrDifferentDatasets):
		status, code = http.StatusUnprocessableEntity, CodeInvalidArgument
	default:
		return err
	}
	return errorf(status, code, "%s", err.Error())
}

// stepByPath reads the {id} path parameter and loads that step.
func (o *observationAPI) stepByPath(r *http.Request) (*steptype.Step, error) {
	id, err := pathID(r, "id")
	if err != nil {
		return nil, err
	}
	return o.s.eng.Store().StepGet(r.Context(), &store.StepGetParams{ID: id})
}

// target reads the {id} path parameter and checks that the step, run or
// session exists (404 otherwise).
func (o *observationAPI) target(r *http.Request, kind store.EvalTarget) (string, error) {
	id, err := pathID(r, "id")
	if err != nil {
		return "", err
	}
	st := o.s.eng.Store()
	switch kind {
	case store.TargetStep:
		_, err = st.StepGet(r.Context(), &store.StepGetParams{ID: id})
	case store.TargetRun:
		_, err = st.RunGet(r.Context(), &store.RunGetParams{ID: id})
	default:
		_, err = st.SessionGet(r.Context(), &store.SessionGetParams{ID: id})
	}
	if err != nil {
		return "", fmt.Errorf("%s %q: %w", kind, id, err)
	}
	return id, nil
}

// evals: GET /v1/{steps,runs,sessions}/{id}/evals. A step's evals; a run's
// evals and those of its steps; every eval in a session (its runs and
// steps included). Oldest first; ?name= and ?source= filter.
func (o *observationAPI) evals(kind store.EvalTarget) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		obs := o.s.eng.Store()
		id, err := o.target(r, kind)
		if err != nil {
			return err
		}
		q := r.URL.Query()
		p := &store.EvalListParams{Name: q.Get("name"), Source: store.EvalSource(q.Get("source"))}
		switch kind {
		case store.TargetStep:
			p.TargetKind, p.TargetID = kind, id
		case store.TargetRun:
			p.RunID = id
		default:
			p.SessionID = id
		}
		evs, err := obs.EvalList(r.Context(), p)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, wire.EvalList{Evals: nonNil(evs)})
		return nil
	}
}

// score: POST /v1/{steps,runs,sessions}/{id}/evals records a user score
// (201). A score outside [0, 1] is 422 and stores nothing.
func (o *observationAPI) score(kind store.EvalTarget) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var req wire.ScoreRequest
		if err := o.s.decodeBody(w, r, &req, false); err != nil {
			return err
		}
		if req.Score == nil {
			return errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "score is required: a number in [0, 1]")
		}
		if req.Source != "" && req.Source != string(store.SourceUser) {
			return errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "source %q: only user scores are recorded through the API", req.Source)
		}
		id, err := o.target(r, kind)
		if err != nil {
			return err
		}
		e, err := eval.Score(r.Context(), o.s.eng.Store(), eval.ScoreParams{TargetKind: kind, TargetID: id,
			Name: req.Name, Score: *req.Score, Label: req.Label, Description: req.Description, Author: req.Author})
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusCreated, e)
		return nil
	}
}

// nonNil turns a nil slice into an empty one, so lists encode as [].
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
