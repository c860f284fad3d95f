package postgres

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
	"github.com/stepwise-run/stepwise/store/internal/sqlrow"
)

// putBlob stores data once under its hash and returns the stored blob
// (without data). A concurrent put of the same bytes inserts nothing (ON
// CONFLICT DO NOTHING) and reads the row the other one wrote.
func putBlob(ctx context.Context, tx *wtx, data []byte, contentType string, now time.Time) (*store.Blob, error) {
	b := &store.Blob{Hash: store.BlobHash(data), Size: int64(len(data)), ContentType: contentType, CreatedAt: now}
	var created int64
	err := tx.QueryRow(ctx, `SELECT content_type, created_at FROM blobs WHERE hash = $1 FOR KEY SHARE`, b.Hash).Scan(&b.ContentType, &created)
	if err == nil {
		b.CreatedAt = fromNanos(created)
		return b, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, err
	}
	tag, err := tx.Exec(ctx, `INSERT INTO blobs (hash, size, content_type, data, created_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (hash) DO NOTHING`, b.Hash, b.Size, b.ContentType, data, nanos(now))
	if err != nil {
		return nil, err
	}
	if tag.RowsAffected() == 0 {
		return nil, errRaced // put by a concurrent transaction: read it
	}
	return b, nil
}

// BlobPut implements store.ObservationStore.
func (s *Store) BlobPut(ctx context.Context, p *store.BlobPutParams) (*store.Blob, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	now := rules.Now(p.Now)
	return inTx(s, ctx, func(tx *wtx) (*store.Blob, error) { return putBlob(ctx, tx, p.Data, p.ContentType, now) })
}

// BlobGet implements store.ObservationStore.
func (s *Store) BlobGet(ctx context.Context, p *store.BlobGetParams) (*store.Blob, error) {
	if p == nil || p.Hash == "" {
		return nil, rules.Invalid("blob hash is required")
	}
	return queryOne(s, ctx, "blob", p.Hash, sqlrow.ScanBlob, `SELECT `+sqlrow.BlobCols+` FROM blobs WHERE hash = $1`, p.Hash)
}

// BlobPrune implements store.ObservationStore. Rows that a concurrent
// transaction is attaching are locked (FOR KEY SHARE by putBlob, and by
// the foreign-key checks of attachments and step events); they are
// skipped, not waited for.
func (s *Store) BlobPrune(ctx context.Context, p *store.BlobPruneParams) (int64, error) {
	if p == nil || p.Before.IsZero() {
		return 0, rules.Invalid("blob prune needs a Before time")
	}
	before := nanos(rules.Now(p.Before))
	return inTx(s, ctx, func(tx *wtx) (int64, error) {
		tag, err := tx.Exec(ctx, `DELETE FROM blobs WHERE hash IN (
			SELECT b.hash FROM blobs b WHERE b.created_at < $1
			AND NOT EXISTS (SELECT 1 FROM attachments a WHERE a.blob_hash = b.hash)
			AND NOT EXISTS (SELECT 1 FROM step_events e WHERE e.blob_hash = b.hash)
			FOR UPDATE SKIP LOCKED)`, before)
		return tag.RowsAffected(), err
	})
}

// AttachmentAdd implements store.ObservationStore.
func (s *Store) AttachmentAdd(ctx context.Context, p *store.AttachmentAddParams) (*store.Attachment, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	a := *p.Attachment
	a.CreatedAt = rules.Now(p.Now)
	return inTx(s, ctx, func(tx *wtx) (*store.Attachment, error) {
		var err error
		if a.SessionID, a.RunID, err = stepOwner(ctx, tx, a.StepID, "FOR KEY SHARE"); err != nil {
			return nil, err
		}
		err = tx.QueryRow(ctx, `SELECT content_type, size FROM blobs WHERE hash = $1 FOR KEY SHARE`, a.BlobHash).Scan(&a.ContentType, &a.Size)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, rules.NotFound("blob", a.BlobHash)
		}
		if err != nil {
			return nil, err
		}
		_, err = tx.Exec(ctx, `INSERT INTO attachments (`+sqlrow.AttachmentCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
			a.ID, a.StepID, a.SessionID, a.RunID, a.Name, a.Kind, a.ContentType, a.Size, a.BlobHash, nanos(a.CreatedAt))
		if conflictOn(err, "attachments_pkey") {
			return nil, rules.Conflict("attachment %q already exists", a.ID)
		}
		return &a, err
	})
}

