package server

import (
	"context"
	"net/http"
	"time"
)

// healthTimeout bounds the store's health check.
const healthTimeout = 2 * time.Second

// Health is the body of a healthy GET /v1/health.
type Health struct {
	Status string `json:"status"` // "ok"
}

// health: GET /v1/health, 200 {"status":"ok"} while the store can take
// writes, else 503 storage_unavailable whose detail says why (a SQLite
// file deleted under the server, a database that does not answer).
func (s *Server) health(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
	defer cancel()
	if err := s.eng.Store().Health(ctx); err != nil {
		s.log.Error("stepwise server: unhealthy", "err", err)
		p := newProblem(http.StatusServiceUnavailable, CodeStorageDown, "unhealthy: "+err.Error())
		p.retryAfter = retryAfterDown
		writeProblem(w, p)
		return nil
	}
	writeJSON(w, http.StatusOK, Health{Status: "ok"})
	return nil
}
