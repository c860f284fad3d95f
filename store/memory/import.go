package memory

import (
	"bytes"
	"context"
	"slices"
	"strings"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

var (
	_ store.Importer = (*Store)(nil)
	_ store.Exporter = (*Store)(nil)
)

// SessionImport implements store.Importer.
func (m *Store) SessionImport(_ context.Context, p *store.SessionImportParams) error {
	s, err := rules.CheckSessionImport(p)
	if err != nil {
		return err
	}
	if err := m.lock(); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if old, ok := m.sessions[s.ID]; ok {
		if rules.SameSession(old.s, s) {
			return nil
		}
		return rules.ImportConflict("session", s.ID)
	}
	if s.ParentSessionID != "" {
		if _, err := m.session(s.ParentSessionID); err != nil {
			return err
		}
	}
	m.sessions[s.ID] = newSessionRow(s)
	return nil
}

// RunImport implements store.Importer.
func (m *Store) RunImport(_ context.Context, p *store.RunImportParams) error {
	runs, err := rules.CheckRunImport(p)
	if err != nil {
		return err
	}
	if err := m.lock(); err != nil {
		return err
	}
	defer m.mu.Unlock()
	var add []*steptype.Run
	for _, r := range runs {
		if old := m.runs.get(r.ID); old != nil {
			if !rules.SameRun(old, r) {
				return rules.ImportConflict("run", r.ID)
			}
			continue
		}
		if _, err := m.session(r.SessionID); err != nil {
			return err
		}
		add = append(add, r)
	}
	for _, r := range add {
		m.setRun(r)
	}
	return nil
}

// StepImport implements store.Importer. The memory store keeps a
// session's steps in a slice, so steps are imported in sequence order:
// a step must be stored already or take the next free sequence (of the
// fork's own part, or of its inherited part while it is materialised).
func (m *Store) StepImport(_ context.Context, p *store.StepImportParams) error {
	steps, err := rules.CheckStepImport(p)
	if err != nil {
		return err
	}
	if err := m.lock(); err != nil {
		return err
	}
	defer m.mu.Unlock()
	type placed struct {
		sr  *sessionRow
		row *stepRow
		x   *rowExtra
		pre bool
	}
	var add []placed
	next := map[*sessionRow][2]int{} // staged lengths of steps and pre
	for _, is := range steps {
		in := is.Step
		sr, err := m.session(in.SessionID)
		if err != nil {
			return err
		}
		n, ok := next[sr]
		if !ok {
			n = [2]int{len(sr.steps), len(sr.pre)}
		}
		pre := in.Sequence <= sr.s.ForkSequence
		list, i := sr.steps, int(in.Sequence-sr.s.ForkSequence-1)
		if pre {
			list, i = sr.pre, int(in.Sequence-1)
		}
		norm := rules.NormalizeStep(rules.CloneStep(in))
		if i < len(list) {
			a, _ := rules.EncodeStep(m.unpack(list[i]))
			b, _ := rules.EncodeStep(norm)
			if list[i].id() != in.ID || !bytes.Equal(a, b) {
				return rules.ImportConflict("step", in.ID)
			}
			continue
		}
		k := 0
		if pre {
			k = 1
		}
		if i != n[k] {
			return rules.Conflict("memory store: step %q at sequence %d of %q is not the next one", in.ID, in.Sequence, in.SessionID)
		}
		if m.steps.get(in.ID) != nil {
			return rules.ImportConflict("step", in.ID)
		}
		n[k]++
		next[sr] = n
		row, x := newRow(norm, &sr.arena)
		add = append(add, placed{sr, row, x, pre})
	}
	for _, a := range add {
		m.extras.set(a.row, a.x)
		if a.pre {
			a.sr.pre = append(a.sr.pre, a.row)
			continue
		}
		a.sr.steps = append(a.sr.steps, a.row)
		m.steps.put(a.row.id(), a.row)
		m.waits.track(a.row)
	}
	return nil
}

// SessionDetach implements store.Importer.
func (m *Store) SessionDetach(_ context.Context, p *store.SessionDetachParams) error {
	if p == nil || p.ID == "" {
		return rules.Invalid("session id is required")
	}
	if err := m.lock(); err != nil {
		return err
	}
	defer m.mu.Unlock()
	sr, err := m.session(p.ID)
	if err != nil || sr.s.ParentSessionID == "" {
		return err
	}
	if int64(len(sr.pre)) != sr.s.ForkSequence {
		return rules.Conflict("fork %q holds %d of its %d inherited steps", sr.s.ID, len(sr.pre), sr.s.ForkSequence)
	}
	s := rules.CloneSession(sr.s)
	rules.Detach(s, p)
	sr.s, sr.parent = s, ""
	sr.steps = append(sr.pre, sr.steps...)
	sr.pre = nil
	for _, row := range sr.steps {
		m.steps.put(row.id(), row)
		m.waits.untrack(row)
		m.waits.track(row)
	}
	return nil
}

// SessionExport implements store.Exporter.
func (m *Store) SessionExport(_ context.Context, p *store.SessionExportParams) ([]*steptype.Session, error) {
	if p == nil {
		p = &store.SessionExportParams{}
	}
	limit, err := rules.ExportLimit(p.Limit, 100)
	if err != nil {
		return nil, err
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var all []*steptype.Session
	for id, sr := range m.sessions {
		if id > p.AfterID {
			all = append(all, sr.s)
		}
	}
	slices.SortFunc(all, func(a, b *steptype.Session) int { return strings.Compare(a.ID, b.ID) })
	out := []*steptype.Session{}
	for _, s := range all[:min(limit, len(all))] {
		out = append(out, rules.CloneSession(s))
	}
	return out, nil
}

// VectorExport implements store.VectorExporter. The memory store keeps
// vectors L2-normalized, so it exports them normalized: the same
// direction, which is all a cosine search compares.
func (m *Store) VectorExport(_ context.Context, p *store.VectorExportParams) ([]*store.ExportedVector, error) {
	if p == nil || p.SessionID == "" {
		return nil, rules.Invalid("vector export needs a session id")
	}
	limit, err := rules.ExportLimit(p.Limit, 100)
	if err != nil {
		return nil, err
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var out []*store.ExportedVector
	for emb, sp := range m.vectors() {
		for id, row := range sp.rows {
			if row.sessionID() != p.SessionID || id < p.AfterStepID || (id == p.AfterStepID && emb <= p.AfterEmbedder) {
				continue
			}
			out = append(out, &store.ExportedVector{Embedder: emb, StepID: id, Vector: sp.ix.Vector(id)})
		}
	}
	slices.SortFunc(out, func(a, b *store.ExportedVector) int {
		if c := strings.Compare(a.StepID, b.StepID); c != 0 {
			return c
		}
		return strings.Compare(a.Embedder, b.Embedder)
	})
	return out[:min(limit, len(out))], nil
}
