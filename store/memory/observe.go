package memory

import (
	"context"
	"slices"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// obsData is the observation data of one Store. Records bound to a step
// keep the step's row and are dropped once that row is no longer the stored
// row of its id (truncate, session delete), as a database cascade would.
type obsData struct {
	seq         int64 // insertion order
	evals       map[string]*evalRec
	annotations map[string]*annRec
	blobs       map[string]*blobRec
	attachments map[string]*attRec
	events      map[string][]*eventRec // by step id, in Index order
	eventIDs    map[string]*eventRec
	datasets    map[string]*datasetRec
	experiments map[string]*experimentRec
}

// owner ties a record to what it depends on: a step row, or a session row.
type owner struct {
	stepID string
	row    *stepRow
	sessID string
	sess   *sessionRow
}

func (m *Store) alive(o owner) bool {
	if o.row != nil {
		return m.steps.get(o.stepID) == o.row
	}
	return m.sessions[o.sessID] == o.sess
}

type evalRec struct {
	e   store.Eval
	own owner
	seq int64
}

type annRec struct {
	a   store.Annotation
	own owner
	seq int64
}

type blobRec struct{ b store.Blob }

type attRec struct {
	a   store.Attachment
	own owner
	seq int64
}

type eventRec struct {
	e   store.StepEvent
	own owner
	seq int64
}

// obs returns the Store's observation data. Called with m.mu held.
func (m *Store) obs() *obsData {
	m.obsOnce.Do(func() {
		m.obsd = &obsData{
			evals: map[string]*evalRec{}, annotations: map[string]*annRec{}, blobs: map[string]*blobRec{},
			attachments: map[string]*attRec{}, events: map[string][]*eventRec{}, eventIDs: map[string]*eventRec{},
			datasets: map[string]*datasetRec{}, experiments: map[string]*experimentRec{},
		}
	})
	return m.obsd
}

func (d *obsData) next() int64 { d.seq++; return d.seq }

// stepOwner returns the owner of records bound to step id.
func (m *Store) stepOwner(id string) (owner, *stepRow, error) {
	if id == "" {
		return owner{}, nil, rules.Invalid("step id is required")
	}
	row := m.steps.get(id)
	if row == nil {
		return owner{}, nil, rules.NotFound("step", id)
	}
	return owner{stepID: id, row: row}, row, nil
}

// EvalPut implements store.ObservationStore.
func (m *Store) EvalPut(_ context.Context, p *store.EvalPutParams) (*store.Eval, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	d := m.obs()
	e := cloneEval(p.Eval)
	var own owner
	switch e.TargetKind {
	case store.TargetStep:
		o, row, err := m.stepOwner(e.TargetID)
		if err != nil {
			return nil, err
		}
		own, e.SessionID, e.RunID = o, row.sessionID(), row.runID()
	case store.TargetRun:
		r := m.runs.get(e.TargetID)
		if r == nil {
			return nil, rules.NotFound("run", e.TargetID)
		}
		own, e.SessionID, e.RunID = owner{sessID: r.SessionID, sess: m.sessions[r.SessionID]}, r.SessionID, r.ID
	case store.TargetSession:
		sr, err := m.session(e.TargetID)
		if err != nil {
			return nil, err
		}
		own, e.SessionID, e.RunID = owner{sessID: sr.s.ID, sess: sr}, sr.s.ID, ""
	}
	now := rules.Now(p.Now)
	e.CreatedAt, e.UpdatedAt = now, now
	rec := &evalRec{e: *e, own: own, seq: d.next()}
	if old := d.evals[e.ID]; old != nil && m.alive(old.own) {
		rec.e.CreatedAt, rec.seq = old.e.CreatedAt, old.seq
	}
	d.evals[e.ID] = rec
	return cloneEval(&rec.e), nil
}

// EvalGet implements store.ObservationStore.
func (m *Store) EvalGet(_ context.Context, p *store.EvalGetParams) (*store.Eval, error) {
	if p == nil || p.ID == "" {
		return nil, rules.Invalid("eval id is required")
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	rec := m.obs().evals[p.ID]
	if rec == nil || !m.alive(rec.own) {
		return nil, rules.NotFound("eval", p.ID)
	}
	return cloneEval(&rec.e), nil
}

// EvalList implements store.ObservationStore.
func (m *Store) EvalList(_ context.Context, p *store.EvalListParams) ([]*store.Eval, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var recs []*evalRec
	for _, rec := range m.obs().evals {
		e := &rec.e
		if !m.alive(rec.own) || (p.TargetKind != "" && e.TargetKind != p.TargetKind) ||
			(p.TargetID != "" && e.TargetID != p.TargetID) || (p.SessionID != "" && e.SessionID != p.SessionID) ||
			(p.RunID != "" && e.RunID != p.RunID) || (p.Source != "" && e.Source != p.Source) ||
			(p.Name != "" && e.Name != p.Name) {
			continue
		}
		recs = append(recs, rec)
	}
	slices.SortFunc(recs, func(a, b *evalRec) int { return int(a.seq - b.seq) })
	out := make([]*store.Eval, 0, len(recs))
	for _, rec := range recs {
		if p.Limit > 0 && len(out) == p.Limit {
			break
		}
		out = append(out, cloneEval(&rec.e))
	}
	return out, nil
}

// EvalDelete implements store.ObservationStore.
func (m *Store) EvalDelete(_ context.Context, p *store.EvalDeleteParams) error {
	if p == nil || p.ID == "" {
		return rules.Invalid("eval id is required")
	}
	if err := m.lock(); err != nil {
		return err
	}
	defer m.mu.Unlock()
	d := m.obs()
	rec := d.evals[p.ID]
	if rec == nil || !m.alive(rec.own) {
		return rules.NotFound("eval", p.ID)
	}
	delete(d.evals, p.ID)
	return nil
}

// AnnotationPut implements store.ObservationStore.
func (m *Store) AnnotationPut(_ context.Context, p *store.AnnotationPutParams) (*store.Annotation, error) {
	if p == nil {
		return nil, rules.Invalid("nil annotation params")
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	d := m.obs()
	own, row, err := m.stepOwner(p.StepID)
	if err != nil {
		return nil, err
	}
	rec := d.annotations[p.StepID]
	if rec == nil || !m.alive(rec.own) {
		rec = &annRec{a: store.Annotation{StepID: p.StepID, SessionID: row.sessionID()}, own: own, seq: d.next()}
	}
	p.Apply(&rec.a.Annotations)
	rec.a.UpdatedAt = rules.Now(p.Now)
	d.annotations[p.StepID] = rec
	a := rec.a
	return &a, nil
}

// AnnotationList implements store.ObservationStore.
func (m *Store) AnnotationList(_ context.Context, p *store.AnnotationListParams) ([]*store.Annotation, error) {
	if p == nil || (len(p.StepIDs) == 0 && p.SessionID == "") {
		return nil, rules.Invalid("annotation list needs step ids or a session id")
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var recs []*annRec
	for _, rec := range m.obs().annotations {
		if !m.alive(rec.own) || (p.SessionID != "" && rec.a.SessionID != p.SessionID) ||
			(len(p.StepIDs) > 0 && !slices.Contains(p.StepIDs, rec.a.StepID)) {
			continue
		}
		recs = append(recs, rec)
	}
	slices.SortFunc(recs, func(a, b *annRec) int { return int(a.seq - b.seq) })
	out := make([]*store.Annotation, len(recs))
	for i, rec := range recs {
		a := rec.a
		out[i] = &a
	}
	return out, nil
}

func cloneEval(e *store.Eval) *store.Eval {
	c := *e
	c.Details = rules.Raw(e.Details)
	return &c
}
