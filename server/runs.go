package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
)

// initiate: POST /v1/runs. The run is queued and executed by the engine's
// background executor; the response carries the invocation to pass to the
// next-step long-poll.
func (s *Server) initiate(w http.ResponseWriter, r *http.Request) error {
	var req wire.InitiateRequest
	if err := s.decodeBody(w, r, &req, false); err != nil {
		return err
	}
	if req.Agent == "" {
		return errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "agent is required")
	}
	if req.SessionID != "" {
		if err := checkID("session_id", req.SessionID); err != nil {
			return err
		}
	}
	if req.Continue && (req.SessionID == "" || req.Input != "") {
		return errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "continue needs session_id and no input")
	}
	p := stepwise.StartParams{Agent: req.Agent, Input: req.Input, SessionID: req.SessionID, Title: req.Title, Continue: req.Continue, Metadata: req.Metadata, Breakpoints: req.Breakpoints}
	if len(req.State) > 0 && string(req.State) != "null" {
		if req.State[0] != '{' {
			return errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "state must be a JSON object")
		}
		p.State = req.State
	}
	run, err := s.eng.StartRun(r.Context(), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, created(run))
	return nil
}

func created(run *stepwise.Run) *wire.RunCreated {
	return &wire.RunCreated{Run: run, Invocation: &stepwise.Invocation{RunID: run.ID, SessionID: run.SessionID, Cursor: stepwise.Position{}.String()}}
}

// getRun: GET /v1/runs/{id}.
func (s *Server) getRun(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	run, err := s.eng.Store().RunGet(r.Context(), &store.RunGetParams{ID: id})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, run)
	return nil
}

// cancelRun: POST /v1/runs/{id}/cancel.
func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	var req wire.CancelRequest
	if err := s.decodeBody(w, r, &req, true); err != nil {
		return err
	}
	if _, err := s.eng.Store().RunGet(r.Context(), &store.RunGetParams{ID: id}); err != nil {
		return err
	}
	run, err := s.eng.Cancel(r.Context(), id, req.Reason)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, run)
	return nil
}

// nextStep: GET /v1/runs/{id}/next?after=SEQ:IDX&timeout=30s, the
// long-poll of the client protocol. It answers 200 with the next step after
// the cursor, or 204 (with the unchanged cursor in the Stepwise-Cursor
// header) when nothing happened before the timeout: poll again.
func (s *Server) nextStep(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	after, err := streamPosition("", r.URL.Query().Get("after"))
	if err != nil {
		return err
	}
	timeout := s.cfg.NextStepTimeout
	if v := r.URL.Query().Get("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return badParam("timeout=%q: want a Go duration such as 30s", truncate(v, 32))
		}
		timeout = min(d, MaxNextStepTimeout)
	}
	ctx, cancel := s.requestContext(r)
	defer cancel()
	if _, err := s.eng.Store().RunGet(ctx, &store.RunGetParams{ID: id}); err != nil {
		return err
	}
	wait, cancelWait := context.WithTimeout(ctx, timeout)
	defer cancelWait()
	inv := &stepwise.Invocation{RunID: id, After: after, Cursor: after.String()}
	step, err := s.eng.NextStep(wait, inv)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			w.Header().Set("Stepwise-Cursor", after.String())
			w.WriteHeader(http.StatusNoContent)
			return nil
		}
		if s.base.Err() != nil {
			return stepwise.ErrEngineClosed
		}
		return err
	}
	writeJSON(w, http.StatusOK, wire.NextStepOf(step, inv.Cursor))
	return nil
}

// runInputs: GET /v1/runs/{id}/inputs.
func (s *Server) runInputs(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	return s.pending(w, r, id)
}

// allInputs: GET /v1/inputs, every pending request.
func (s *Server) allInputs(w http.ResponseWriter, r *http.Request) error {
	return s.pending(w, r, "")
}

func (s *Server) pending(w http.ResponseWriter, r *http.Request, runID string) error {
	list, err := s.eng.Pending(r.Context(), runID)
	if err != nil {
		return err
	}
	if list == nil {
		list = []*stepwise.PendingInput{}
	}
	writeJSON(w, http.StatusOK, &wire.PendingList{Inputs: list})
	return nil
}

// answer: POST /v1/runs/{id}/inputs/{request_id}.
func (s *Server) answer(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	reqID, err := pathID(r, "request_id")
	if err != nil {
		return err
	}
	var req wire.AnswerRequest
	if err := s.decodeBody(w, r, &req, false); err != nil {
		return err
	}
	if len(req.Answer) == 0 {
		return errorf(http.StatusUnprocessableEntity, CodeInvalidAnswer, `answer is required: {"answer": <JSON value>}`)
	}
	step, err := s.eng.Answer(r.Context(), stepwise.AnswerParams{RunID: id, RequestID: reqID, Answer: req.Answer})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, &wire.AnswerResult{Step: step})
	return nil
}
