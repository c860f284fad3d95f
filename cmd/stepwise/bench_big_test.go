package main_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/sqlite"
)

type fillOut struct {
	Sessions, Forks, Runs, Steps, Evals, Vectors int
	Failed                                       int    `json:"failed_runs"`
	LongSessionID                                string `json:"long_session_id"`
}

// benchFillAndQueries fills db through the binary with a small history and
// times the read paths on it; it returns what fill reported.
func benchFillAndQueries(t *testing.T, db string) fillOut {
	t.Helper()
	out, errOut, code := stepwise(t, t.TempDir(), "--db", db, "bench", "fill", "--steps", "3000", "--sessions", "60", "--agents", "3", "--long-session", "500", "--json")
	var f fillOut
	if code != 0 || json.Unmarshal([]byte(out), &f) != nil {
		t.Fatalf("bench fill: exit %d\n%s\n%s", code, out, errOut)
	}
	if f.Sessions != 61 || f.Steps < 3500 || f.Steps > 3620 || f.Forks == 0 || f.Failed == 0 || f.Evals == 0 || f.Vectors == 0 || f.Runs < f.Sessions || f.LongSessionID == "" {
		t.Fatalf("bench fill stored %+v", f)
	}
	out, errOut, code = stepwise(t, t.TempDir(), "--db", db, "bench", "queries", "--calls", "2", "--agent", "agent-1", "--json")
	var q struct {
		Queries []struct {
			Name  string  `json:"name"`
			Path  string  `json:"path"`
			P95   float64 `json:"p95_ms"`
			Bytes int     `json:"bytes"`
		} `json:"queries"`
	}
	// The dashboard's reads, then those of opening the long session.
	if code != 0 || json.Unmarshal([]byte(out), &q) != nil || len(q.Queries) != 16 || !strings.Contains(q.Queries[15].Path, f.LongSessionID) {
		t.Fatalf("bench queries: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, r := range q.Queries {
		if r.Bytes < 100 || r.P95 <= 0 {
			t.Errorf("query %s: %+v", r.Name, r)
		}
	}
	return f
}

// `stepwise bench fill` stores a realistic history on SQLite (forks,
// failed runs, evals, vectors, consistent session totals) and `stepwise
// bench queries` reads it back through the API.
func TestBenchFillSQLite(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "big.db")
	f := benchFillAndQueries(t, db)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: db, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var sessions, forks, steps int
	cursor := ""
	for {
		page, err := st.SessionList(ctx, &store.SessionListParams{Cursor: cursor, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page.Sessions {
			sessions++
			if s.ParentSessionID != "" {
				forks++
			}
			list, err := st.StepList(ctx, &store.StepListParams{SessionID: s.ID})
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(list)) != s.LastSequence {
				t.Fatalf("session %s: %d steps readable, last sequence %d", s.ID, len(list), s.LastSequence)
			}
			var in int64
			for i, st := range list {
				if st.Sequence != int64(i+1) {
					t.Fatalf("session %s: step %d has sequence %d", s.ID, i, st.Sequence)
				}
				if st.Sequence > s.ForkSequence {
					steps++
					in += st.Metrics.InputTokens
				}
			}
			if in != s.InputTokens || list[0].Kind != steptype.KindUser {
				t.Fatalf("session %s: input tokens %d, totals say %d; first step %s", s.ID, in, s.InputTokens, list[0].Kind)
			}
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	if sessions != f.Sessions || forks != f.Forks || steps != f.Steps {
		t.Fatalf("stored %d sessions, %d forks, %d own steps; fill said %+v", sessions, forks, steps, f)
	}
	if _, errOut, code := stepwise(t, t.TempDir(), "--db", filepath.Join(t.TempDir(), "empty.db"), "bench", "queries"); code == 0 || !strings.Contains(errOut, "bench fill") {
		t.Errorf("bench queries on an empty database: exit %d %q", code, errOut)
	}
}

// The same on PostgreSQL.
func TestBenchFillPostgres(t *testing.T) {
	t.Parallel()
	benchFillAndQueries(t, postgresSchemaDSN(t))
}
