package sqlite

import (
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store/internal/sqlrow"
)

// The reads of a big database go through indexes, never a scan of a
// table: the query plans say so (a wall-clock test could not).
func TestBigReadPlans(t *testing.T) {
	st, err := Open(t.Context(), Config{Path: t.TempDir() + "/plan.db"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for name, q := range map[string]string{
		// the engine's orphan sweep (RunList of waiting runs)
		"waiting runs":  `SELECT ` + sqlrow.RunCols + ` FROM runs WHERE 1 = 1 AND status = '` + string(steptype.RunWaiting) + `' ORDER BY created_at DESC, id DESC LIMIT 1000`,
		"run latest":    strings.Replace(runLatestSQL, "%s", "'a', 'b'", 1),
		"session stats": `SELECT kind, role, steps, input_tokens, output_tokens, cached_tokens, cost FROM session_step_stats WHERE session_id = 'a' AND steps > 0`,
		"run stats":     `SELECT status, runs FROM session_run_stats WHERE session_id = 'a' AND runs > 0`,
		"agent runs":    `SELECT status, runs FROM agent_run_stats WHERE agent = 'a' AND runs > 0`,
	} {
		rows, err := st.rdb.QueryContext(t.Context(), `EXPLAIN QUERY PLAN `+q)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		for _, d := range plan {
			f := strings.Fields(d)
			if len(f) >= 2 && f[0] == "SCAN" && tables[f[1]] && !strings.Contains(d, "COVERING INDEX") && !strings.Contains(d, "USING INDEX runs_waiting") { // a partial index holds only what is read
				t.Errorf("%s: a scan of table %s in the plan %q", name, f[1], plan)
			}
		}
	}
}

// tables are the tables a read must not scan.
var tables = map[string]bool{"runs": true, "steps": true, "sessions": true, "session_step_stats": true, "session_run_stats": true, "agent_run_stats": true}
