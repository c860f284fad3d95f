package server

import (
	"net/http"

	"github.com/stepwise-run/stepwise/wire"
)

// The worker protocol (docs/workers.md): worker processes register agents
// and handlers, long-poll for tasks and report on them. The endpoints are
// served when Config.Workers is set.

func (s *Server) registerWorkerAPI() {
	post := http.MethodPost
	s.handle(http.MethodGet, "/v1/workers", s.workerList)
	s.handle(post, "/v1/workers/register", s.workerRegister)
	s.handle(post, "/v1/workers/poll", s.workerPoll)
	s.handle(post, "/v1/workers/release", s.workerRelease)
	s.handle(post, "/v1/workers/tasks/{id}/heartbeat", s.taskHeartbeat)
	s.handle(post, "/v1/workers/tasks/{id}/events", s.taskEvents)
	s.handle(post, "/v1/workers/tasks/{id}/complete", s.taskComplete)
	s.handle(post, "/v1/workers/tasks/{id}/fail", s.taskFail)
	s.handle(post, "/v1/workers/tasks/{id}/input", s.taskInput)
	s.handle(post, "/v1/workers/tasks/{id}/release", s.taskRelease)
}

// workersOn fails the request when the server serves no workers.
func (s *Server) workersOn() error {
	if s.cfg.Workers == nil {
		return errorf(http.StatusNotFound, CodeRouteNotFound, "this server serves no workers (stepwise serve does)")
	}
	return nil
}

// workerList: GET /v1/workers.
func (s *Server) workerList(w http.ResponseWriter, _ *http.Request) error {
	if err := s.workersOn(); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.cfg.Workers.Workers())
	return nil
}

// workerRegister: POST /v1/workers/register.
func (s *Server) workerRegister(w http.ResponseWriter, r *http.Request) error {
	if err := s.workersOn(); err != nil {
		return err
	}
	var req wire.WorkerRegister
	if err := s.decodeBody(w, r, &req, false); err != nil {
		return err
	}
	out, err := s.cfg.Workers.Register(r.Context(), &req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// workerPoll: POST /v1/workers/poll, held until a task is claimed (200) or
// the wait passed (204).
func (s *Server) workerPoll(w http.ResponseWriter, r *http.Request) error {
	if err := s.workersOn(); err != nil {
		return err
	}
	var req wire.TaskPoll
	if err := s.decodeBody(w, r, &req, false); err != nil {
		return err
	}
	ctx, cancel := s.requestContext(r)
	defer cancel()
	tasks, err := s.cfg.Workers.Poll(ctx, &req)
	if err != nil {
		return err
	}
	if len(tasks) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	writeJSON(w, http.StatusOK, &wire.TaskBatch{Tasks: tasks})
	return nil
}

// workerRelease: POST /v1/workers/release.
func (s *Server) workerRelease(w http.ResponseWriter, r *http.Request) error {
	if err := s.workersOn(); err != nil {
		return err
	}
	var req wire.TaskRelease
	if err := s.decodeBody(w, r, &req, false); err != nil {
		return err
	}
	n, err := s.cfg.Workers.ReleaseWorker(r.Context(), req.WorkerID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, &wire.TaskReleased{Released: n})
	return nil
}

// taskHeartbeat: POST /v1/workers/tasks/{id}/heartbeat.
func (s *Server) taskHeartbeat(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	if err := s.workersOn(); err != nil {
		return err
	}
	var req wire.TaskToken
	if err := s.decodeBody(w, r, &req, false); err != nil {
		return err
	}
	lease, err := s.cfg.Workers.Heartbeat(r.Context(), id, req.Token)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, lease)
	return nil
}

// taskEvents: POST /v1/workers/tasks/{id}/events.
func (s *Server) taskEvents(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	if err := s.workersOn(); err != nil {
		return err
	}
	var req wire.TaskEvents
	if err := s.decodeBody(w, r, &req, false); err != nil {
		return err
	}
	lease, err := s.cfg.Workers.Events(r.Context(), id, &req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, lease)
	return nil
}

// taskComplete: POST /v1/workers/tasks/{id}/complete.
func (s *Server) taskComplete(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	if err := s.workersOn(); err != nil {
		return err
	}
	var req wire.TaskComplete
	if err := s.decodeBody(w, r, &req, false); err != nil {
		return err
	}
	res, err := s.cfg.Workers.Complete(r.Context(), id, &req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// taskFail: POST /v1/workers/tasks/{id}/fail.
func (s *Server) taskFail(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	if err := s.workersOn(); err != nil {
		return err
	}
	var req wire.TaskFail
	if err := s.decodeBody(w, r, &req, false); err != nil {
		return err
	}
	res, err := s.cfg.Workers.Fail(r.Context(), id, &req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// taskInput: POST /v1/workers/tasks/{id}/input.
func (s *Server) taskInput(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	if err := s.workersOn(); err != nil {
		return err
	}
	var req wire.TaskInputRequest
	if err := s.decodeBody(w, r, &req, false); err != nil {
		return err
	}
	res, err := s.cfg.Workers.Input(r.Context(), id, &req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// taskRelease: POST /v1/workers/tasks/{id}/release.
func (s *Server) taskRelease(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	if err := s.workersOn(); err != nil {
		return err
	}
	var req wire.TaskToken
	if err := s.decodeBody(w, r, &req, false); err != nil {
		return err
	}
	res, err := s.cfg.Workers.Release(r.Context(), id, req.Token)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}
