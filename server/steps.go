package server

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/observe"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
)

// maxIngestSteps bounds the steps of one ingest request.
const maxIngestSteps = 1000

// listSteps: GET /v1/sessions/{id}/steps?start_seq=&end_seq=&limit=, in
// sequence order, lineage included (a fork shows its parent's first steps).
func (s *Server) listSteps(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	start, err := queryInt(r, "start_seq", 0)
	if err != nil {
		return err
	}
	end, err := queryInt(r, "end_seq", 0)
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", 100000)
	if err != nil {
		return err
	}
	if end != 0 && end < start {
		return badParam("end_seq %d is before start_seq %d", end, start)
	}
	steps, err := s.eng.Store().StepList(r.Context(), &store.StepListParams{SessionID: sess.ID, StartSeq: start, EndSeq: end, Limit: int(limit)})
	if err != nil {
		return err
	}
	if steps == nil {
		steps = []*stepwise.Step{}
	}
	// Summaries and annotations set after the commit show in the steps.
	if err := observe.OverlayAnnotations(r.Context(), s.eng.Store(), steps); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, &wire.StepList{Steps: steps})
	return nil
}

// getStep: GET /v1/sessions/{id}/steps/{sequence}. A step of the parent
// lineage of a fork is returned (it is part of the fork's log); a step of
// any other session never is.
func (s *Server) getStep(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	seq, err := pathSeq(r, "sequence")
	if err != nil {
		return err
	}
	step, err := s.eng.Store().StepGet(r.Context(), &store.StepGetParams{SessionID: sess.ID, Sequence: seq})
	if err != nil {
		return err
	}
	ok, err := s.inLineage(r, sess, step)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("step %d of session %s: %w", seq, sess.ID, store.ErrNotFound)
	}
	if err := observe.OverlayAnnotations(r.Context(), s.eng.Store(), []*stepwise.Step{step}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, step)
	return nil
}

// inLineage reports whether step belongs to sess or to the ancestor it
// inherits step.Sequence from.
func (s *Server) inLineage(r *http.Request, sess *stepwise.Session, step *stepwise.Step) (bool, error) {
	cur := sess
	for depth := 0; depth < 1000; depth++ {
		if step.SessionID == cur.ID {
			return step.Sequence <= cur.LastSequence, nil
		}
		if cur.ParentSessionID == "" || step.Sequence > cur.ForkSequence {
			return false, nil
		}
		parent, err := s.eng.Store().SessionGet(r.Context(), &store.SessionGetParams{ID: cur.ParentSessionID})
		if err != nil {
			return false, err
		}
		cur = parent
	}
	return false, nil
}

// truncate: DELETE /v1/sessions/{id}/steps?start_seq=N deletes the
// session's steps >= N (a destructive retry); 409 while a fork
// depends on them or a run is unfinished.
func (s *Server) truncate(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	if !r.URL.Query().Has("start_seq") {
		return badParam("query parameter start_seq is required")
	}
	from, err := queryInt(r, "start_seq", 0)
	if err != nil {
		return err
	}
	if from < 1 {
		return badParam("start_seq must be >= 1")
	}
	n, err := s.eng.Truncate(r.Context(), sess.ID, from)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, &wire.TruncateResult{Deleted: n})
	return nil
}

// ingest: POST /v1/sessions/{id}/steps {"steps": [step, …]} records steps
// produced elsewhere, in the step wire format. Unknown fields are refused,
// as everywhere.
func (s *Server) ingest(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	var req wire.IngestRequest
	if err := s.decodeBody(w, r, &req, false); err != nil {
		return err
	}
	steps, err := decodeSteps(req.Steps)
	if err != nil {
		return err
	}
	out, err := s.eng.Ingest(r.Context(), stepwise.IngestParams{SessionID: sess.ID, Steps: steps})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, &wire.StepList{Steps: out})
	return nil
}

// decodeSteps decodes steps in the wire format, refusing unknown fields at
// every level the format defines.
func decodeSteps(raw []json.RawMessage) ([]*stepwise.Step, error) {
	if len(raw) == 0 {
		return nil, errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, `steps is required: {"steps": [ … ]}`)
	}
	if len(raw) > maxIngestSteps {
		return nil, errorf(http.StatusUnprocessableEntity, CodeInvalidArgument, "%d steps in one request; at most %d", len(raw), maxIngestSteps)
	}
	out := make([]*stepwise.Step, len(raw))
	for i, b := range raw {
		if err := checkStepKeys(b); err != nil {
			return nil, errorf(http.StatusBadRequest, CodeInvalidJSON, "steps[%d]: %v", i, err)
		}
		var st stepwise.Step
		if err := json.Unmarshal(b, &st); err != nil {
			return nil, errorf(http.StatusBadRequest, CodeInvalidJSON, "steps[%d]: %v", i, trimJSONPrefix(err))
		}
		out[i] = &st
	}
	return out, nil
}

func checkStepKeys(b json.RawMessage) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return fmt.Errorf("want a step object: %v", trimJSONPrefix(err))
	}
	if top == nil {
		return fmt.Errorf("want a step object, got null")
	}
	for k, v := range top {
		if !stepWireKeys[k] {
			return fmt.Errorf("unknown field %q", k)
		}
		if nested := stepNestedKeys[k]; nested != nil {
			if err := checkObjectKeys(k, v, nested); err != nil {
				return err
			}
		}
		if k == "tool_calls" {
			var calls []json.RawMessage
			if err := json.Unmarshal(v, &calls); err != nil {
				return fmt.Errorf("tool_calls: want an array: %v", trimJSONPrefix(err))
			}
			for j, c := range calls {
				if err := checkObjectKeys(fmt.Sprintf("tool_calls[%d]", j), c, toolCallKeys); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func checkObjectKeys(field string, v json.RawMessage, allowed map[string]bool) error {
	if string(v) == "null" {
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(v, &obj); err != nil {
		return fmt.Errorf("%s: want an object: %v", field, trimJSONPrefix(err))
	}
	for k := range obj {
		if !allowed[k] {
			return fmt.Errorf("%s: unknown field %q", field, k)
		}
	}
	return nil
}

func trimJSONPrefix(err error) string {
	msg := err.Error()
	if len(msg) > 6 && msg[:6] == "json: " {
		return msg[6:]
	}
	return msg
}
