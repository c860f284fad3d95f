package server

import (
	"errors"
	"net/http"

	"github.com/stepwise-run/stepwise/eval"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
)

// CodeNoJudge is the problem code of a judgment asked for a run whose agent
// has no judge (422).
const CodeNoJudge = "no_judge"

// registerJudgeAPI installs POST /v1/runs/{id}/judge and POST
// /v1/sessions/{id}/judge: the LLM judges of the run's agent (Config.Judges,
// from the agent files' observe.judge) grade it now.
func (s *Server) registerJudgeAPI() {
	for _, p := range []struct {
		path    string
		session bool
	}{{"/v1/runs/{id}/judge", false}, {"/v1/sessions/{id}/judge", true}} {
		if !s.registered(http.MethodPost, p.path) {
			s.handle(http.MethodPost, p.path, s.judge(p.session))
		}
	}
}

func (s *Server) judge(session bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		j := s.cfg.Judges
		if j == nil {
			return errorf(http.StatusUnprocessableEntity, CodeNoJudge, "this server has no judges (declare observe.judge in an agent file)")
		}
		var evs []*store.Eval
		if session {
			evs, err = j.JudgeSession(r.Context(), id)
		} else {
			evs, err = j.JudgeRun(r.Context(), id)
		}
		if errors.Is(err, eval.ErrNoJudge) {
			return errorf(http.StatusUnprocessableEntity, CodeNoJudge, "%s", trimSentinel(err))
		}
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, wire.EvalList{Evals: nonNil(evs)})
		return nil
	}
}

// judgeOps documents the judge endpoints.
func judgeOps() []apiOp {
	const sum = " with the LLM judges of its agent file's observe.judge (rubrics: weighted criteria, pass score); answers the evals, with per-criterion verdicts and reasons in details (422 no_judge: the agent has none)"
	return []apiOp{
		{method: "POST", path: "/v1/runs/{id}/judge", id: "judgeRun", summary: "Judge a run now" + sum,
			params: []apiParam{pathParam("id", "run id")}, status: 200, resp: "EvalList", errors: []int{400, 401, 404, 422}},
		{method: "POST", path: "/v1/sessions/{id}/judge", id: "judgeSession", summary: "Judge every run of a session now" + sum,
			params: []apiParam{pathParam("id", "session id")}, status: 200, resp: "EvalList", errors: []int{400, 401, 404, 422}},
	}
}
