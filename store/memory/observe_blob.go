package memory

import (
	"context"
	"slices"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// putBlob stores data once; called with m.mu held.
func (d *obsData) putBlob(data []byte, contentType string, p *store.BlobPutParams) *store.Blob {
	hash := store.BlobHash(data)
	if rec := d.blobs[hash]; rec != nil {
		b := rec.b
		b.Data = nil
		return &b
	}
	b := store.Blob{Hash: hash, Size: int64(len(data)), ContentType: contentType,
		Data: append([]byte(nil), data...), CreatedAt: rules.Now(p.Now)}
	d.blobs[hash] = &blobRec{b: b}
	b.Data = nil
	return &b
}

// BlobPut implements store.ObservationStore.
func (m *Store) BlobPut(_ context.Context, p *store.BlobPutParams) (*store.Blob, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	return m.obs().putBlob(p.Data, p.ContentType, p), nil
}

// BlobGet implements store.ObservationStore.
func (m *Store) BlobGet(_ context.Context, p *store.BlobGetParams) (*store.Blob, error) {
	if p == nil || p.Hash == "" {
		return nil, rules.Invalid("blob hash is required")
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	rec := m.obs().blobs[p.Hash]
	if rec == nil {
		return nil, rules.NotFound("blob", p.Hash)
	}
	b := rec.b
	b.Data = append([]byte(nil), rec.b.Data...)
	return &b, nil
}

// BlobPrune implements store.ObservationStore.
func (m *Store) BlobPrune(_ context.Context, p *store.BlobPruneParams) (int64, error) {
	if p == nil || p.Before.IsZero() {
		return 0, rules.Invalid("blob prune needs a Before time")
	}
	if err := m.lock(); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	d := m.obs()
	used := map[string]bool{}
	for id, rec := range d.attachments {
		if !m.alive(rec.own) {
			delete(d.attachments, id)
			continue
		}
		used[rec.a.BlobHash] = true
	}
	for id, recs := range d.events {
		if len(recs) > 0 && !m.alive(recs[0].own) {
			for _, rec := range recs {
				delete(d.eventIDs, rec.e.ID)
			}
			delete(d.events, id)
			continue
		}
		for _, rec := range recs {
			if rec.e.BlobHash != "" {
				used[rec.e.BlobHash] = true
			}
		}
	}
	before := rules.Now(p.Before)
	var n int64
	for hash, rec := range d.blobs {
		if !used[hash] && rec.b.CreatedAt.Before(before) {
			delete(d.blobs, hash)
			n++
		}
	}
	return n, nil
}

// AttachmentAdd implements store.ObservationStore.
func (m *Store) AttachmentAdd(_ context.Context, p *store.AttachmentAddParams) (*store.Attachment, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	d := m.obs()
	a := *p.Attachment
	own, row, err := m.stepOwner(a.StepID)
	if err != nil {
		return nil, err
	}
	b := d.blobs[a.BlobHash]
	if b == nil {
		return nil, rules.NotFound("blob", a.BlobHash)
	}
	if old := d.attachments[a.ID]; old != nil && m.alive(old.own) {
		return nil, rules.Conflict("attachment %q already exists", a.ID)
	}
	a.SessionID, a.RunID = row.sessionID(), row.runID()
	a.ContentType, a.Size = b.b.ContentType, b.b.Size
	a.CreatedAt = rules.Now(p.Now)
	d.attachments[a.ID] = &attRec{a: a, own: own, seq: d.next()}
	return &a, nil
}

// AttachmentGet implements store.ObservationStore.
func (m *Store) AttachmentGet(_ context.Context, p *store.AttachmentGetParams) (*store.Attachment, error) {
	if p == nil || p.ID == "" {
		return nil, rules.Invalid("attachment id is required")
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	rec := m.obs().attachments[p.ID]
	if rec == nil || !m.alive(rec.own) {
		return nil, rules.NotFound("attachment", p.ID)
	}
	a := rec.a
	return &a, nil
}

// AttachmentList implements store.ObservationStore.
func (m *Store) AttachmentList(_ context.Context, p *store.AttachmentListParams) ([]*store.Attachment, error) {
	if p == nil || (p.StepID == "" && p.SessionID == "") {
		return nil, rules.Invalid("attachment list needs a step id or a session id")
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var recs []*attRec
	for _, rec := range m.obs().attachments {
		if m.alive(rec.own) && (p.StepID == "" || rec.a.StepID == p.StepID) &&
			(p.SessionID == "" || rec.a.SessionID == p.SessionID) {
			recs = append(recs, rec)
		}
	}
	slices.SortFunc(recs, func(a, b *attRec) int { return int(a.seq - b.seq) })
	out := make([]*store.Attachment, len(recs))
	for i, rec := range recs {
		a := rec.a
		out[i] = &a
	}
	return out, nil
}

// StepEventAppend implements store.ObservationStore. Everything is checked
// before anything is written.
func (m *Store) StepEventAppend(_ context.Context, p *store.StepEventAppendParams) ([]*store.StepEvent, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	d := m.obs()
	ids := map[string]bool{}
	owners := make([]owner, len(p.Events))
	for i, in := range p.Events {
		own, _, err := m.stepOwner(in.StepID)
		if err != nil {
			return nil, err
		}
		if old := d.eventIDs[in.ID]; ids[in.ID] || (old != nil && m.alive(old.own)) {
			return nil, rules.Conflict("step event %q already exists", in.ID)
		}
		ids[in.ID] = true
		owners[i] = own
	}
	now := rules.Now(p.Now)
	out := make([]*store.StepEvent, len(p.Events))
	for i, in := range p.Events {
		row := owners[i].row
		recs := d.events[in.StepID]
		if len(recs) > 0 && !m.alive(recs[0].own) {
			recs = nil
		}
		e := *in
		e.SessionID, e.RunID, e.Index = row.sessionID(), row.runID(), int64(len(recs))
		// A blob put in memory cannot fail.
		_ = rules.PlaceEventPayload(&e, in.Payload, now, func(data []byte) (*store.Blob, error) {
			return d.putBlob(data, "application/json", &store.BlobPutParams{Now: now}), nil
		})
		rec := &eventRec{e: e, own: owners[i], seq: d.next()}
		d.events[in.StepID] = append(recs, rec)
		d.eventIDs[e.ID] = rec
		c := e
		c.Payload = rules.Raw(e.Payload)
		out[i] = &c
	}
	return out, nil
}

// StepEventList implements store.ObservationStore.
func (m *Store) StepEventList(_ context.Context, p *store.StepEventListParams) ([]*store.StepEvent, error) {
	if p == nil || (p.StepID == "" && p.RunID == "" && p.SessionID == "") {
		return nil, rules.Invalid("step event list needs a step id, a run id or a session id")
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var recs []*eventRec
	for stepID, rs := range m.obs().events {
		if len(rs) == 0 || !m.alive(rs[0].own) || (p.StepID != "" && stepID != p.StepID) {
			continue
		}
		for _, rec := range rs {
			e := &rec.e
			if (p.RunID == "" || e.RunID == p.RunID) && (p.SessionID == "" || e.SessionID == p.SessionID) &&
				(len(p.Types) == 0 || slices.Contains(p.Types, e.Type)) {
				recs = append(recs, rec)
			}
		}
	}
	slices.SortFunc(recs, func(a, b *eventRec) int { return int(a.seq - b.seq) })
	var out []*store.StepEvent
	for _, rec := range recs {
		if p.Limit > 0 && len(out) == p.Limit {
			break
		}
		e := rec.e
		e.Payload = rules.Raw(rec.e.Payload)
		out = append(out, &e)
	}
	return out, nil
}
