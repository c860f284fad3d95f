package postgres

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// runColTypes are the types of the columns sqlrow.RunCols, in order.
var runColTypes = [...]uint32{
	pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, // id, session_id, agent, parent_run_id, parent_step_id
	pgtype.Int4OID, pgtype.TextOID, pgtype.TextOID, pgtype.ByteaOID, // hop, status, cursor, state
	pgtype.TextOID, pgtype.TextOID, pgtype.ByteaOID, pgtype.Int8OID, pgtype.ByteaOID, // input, output, error, step_count, options
	pgtype.TextOID, pgtype.Int8OID, pgtype.Int8OID, pgtype.Int8OID, pgtype.Int8OID, // lease_owner, lease_expires, created_at, updated_at, finished_at
}

// scanGroupRuns reads the runs a group locked (rows of sqlrow.RunCols), as scanRuns
// does, decoding pgx's raw values itself: the run rows of a group are read
// for every append, and pgx's scan of 19 columns through their scan plans,
// and a new string for every text column, were a twentieth of the bench
// process's CPU. A text equal to what the group already holds is that
// string: the run's id (ids, sorted), its session's (sessionIDs, sorted),
// a status, and the agent, owner, cursor, input and output of the row
// read before. Rows in another shape go to scanRuns.
func scanGroupRuns(rows pgx.Rows, ids, sessionIDs []string) ([]*steptype.Run, error) {
	if !decodable(rows.FieldDescriptions(), runColTypes[:]) {
		return scanRuns(rows)
	}
	defer rows.Close()
	// The rows are at most the ids: allocated together, one allocation
	// per group instead of one per run.
	slab := make([]steptype.Run, len(ids))
	out := make([]*steptype.Run, 0, len(ids))
	arena := rawArena{rows: len(ids)} // the rows' state and options
	var prev *steptype.Run
	for rows.Next() {
		v := rows.RawValues()
		if err := checkRaw(v, runColTypes[:], "run"); err != nil {
			return nil, err
		}
		var r *steptype.Run
		if len(out) < len(slab) {
			r = &slab[len(out)]
		} else {
			r = new(steptype.Run)
		}
		var errb []byte
		r.ID = known(v[0], ids)
		r.SessionID = known(v[1], sessionIDs)
		r.Hop = int(int32(binary.BigEndian.Uint32(v[5])))
		r.Status = runStatus(v[6])
		r.State, errb, r.StepCount, r.Options = arena.own(v[8]), v[11], int64(binary.BigEndian.Uint64(v[12])), arena.own(v[13])
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
			if err := json.Unmarshal(errb, r.Error); err != nil {
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

// rawArena copies the byte columns of the rows of one read, as a run's or
// session's JSON, into shared buffers (a new one when the last is full; a
// full one stays alive through the values in it) instead of allocating
// each value.
type rawArena struct {
	buf  []byte
	rows int // rows read: a buffer is sized for their values, up to 4 KB
}

// own returns a copy of b, nil when b is empty (as rules.Raw). The copy's
// capacity is its length: appending to it never writes into the next.
func (a *rawArena) own(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	if cap(a.buf)-len(a.buf) < len(b) {
		// Room for two values like b per row (a lone append reads one row:
		// a few hundred bytes, not kilobytes).
		a.buf = make([]byte, 0, max(min(4<<10, 2*len(b)*max(a.rows, 1)), len(b)))
	}
	start := len(a.buf)
	a.buf = append(a.buf, b...)
	return json.RawMessage(a.buf[start:len(a.buf):len(a.buf)])
}

// sessionColTypes are the types of sessionCols, in order.
var sessionColTypes = [...]uint32{
	pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, // id, agent, title, parent_session_id
	pgtype.Int8OID, pgtype.Int8OID, pgtype.Int8OID, pgtype.Int8OID, // fork_sequence, last_seq, input_tokens, output_tokens
	pgtype.Float8OID, pgtype.ByteaOID, pgtype.Int8OID, pgtype.Int8OID, // cost, metadata, created_at, updated_at
}

// decodable reports whether rows described by fds come as types, the
// numbers and byte strings in binary (text is the same either way).
func decodable(fds []pgconn.FieldDescription, types []uint32) bool {
	if len(fds) != len(types) {
		return false
	}
	for i, fd := range fds {
		if fd.DataTypeOID != types[i] || (fd.DataTypeOID != pgtype.TextOID && fd.Format != pgtype.BinaryFormatCode) {
			return false
		}
	}
	return true
}

// checkRaw checks that the raw values v fit types: no NULL text or
// number, numbers of their binary width.
func checkRaw(v [][]byte, types []uint32, what string) error {
	if len(v) != len(types) {
		return fmt.Errorf("postgres: a %s row of %d columns, want %d", what, len(v), len(types))
	}
	for i, b := range v {
		width := -1
		switch types[i] {
		case pgtype.TextOID:
			if b == nil {
				return fmt.Errorf("postgres: %s column %d is NULL", what, i)
			}
		case pgtype.Int4OID:
			width = 4
		case pgtype.Int8OID, pgtype.Float8OID:
			width = 8
		}
		if width >= 0 && len(b) != width {
			return fmt.Errorf("postgres: %s column %d: %d bytes, want %d", what, i, len(b), width)
		}
	}
	return nil
}

// scanGroupSessions reads the sessions a group locked (rows of
// sessionCols), as scanSession does, decoding pgx's raw values itself
// (see scanGroupRuns): the id is the group's string (ids, sorted), the
// agent and title the previous row's when equal. Rows in another shape go
// to scanSession.
func scanGroupSessions(rows pgx.Rows, ids []string, each func(*steptype.Session)) error {
	defer rows.Close()
	if !decodable(rows.FieldDescriptions(), sessionColTypes[:]) {
		for rows.Next() {
			s, err := scanSession(rows)
			if err != nil {
				return err
			}
			each(s)
		}
		return rows.Err()
	}
	var prev *steptype.Session
	slab := make([]steptype.Session, len(ids)) // the rows, one allocation per group
	arena := rawArena{rows: len(ids)}          // their metadata
	n := 0
	for rows.Next() {
		v := rows.RawValues()
		if err := checkRaw(v, sessionColTypes[:], "session"); err != nil {
			return err
		}
		var s *steptype.Session
		if n < len(slab) {
			s = &slab[n]
		} else {
			s = new(steptype.Session)
		}
		n++
		*s = steptype.Session{ID: known(v[0], ids), ParentSessionID: string(v[3])}
		if prev != nil {
			s.Agent, s.Title = same(v[1], prev.Agent), same(v[2], prev.Title)
		} else {
			s.Agent, s.Title = string(v[1]), string(v[2])
		}
		s.ForkSequence, s.LastSequence = int64(binary.BigEndian.Uint64(v[4])), int64(binary.BigEndian.Uint64(v[5]))
		s.InputTokens, s.OutputTokens = int64(binary.BigEndian.Uint64(v[6])), int64(binary.BigEndian.Uint64(v[7]))
		s.Cost = math.Float64frombits(binary.BigEndian.Uint64(v[8]))
		s.Metadata = arena.own(v[9])
		s.CreatedAt, s.UpdatedAt = fromNanos(int64(binary.BigEndian.Uint64(v[10]))), fromNanos(int64(binary.BigEndian.Uint64(v[11])))
		each(s)
		prev = s
	}
	return rows.Err()
}
