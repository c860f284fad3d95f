package sqlite

import (
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
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
		"session stats": strings.NewReplacer("?1", "'a'", "?2", "0").Replace(sessionStatsSQL),
		"metrics tail": strings.NewReplacer("?1", "0", "?2", "60", "?3", "0", "?4", "1", "?5", "''", "?6", "''", "?7", "0").
			Replace(metricsSQL(metricsTailSQL, &store.MetricsParams{})),
		"run stats":  `SELECT status, runs FROM session_run_stats WHERE session_id = 'a' AND runs > 0`,
		"agent runs": `SELECT status, runs FROM agent_run_stats WHERE agent = 'a' AND runs > 0`,
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
		if name == "session stats" || name == "metrics tail" {
			// The tail (migration 00200) is read by its rowid range, never
			// through an index over every step of a session or a range.
			if !strings.Contains(strings.Join(plan, "\n"), "SEARCH steps USING INTEGER PRIMARY KEY (rowid>?)") {
				t.Errorf("%s: the tail is not read by rowid: %q", name, plan)
			}
		}
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
