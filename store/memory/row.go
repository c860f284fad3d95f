package memory

import (
	"sync"
	"unsafe"

	"github.com/stepwise-run/stepwise/steptype"
)

// stepRow is a stored step: its packed bytes, its numbers and the fields
// reads filter on, with one pointer. The store keeps every row for its
// lifetime and the collector scans every chunk of rows in every cycle: a
// row had seven pointer words (its head and packed bytes, kind, status,
// metadata, vector, progress) and now has one, b. Its kind and status are
// codes; what few steps have (metadata that is not a flat map of scalars,
// a vector, progress) and the bytes of a step replaced after it was stored
// (setStep) are in the store's extras, which a row with x set has an entry
// in.
//
// b and n are written once, before the row is published, and never again:
// the row's id, session and run are read from them without any lock (see
// id). The rest is replaced (never changed in place) under the session's
// lock or the exclusive lock: a reader snapshots the row under the lock
// (Store.snap) and unpacks the snapshot after.
type stepRow struct {
	b      *byte // the step's first packed bytes: id, session id, run id first
	n      int   // their length
	seq    int64 // the row's sequence, never changed
	runPos int   // the row's place among its run's rows (runIndex), under that index's shard lock
	kc     uint8 // the kind's code (kinds); never changed
	sc     uint8 // the status's code (statuses)
	x      bool  // the row has an entry in the store's extras
	tomb   bool  // the row is a tombstone of the step-id index (stepindex.go), not a step
	packedNums
}

// Codes of the kinds and statuses a row keeps. Both sets are closed and
// every append and import is checked against them (rules.CheckAppend,
// rules.CheckImport); a value outside them would take codeOther and be
// read back from the packed bytes (kind) or the extras (status).
var (
	kinds = [...]steptype.Kind{"", steptype.KindUser, steptype.KindLLM, steptype.KindTool, steptype.KindAgent,
		steptype.KindInput, steptype.KindDecision, steptype.KindCustom, steptype.KindError, steptype.KindSystem}
	statuses = [...]steptype.StepStatus{"", steptype.StepCompleted, steptype.StepFailed, steptype.StepWaiting,
		steptype.StepExpired, steptype.StepCancelled}
)

const (
	codeOther   uint8 = 0xff
	codeWaiting uint8 = 3 // statuses[3]
)

func kindCode(k steptype.Kind) uint8 {
	for i, v := range kinds {
		if v == k {
			return uint8(i)
		}
	}
	return codeOther
}

func statusCode(s steptype.StepStatus) uint8 {
	for i, v := range statuses {
		if v == s {
			return uint8(i)
		}
	}
	return codeOther
}

// rowExtra is what a row keeps outside itself: immutable once stored (a
// change stores a new one).
type rowExtra struct {
	b      []byte // the packed bytes of the step that replaced the row's own (setStep), else nil
	meta   map[string]any
	vec    []float32
	prog   *steptype.Progress
	status steptype.StepStatus // a status without a code
}

// extras holds the rows' rowExtra, by row.
type extras struct {
	mu sync.Mutex
	m  map[*stepRow]*rowExtra
}

func (e *extras) get(row *stepRow) *rowExtra {
	e.mu.Lock()
	x := e.m[row]
	e.mu.Unlock()
	return x
}

// set stores x for row (nil: none). The caller holds the row's session
// lock or the exclusive lock, or the row is not published yet.
func (e *extras) set(row *stepRow, x *rowExtra) {
	if x == nil && !row.x {
		return
	}
	e.mu.Lock()
	if x == nil {
		delete(e.m, row)
	} else {
		if e.m == nil {
			e.m = map[*stepRow]*rowExtra{}
		}
		e.m[row] = x
	}
	e.mu.Unlock()
	row.x = x != nil
}

// drop removes the entry of a row that leaves the store.
func (e *extras) drop(row *stepRow) {
	if row.x {
		e.set(row, nil)
	}
}

// extraOf returns what of p and its status a row keeps in the extras, or
// nil.
func extraOf(p *packedStep, status steptype.StepStatus, replaced bool) *rowExtra {
	sc := statusCode(status)
	if p.meta == nil && p.vec == nil && p.prog == nil && sc != codeOther && !replaced {
		return nil
	}
	x := &rowExtra{meta: p.meta, vec: p.vec, prog: p.prog}
	if replaced {
		x.b = p.b
	}
	if sc == codeOther {
		x.status = status
	}
	return x
}

// newRow returns a row holding the stored form of s, from ar (nil:
// allocated on its own), and what it keeps in the extras (nil: nothing),
// which the caller stores when the row is.
func newRow(s *steptype.Step, ar *arena) (*stepRow, *rowExtra) {
	var p packedStep
	packTo(&p, s, ar)
	row := ar.row() // zero
	row.b, row.n = unsafe.SliceData(p.b), len(p.b)
	row.seq, row.kc, row.sc = s.Sequence, kindCode(s.Kind), statusCode(s.Status)
	row.packedNums = p.packedNums
	return row, extraOf(&p, s.Status, false)
}

// own returns the row's own packed bytes.
func (row *stepRow) own() []byte { return unsafe.Slice(row.b, row.n) }

// id is the step's id: the string aliases the row's immutable bytes, as
// sessionID's and runID's do.
func (row *stepRow) id() string {
	r := reader{b: row.own()}
	return r.str()
}

func (row *stepRow) sessionID() string {
	r := reader{b: row.own()}
	r.i += int(r.uvarint())
	return r.str()
}

func (row *stepRow) runID() string {
	r := reader{b: row.own()}
	r.i += int(r.uvarint())
	r.i += int(r.uvarint())
	return r.str()
}

// kind is the step's kind (never changed).
func (row *stepRow) kind() steptype.Kind {
	if row.kc != codeOther {
		return kinds[row.kc]
	}
	r := reader{b: row.own()}
	for range 3 {
		r.i += int(r.uvarint())
	}
	return steptype.Kind(r.str())
}

// waiting reports whether the step waits (see status).
func (row *stepRow) waiting() bool { return row.sc == codeWaiting }

// status is the step's status. The caller holds the row's session lock or
// the exclusive lock.
func (m *Store) status(row *stepRow) steptype.StepStatus {
	if row.sc != codeOther {
		return statuses[row.sc]
	}
	return m.extras.get(row).status
}

// snap returns a snapshot of the row's step, to unpack after unlocking
// (its bytes are immutable). The caller holds the row's session lock or
// the exclusive lock.
func (m *Store) snap(row *stepRow) packedStep {
	var x *rowExtra
	if row.x {
		x = m.extras.get(row)
	}
	return snapOf(row, x)
}

// snapOf is snap with the row's extras given (nil: none).
func snapOf(row *stepRow, x *rowExtra) packedStep {
	p := packedStep{b: row.own(), packedNums: row.packedNums}
	if x != nil {
		if x.b != nil {
			p.b = x.b
		}
		p.meta, p.vec, p.prog = x.meta, x.vec, x.prog
	}
	return p
}

// unpack returns a copy of the row's step. The caller holds the row's
// session lock or the exclusive lock.
func (m *Store) unpack(row *stepRow) *steptype.Step {
	p := m.snap(row)
	return p.step()
}
