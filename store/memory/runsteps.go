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
	m  map[string][]*stepRow // by run id; a row's runPos is its place
	_  [40]byte
}

// ofRun returns the rows of a run, in no order. Only under the exclusive
// store lock.
func (ix *stepIndex) ofRun(runID string) []*stepRow {
	return ix.runs[shardOf(runID)].m[runID]
}

// runRows returns a copy of the rows of a run, in no order.
func (ix *stepIndex) runRows(runID string) []*stepRow {
	sh := &ix.runs[shardOf(runID)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return slices.Clone(sh.m[runID])
}

func (ri *runIndex) track(row *stepRow) {
	run := row.runID()
	sh := &ri[shardOf(run)]
	sh.mu.Lock()
	rows := sh.m[run]
	row.runPos = len(rows)
	sh.m[run] = appendDoubling(rows, row)
	sh.mu.Unlock()
}

// untrack removes row from its run's rows: the last row takes its place.
func (ri *runIndex) untrack(row *stepRow) {
	run := row.runID()
	sh := &ri[shardOf(run)]
	sh.mu.Lock()
	rows := sh.m[run]
	last := len(rows) - 1
	moved := rows[last]
	rows[row.runPos], moved.runPos = moved, row.runPos
	rows[last] = nil
	if last == 0 {
		delete(sh.m, run)
	} else {
		sh.m[run] = rows[:last]
	}
	sh.mu.Unlock()
}
