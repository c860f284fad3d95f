package server

import (
	"context"
	"net/http"
	"strings"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
)

// maxRowScan bounds the sessions one status-filtered page reads; a page
// that reaches it returns fewer rows and a cursor to go on.
const maxRowScan = 2000

// StatusIdle is the status of a session row without any run (a session
// recorded by ingest, or created and not run yet).
const StatusIdle = "idle"

// sessionRows: GET /v1/dashboard/sessions?agent=&status=&q=&cursor=&limit=,
// the sessions list of the dashboard: sessions newest activity first, each
// with its latest run's status, run count and duration; status filters by
// that status (comma-separated: queued, running, waiting, completed,
// failed, cancelled, idle).
func (s *Server) sessionRows(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := queryInt(r, "limit", 200)
	if err != nil {
		return err
	}
	if limit == 0 {
		limit = 50
	}
	for _, name := range []string{"agent", "q", "cursor", "status"} {
		if len(q.Get(name)) > 1024 {
			return badParam("query parameter %s is longer than 1024 bytes", name)
		}
	}
	want := map[string]bool{}
	for _, st := range strings.Split(q.Get("status"), ",") {
		if st = strings.TrimSpace(st); st == "" {
			continue
		}
		if st != StatusIdle && !steptype.RunStatus(st).Valid() {
			return badParam("status %q: want queued, running, waiting, completed, failed, cancelled or idle", st)
		}
		want[st] = true
	}
	out := &wire.SessionRowPage{Sessions: []*wire.SessionRow{}}
	cursor, scanned := q.Get("cursor"), 0
	for len(out.Sessions) < int(limit) {
		page, err := s.eng.Store().SessionList(r.Context(), &store.SessionListParams{Agent: q.Get("agent"), Query: q.Get("q"), Cursor: cursor, Limit: int(limit) - len(out.Sessions)})
		if err != nil {
			return err
		}
		rows, err := s.rowsOf(r.Context(), page.Sessions)
		if err != nil {
			return err
		}
		for _, row := range rows {
			if len(want) == 0 || want[row.Status] {
				out.Sessions = append(out.Sessions, row)
			}
		}
		scanned += len(page.Sessions)
		cursor = page.Next
		if cursor == "" || scanned >= maxRowScan {
			break
		}
	}
	out.NextCursor = cursor
	writeJSON(w, http.StatusOK, out)
	return nil
}

// rowsOf makes the rows of a page of sessions, with one query for every
// session's latest top-level run.
func (s *Server) rowsOf(ctx context.Context, sessions []*stepwise.Session) ([]*wire.SessionRow, error) {
	out := make([]*wire.SessionRow, 0, len(sessions))
	ids := make([]string, len(sessions))
	for i, sess := range sessions {
		ids[i] = sess.ID
	}
	latest, err := s.eng.Store().RunLatest(ctx, &store.RunLatestParams{SessionIDs: ids})
	if err != nil {
		return nil, err
	}
	for _, sess := range sessions {
		row := &wire.SessionRow{Session: sess, Status: StatusIdle, DurationMS: sess.UpdatedAt.Sub(sess.CreatedAt).Milliseconds()}
		if l, ok := latest[sess.ID]; ok {
			row.Status, row.RunID, row.Runs = string(l.Status), l.RunID, l.Runs
		}
		out = append(out, row)
	}
	return out, nil
}

// sessionRuns: GET /v1/sessions/{id}/runs?limit=, the session's runs,
// newest first (sub-agent runs included, with their hop and parent run);
// limit keeps the newest (the dashboard's session page reads 100, so a
// session of 200,000 turns opens as fast as one of 10).
func (s *Server) sessionRuns(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit", 10000)
	if err != nil {
		return err
	}
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	runs, err := s.eng.Store().RunList(r.Context(), &store.RunListParams{SessionID: sess.ID, Limit: int(limit)})
	if err != nil {
		return err
	}
	if runs == nil {
		runs = []*stepwise.Run{}
	}
	writeJSON(w, http.StatusOK, &wire.RunList{Runs: runs})
	return nil
}
