package memory

import (
	"slices"
	"sync"
)

// runIndex holds the steps of each run, kept in step with the index by id
// (stepIndex.add, put and del maintain both): a read by run (StepList
// with a run id, which every execution makes when it loads its run) looks
// at the run's own rows instead of every step of the store, under the
// locks of their sessions instead of the exclusive lock.
type runIndex [indexShards]struct {
	mu sync.Mutex
	// m holds the rows of each run by run id: behind a pointer, so that
	// appending to them writes no map entry. A row's runPos is its place.
	m map[string]*runRows
	_ [40]byte
}

type runRows struct{ rows []*stepRow }

// ofRun returns the rows of a run, in no order. Only under the exclusive
// store lock.
func (ix *stepIndex) ofRun(runID string) []*stepRow {
	if rr := ix.runs[shardOf(runID)].m[runID]; rr != nil {
		return rr.rows
	}
	return nil
}

// runRows returns a copy of the rows of a run, in no order.
func (ix *stepIndex) runRows(runID string) []*stepRow {
	sh := &ix.runs[shardOf(runID)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if rr := sh.m[runID]; rr != nil {
		return slices.Clone(rr.rows)
	}
	return nil
}

func (ri *runIndex) track(row *stepRow) {
	run := row.runID()
	sh := &ri[shardOf(run)]
	sh.mu.Lock()
	rr := sh.m[run]
	if rr == nil {
		rr = &runRows{}
		sh.m[run] = rr
	}
	row.runPos = len(rr.rows)
	rr.rows = appendDoubling(rr.rows, row)
	sh.mu.Unlock()
}

// untrack removes row from its run's rows: the last row takes its place.
func (ri *runIndex) untrack(row *stepRow) {
	run := row.runID()
	sh := &ri[shardOf(run)]
	sh.mu.Lock()
	rr := sh.m[run]
	rows := rr.rows
	last := len(rows) - 1
	moved := rows[last]
	rows[row.runPos], moved.runPos = moved, row.runPos
	rows[last] = nil
	if last == 0 {
		delete(sh.m, run)
	} else {
		rr.rows = rows[:last]
	}
	sh.mu.Unlock()
}