// AttachmentGet implements store.ObservationStore.
func (s *Store) AttachmentGet(ctx context.Context, p *store.AttachmentGetParams) (*store.Attachment, error) {
	if p == nil || p.ID == "" {
		return nil, rules.Invalid("attachment id is required")
	}
	return queryOne(s, ctx, "attachment", p.ID, sqlrow.ScanAttachment, `SELECT `+sqlrow.AttachmentCols+` FROM attachments WHERE id = $1`, p.ID)
}

// AttachmentList implements store.ObservationStore.
func (s *Store) AttachmentList(ctx context.Context, p *store.AttachmentListParams) ([]*store.Attachment, error) {
	if p == nil || (p.StepID == "" && p.SessionID == "") {
		return nil, rules.Invalid("attachment list needs a step id or a session id")
	}
	var w where
	w.eq("step_id", p.StepID)
	w.eq("session_id", p.SessionID)
	return queryAll(s, ctx, sqlrow.ScanAttachment, `SELECT `+sqlrow.AttachmentCols+` FROM attachments WHERE `+w.sql()+` ORDER BY seq`, w.args...)
}

// StepEventAppend implements store.ObservationStore, in one transaction: a
// failing event writes nothing. The steps' rows are locked FOR NO KEY
// UPDATE, in id order, so concurrent appends to one step number their
// events one after the other.
func (s *Store) StepEventAppend(ctx context.Context, p *store.StepEventAppendParams) ([]*store.StepEvent, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	now := rules.Now(p.Now)
	ids := make([]string, 0, len(p.Events))
	for _, e := range p.Events {
		ids = append(ids, e.StepID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	return inTx(s, ctx, func(tx *wtx) ([]*store.StepEvent, error) {
		type owner struct {
			session, run string
			next         int64
		}
		owners := make(map[string]*owner, len(ids))
		for _, id := range ids {
			var o owner
			var err error
			if o.session, o.run, err = stepOwner(ctx, tx, id, "FOR NO KEY UPDATE"); err != nil {
				return nil, err
			}
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM step_events WHERE step_id = $1`, id).Scan(&o.next); err != nil {
				return nil, err
			}
			owners[id] = &o
		}
		out := make([]*store.StepEvent, 0, len(p.Events))
		for _, in := range p.Events {
			e := *in
			o := owners[e.StepID]
			e.SessionID, e.RunID, e.Index = o.session, o.run, o.next
			o.next++
			if err := rules.PlaceEventPayload(&e, in.Payload, now, func(data []byte) (*store.Blob, error) {
				return putBlob(ctx, tx, data, "application/json", now)
			}); err != nil {
				return nil, err
			}
			_, err := tx.Exec(ctx, `INSERT INTO step_events (`+sqlrow.EventCols+`)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`,
				e.ID, e.StepID, e.SessionID, e.RunID, e.Index, e.Type, e.Name, e.Attempt, nanos(e.StartedAt),
				int64(e.Duration), e.Error, blob(e.Payload), nullString(e.BlobHash), e.Size, nanos(now))
			if conflictOn(err, "step_events_pkey") {
				return nil, rules.Conflict("step event %q already exists", e.ID)
			}
			if err != nil {
				return nil, err
			}
			out = append(out, &e)
		}
		return out, nil
	})
}

// StepEventList implements store.ObservationStore.
func (s *Store) StepEventList(ctx context.Context, p *store.StepEventListParams) ([]*store.StepEvent, error) {
	if p == nil || (p.StepID == "" && p.RunID == "" && p.SessionID == "") {
		return nil, rules.Invalid("step event list needs a step id, a run id or a session id")
	}
	var w where
	w.eq("step_id", p.StepID)
	w.eq("run_id", p.RunID)
	w.eq("session_id", p.SessionID)
	w.in("type", p.Types)
	return queryAll(s, ctx, sqlrow.ScanEvent, `SELECT `+sqlrow.EventCols+` FROM step_events WHERE `+w.sql()+` ORDER BY seq`+limitSQL(p.Limit), w.args...)
}
