package server

import (
	"net/http"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/wire"
)

// fork: POST /v1/sessions/{id}/fork {sequence, edit?, title?}.
func (s *Server) fork(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	var req wire.ForkRequest
	if err := s.decodeBody(w, r, &req, false); err != nil {
		return err
	}
	if req.Sequence < 1 {
		return errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "sequence must be >= 1")
	}
	out, err := s.eng.Fork(r.Context(), stepwise.ForkParams{SessionID: sess.ID, At: req.Sequence, Edit: req.Edit, Title: req.Title})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// retry: POST /v1/sessions/{id}/retry {sequence, destructive?, agent?}.
// Non-destructive by default (the old attempt stays in the original
// session); the new run is queued for the background executor.
func (s *Server) retry(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	var req wire.RetryRequest
	if err := s.decodeBody(w, r, &req, false); err != nil {
		return err
	}
	if req.Sequence < 1 {
		return errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "sequence must be >= 1")
	}
	run, err := s.eng.Retry(r.Context(), stepwise.RetryParams{SessionID: sess.ID, From: req.Sequence, Destructive: req.Destructive, Agent: req.Agent})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, created(run))
	return nil
}

// replay: POST /v1/sessions/{id}/replay {live_tools?, all_tools_live?, agent?}.
func (s *Server) replay(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	var req wire.ReplayRequest
	if err := s.decodeBody(w, r, &req, true); err != nil {
		return err
	}
	run, err := s.eng.Replay(r.Context(), stepwise.ReplayParams{SessionID: sess.ID, Agent: req.Agent, LiveTools: req.LiveTools, AllToolsLive: req.AllToolsLive})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, created(run))
	return nil
}
