package memory

import (
	"slices"
	"sync"
)

// stepIndex is the index of steps by id together with the steps of each
// run, kept in step with it: a read by run (StepList with a run id, which
// every execution makes when it loads its run) looks at the run's own rows
// instead of every step of the store, under the locks of their sessions
// instead of the exclusive lock.
type stepIndex struct {
	*index[*stepRow]
	byRun [indexShards]struct {
		mu sync.Mutex
		m  map[string][]*stepRow // by run id; a row's runPos is its place
		_  [40]byte
	}
}

func newStepIndex() *stepIndex {
	ix := &stepIndex{index: newIndex[*stepRow]()}
	for i := range ix.byRun {
		ix.byRun[i].m = map[string][]*stepRow{}
	}
	return ix
}

// add sets the row of id unless id is present, and reports whether it did.
func (ix *stepIndex) add(id string, row *stepRow) bool {
	if !ix.index.add(id, row) {
		return false
	}
	ix.track(row)
	return true
}

// put sets the row of id, replacing the one there.
func (ix *stepIndex) put(id string, row *stepRow) {
	sh := &ix.shards[shardOf(id)]
	sh.mu.Lock()
	old := sh.m[id]
	sh.m[id] = row
	sh.mu.Unlock()
	if old == row {
		return
	}
	if old != nil {
		ix.untrack(old)
	}
	ix.track(row)
}

// del removes id if its row is row.
func (ix *stepIndex) del(id string, row *stepRow) {
	sh := &ix.shards[shardOf(id)]
	sh.mu.Lock()
	found := sh.m[id] == row
	if found {
		delete(sh.m, id)
	}
	sh.mu.Unlock()
	if found {
		ix.untrack(row)
	}
}

// ofRun returns the rows of a run, in no order. Only under the exclusive
// store lock.
func (ix *stepIndex) ofRun(runID string) []*stepRow {
	return ix.byRun[shardOf(runID)].m[runID]
}

// runRows returns a copy of the rows of a run, in no order.
func (ix *stepIndex) runRows(runID string) []*stepRow {
	sh := &ix.byRun[shardOf(runID)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return slices.Clone(sh.m[runID])
}

func (ix *stepIndex) track(row *stepRow) {
	sh := &ix.byRun[shardOf(row.runID)]
	sh.mu.Lock()
	rows := sh.m[row.runID]
	row.runPos = len(rows)
	sh.m[row.runID] = append(rows, row)
	sh.mu.Unlock()
}

// untrack removes row from its run's rows: the last row takes its place.
func (ix *stepIndex) untrack(row *stepRow) {
	sh := &ix.byRun[shardOf(row.runID)]
	sh.mu.Lock()
	rows := sh.m[row.runID]
	last := len(rows) - 1
	moved := rows[last]
	rows[row.runPos], moved.runPos = moved, row.runPos
	rows[last] = nil
	if last == 0 {
		delete(sh.m, row.runID)
	} else {
		sh.m[row.runID] = rows[:last]
	}
	sh.mu.Unlock()
}
