package postgres

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// runColTypes are the types of runCols, in order.
var runColTypes = [...]uint32{
	pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, // id, session_id, agent, parent_run_id, parent_step_id
	pgtype.Int4OID, pgtype.TextOID, pgtype.TextOID, pgtype.ByteaOID, // hop, status, cursor, state
	pgtype.TextOID, pgtype.TextOID, pgtype.ByteaOID, pgtype.Int8OID, pgtype.ByteaOID, // input, output, error, step_count, options
	pgtype.TextOID, pgtype.Int8OID, pgtype.Int8OID, pgtype.Int8OID, pgtype.Int8OID, // lease_owner, lease_expires, created_at, updated_at, finished_at
}

// runsDecodable reports whether rows of runCols come as runColTypes, the
// numbers and byte strings in binary (text is the same either way).
func runsDecodable(fds []pgconn.FieldDescription) bool {
	if len(fds) != len(runColTypes) {
		return false
	}
	for i, fd := range fds {
		if fd.DataTypeOID != runColTypes[i] || (fd.DataTypeOID != pgtype.TextOID && fd.Format != pgtype.BinaryFormatCode) {
			return false
		}
	}
	return true
}

// scanGroupRuns reads the runs a group locked (rows of runCols), as scanRuns
// does, decoding pgx's raw values itself: the run rows of a group are read
// for every append, and pgx's scan of 19 columns through their scan plans,
// and a new string for every text column, were a twentieth of the bench
// process's CPU. A text equal to what the group already holds is that
// string: the run's id (ids, sorted), its session's (sessionIDs, sorted),
// a status, and the agent, owner, cursor, input and output of the row
// read before. Rows in another shape go to scanRuns.
func scanGroupRuns(rows pgx.Rows, ids, sessionIDs []string) ([]*steptype.Run, error) {
	if !runsDecodable(rows.FieldDescriptions()) {
		return scanRuns(rows)
	}
	defer rows.Close()
	var out []*steptype.Run
	var prev *steptype.Run
	for rows.Next() {
		v := rows.RawValues()
		if len(v) != len(runColTypes) {
			return nil, fmt.Errorf("postgres: a run row of %d columns, want %d", len(v), len(runColTypes))
		}
		r := &steptype.Run{}
		var errb []byte
		var err error
		for i, b := range v {
			switch runColTypes[i] {
			case pgtype.TextOID:
				if b == nil {
					return nil, fmt.Errorf("postgres: run column %d is NULL", i)
				}
			case pgtype.Int4OID:
				if len(b) != 4 {
					return nil, fmt.Errorf("postgres: run column %d: %d bytes for an integer", i, len(b))
				}
			case pgtype.Int8OID:
				if len(b) != 8 {
					return nil, fmt.Errorf("postgres: run column %d: %d bytes for a bigint", i, len(b))
				}
			}
		}
		r.ID = known(v[0], ids)
		r.SessionID = known(v[1], sessionIDs)
		r.Hop = int(int32(binary.BigEndian.Uint32(v[5])))
		r.Status = runStatus(v[6])
		r.State, errb, r.StepCount, r.Options = owned(v[8]), v[11], int64(binary.BigEndian.Uint64(v[12])), owned(v[13])
		r.ParentRunID, r.ParentStepID = string(v[3]), string(v[4])
		if prev != nil {
			r.Agent, r.Cursor, r.Input = same(v[2], prev.Agent), same(v[7], prev.Cursor), same(v[9], prev.Input)
			r.Output, r.LeaseOwner = same(v[10], prev.Output), same(v[14], prev.LeaseOwner)
		} else {
			r.Agent, r.Cursor, r.Input, r.Output, r.LeaseOwner = string(v[2]), string(v[7]), string(v[9]), string(v[10]), string(v[14])
		}
		r.LeaseExpires, r.CreatedAt = fromNanos(int64(binary.BigEndian.Uint64(v[15]))), fromNanos(int64(binary.BigEndian.Uint64(v[16])))
		r.UpdatedAt, r.FinishedAt = fromNanos(int64(binary.BigEndian.Uint64(v[17]))), fromNanos(int64(binary.BigEndian.Uint64(v[18])))
		if len(errb) > 0 {
			r.Error = new(steptype.StepError)
			if err = json.Unmarshal(errb, r.Error); err != nil {
				return nil, fmt.Errorf("%w: run %q error column: %v", store.ErrCorrupt, r.ID, err)
			}
		}
		out = append(out, r)
		prev = r
	}
	return out, rows.Err()
}

// known returns the string of sorted equal to b, or b as a new string
// (comparisons of string(b) make no string; a call's argument would).
func known(b []byte, sorted []string) string {
	lo, hi := 0, len(sorted)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if sorted[m] < string(b) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(sorted) && sorted[lo] == string(b) {
		return sorted[lo]
	}
	return string(b)
}

// same returns s when b holds it, else b as a new string.
func same(b []byte, s string) string {
	if string(b) == s {
		return s
	}
	return string(b)
}

// runStatus returns the status b names, without a new string for the
// statuses a run can have.
func runStatus(b []byte) steptype.RunStatus {
	for _, s := range [...]steptype.RunStatus{steptype.RunRunning, steptype.RunQueued, steptype.RunWaiting,
		steptype.RunCompleted, steptype.RunFailed, steptype.RunCancelled} {
		if string(b) == string(s) {
			return s
		}
	}
	return steptype.RunStatus(b)
}

// owned is a copy of a byte column as a run's JSON (nil when empty, as
// rules.Raw).
func owned(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(slices.Clone(b))
}
