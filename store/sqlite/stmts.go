package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/stepwise-run/stepwise/store/internal/sqlrow"
)

// stmts are the writer's prepared statements, bound to its connection.
type stmts struct {
	begin, commit, rollback, savepoint, release, rollbackTo *sql.Stmt

	sessionGet, sessionInsert, sessionAppend, sessionForks *sql.Stmt
	sessionAppendActive                                    *sql.Stmt
	stepBody, stepInsert, stepForResolve, stepResolve      *sql.Stmt
	stepWaiting                                            *sql.Stmt
	runGet, runInsert, runUpdate, runUpdateLight           *sql.Stmt
	taskByID, taskByKey, taskInsert, taskClaim             *sql.Stmt
	taskClaimNames, taskRenew, taskFinish                  *sql.Stmt

	all []*sql.Stmt
}

const runUpdateSQL = `UPDATE runs SET status = ?, cursor = ?, state = ?, output = ?, error = ?, step_count = ?,
	options = ?, lease_owner = ?, lease_expires = ?, updated_at = ?, finished_at = ? WHERE id = ?`

func prepare(ctx context.Context, conn *sql.Conn) (*stmts, error) {
	st := &stmts{}
	for _, p := range []struct {
		dst **sql.Stmt
		sql string
	}{
		{&st.begin, `BEGIN IMMEDIATE`},
		{&st.commit, `COMMIT`},
		{&st.rollback, `ROLLBACK`},
		{&st.savepoint, `SAVEPOINT req`},
		{&st.release, `RELEASE req`},
		{&st.rollbackTo, `ROLLBACK TO req`},
		{&st.sessionGet, `SELECT ` + sessionCols + ` FROM sessions WHERE id = ?`},
		{&st.sessionInsert, `INSERT INTO sessions (` + sessionCols + `, activity)
			VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12 / 1000000000)`},
		// The append of a second the session's activity is already in
		// leaves activity (and so sessions_activity_second) alone:
		// migration 00200.
		{&st.sessionAppend, `UPDATE sessions SET last_seq = ?, input_tokens = ?, output_tokens = ?, cost = ?, updated_at = ? WHERE id = ?`},
		{&st.sessionAppendActive, `UPDATE sessions SET last_seq = ?1, input_tokens = ?2, output_tokens = ?3, cost = ?4, updated_at = ?5,
			activity = ?5 / 1000000000 WHERE id = ?6`},
		{&st.sessionForks, `SELECT fork_sequence FROM sessions WHERE parent_session_id = ?`},
		{&st.stepBody, `SELECT body FROM steps WHERE id = ?`},
		{&st.stepInsert, `INSERT INTO steps (id, session_id, sequence, run_id, kind, status, hop, created_at, body, expires_at,
			role, input_tokens, output_tokens, cached_tokens, cost)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`},
		{&st.stepForResolve, `SELECT body, run_id FROM steps WHERE id = ?`},
		{&st.stepResolve, `UPDATE steps SET status = ?, body = ? WHERE id = ?`},
		{&st.stepWaiting, `SELECT EXISTS (SELECT 1 FROM steps WHERE run_id = ? AND status = 'waiting')`},
		{&st.runGet, `SELECT ` + sqlrow.RunCols + ` FROM runs WHERE id = ?`},
		{&st.runInsert, `INSERT INTO runs (` + sqlrow.RunCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`},
		{&st.runUpdate, runUpdateSQL},
		{&st.runUpdateLight, `UPDATE runs SET cursor = ?, state = ?, output = ?, error = ?, step_count = ?,
			options = ?, updated_at = ?, finished_at = ? WHERE id = ?`},
		{&st.taskByID, `SELECT ` + taskCols + ` FROM tasks WHERE id = ?`},
		{&st.taskByKey, `SELECT ` + taskCols + ` FROM tasks WHERE key = ?`},
		{&st.taskInsert, taskInsertSQL},
		{&st.taskClaim, taskClaimSQL},
		{&st.taskClaimNames, taskClaimNamesSQL},
		{&st.taskRenew, taskRenewSQL},
		{&st.taskFinish, taskFinishSQL},
	} {
		s, err := conn.PrepareContext(ctx, p.sql)
		if err != nil {
			st.close()
			return nil, err
		}
		*p.dst = s
		st.all = append(st.all, s)
	}
	return st, nil
}

func (st *stmts) close() error {
	var errs []error
	for _, s := range st.all {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}
