package server

import (
	"encoding/json"
	"net/http"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
)

// listSessions: GET /v1/sessions?agent=&parent=&q=&cursor=&limit=, newest
// activity first; next_cursor pages on.
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := queryInt(r, "limit", 1000)
	if err != nil {
		return err
	}
	if q.Has("limit") && limit == 0 {
		return badParam("query parameter limit=0: want an integer between 1 and 1000")
	}
	for _, name := range []string{"agent", "parent", "q", "cursor"} {
		if len(q.Get(name)) > 1024 {
			return badParam("query parameter %s is longer than 1024 bytes", name)
		}
	}
	page, err := s.eng.Store().SessionList(r.Context(), &store.SessionListParams{
		Agent: q.Get("agent"), ParentID: q.Get("parent"), Query: q.Get("q"), Cursor: q.Get("cursor"), Limit: int(limit),
	})
	if err != nil {
		return err
	}
	out := &wire.SessionPage{Sessions: page.Sessions, Next: page.Next}
	if out.Sessions == nil {
		out.Sessions = []*stepwise.Session{}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// createSession: POST /v1/sessions, an empty session (for ingest, or to
// name it before the first run). The agent need not be registered here: an
// agent running elsewhere can record into it.
func (s *Server) createSession(w http.ResponseWriter, r *http.Request) error {
	var req wire.CreateSessionRequest
	if err := s.decodeBody(w, r, &req, true); err != nil {
		return err
	}
	if len(req.Agent) > maxIDLen || len(req.Title) > 4096 {
		return errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "agent (at most %d bytes) or title (at most 4096 bytes) too long", maxIDLen)
	}
	if len(req.Metadata) > 0 && (string(req.Metadata) == "null" || req.Metadata[0] != '{') {
		return errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "metadata must be a JSON object")
	}
	sess, err := s.eng.Store().SessionCreate(r.Context(), &store.SessionCreateParams{ID: stepwise.NewID(), Agent: req.Agent, Title: req.Title, Metadata: compact(req.Metadata)})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, sess)
	return nil
}

// session loads the session named by the path, or fails with 404.
func (s *Server) session(r *http.Request) (*stepwise.Session, error) {
	id, err := pathID(r, "id")
	if err != nil {
		return nil, err
	}
	return s.eng.Store().SessionGet(r.Context(), &store.SessionGetParams{ID: id})
}

// getSession: GET /v1/sessions/{id}.
func (s *Server) getSession(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sess)
	return nil
}

// deleteSession: DELETE /v1/sessions/{id}; 409 while forks depend on it or
// a run is executing.
func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	if err := s.eng.DeleteSession(r.Context(), sess.ID); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// summary: GET /v1/sessions/{id}/summary.
func (s *Server) summary(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	sum, err := s.eng.Summarize(r.Context(), sess.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sum)
	return nil
}

// contextPreview: GET /v1/sessions/{id}/context?agent=, the exact request
// the next model call would send.
func (s *Server) contextPreview(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	agent := r.URL.Query().Get("agent")
	at, err := queryInt(r, "at", sess.LastSequence+1)
	if err != nil {
		return err
	}
	if agent == "" && sess.Agent == "" && at == 0 {
		return errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "session %s has no agent; name one with ?agent=", sess.ID)
	}
	req, err := s.eng.ContextPreviewAt(r.Context(), sess.ID, agent, at)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, req)
	return nil
}

// forks: GET /v1/sessions/{id}/forks, the direct forks.
func (s *Server) forks(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	list, err := s.eng.Forks(r.Context(), sess.ID)
	if err != nil {
		return err
	}
	if list == nil {
		list = []*stepwise.Session{}
	}
	writeJSON(w, http.StatusOK, &wire.SessionList{Sessions: list})
	return nil
}

// tree: GET /v1/sessions/{id}/tree, the fork tree from the root ancestor.
func (s *Server) tree(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	t, err := s.eng.Tree(r.Context(), sess.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

func compact(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	var out json.RawMessage
	if err := json.Unmarshal(b, &out); err != nil {
		return b
	}
	return out
}
