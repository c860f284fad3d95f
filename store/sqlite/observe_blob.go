package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
	"github.com/stepwise-run/stepwise/store/internal/sqlrow"
)

// putBlob stores data once under its hash and returns the stored blob
// (without data), in the writer tx.
func (tx *wtx) putBlob(data []byte, contentType string, now time.Time) (*store.Blob, error) {
	b := &store.Blob{Hash: store.BlobHash(data), Size: int64(len(data)), ContentType: contentType, CreatedAt: now}
	var created int64
	err := tx.conn().QueryRowContext(bg, `SELECT content_type, created_at FROM blobs WHERE hash = ?`, b.Hash).Scan(&b.ContentType, &created)
	if err == nil {
		b.CreatedAt = fromNanos(created)
		return b, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	_, err = tx.conn().ExecContext(bg, `INSERT INTO blobs (hash, size, content_type, data, created_at) VALUES (?, ?, ?, ?, ?)`,
		b.Hash, b.Size, b.ContentType, data, nanos(now))
	return b, err
}

// BlobPut implements store.ObservationStore.
func (s *Store) BlobPut(ctx context.Context, p *store.BlobPutParams) (*store.Blob, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	now := rules.Now(p.Now)
	return write(s, ctx, func(tx *wtx) (*store.Blob, error) { return tx.putBlob(p.Data, p.ContentType, now) })
}

// BlobGet implements store.ObservationStore.
func (s *Store) BlobGet(ctx context.Context, p *store.BlobGetParams) (*store.Blob, error) {
	if p == nil || p.Hash == "" {
		return nil, rules.Invalid("blob hash is required")
	}
	return queryOne(s, ctx, "blob", p.Hash, sqlrow.ScanBlob, `SELECT `+sqlrow.BlobCols+` FROM blobs WHERE hash = ?`, p.Hash)
}

// BlobPrune implements store.ObservationStore.
func (s *Store) BlobPrune(ctx context.Context, p *store.BlobPruneParams) (int64, error) {
	if p == nil || p.Before.IsZero() {
		return 0, rules.Invalid("blob prune needs a Before time")
	}
	before := nanos(rules.Now(p.Before))
	return write(s, ctx, func(tx *wtx) (int64, error) {
		res, err := tx.conn().ExecContext(bg, `DELETE FROM blobs WHERE created_at < ?
			AND NOT EXISTS (SELECT 1 FROM attachments a WHERE a.blob_hash = blobs.hash)
			AND NOT EXISTS (SELECT 1 FROM step_events e WHERE e.blob_hash = blobs.hash)`, before)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	})
}

// AttachmentAdd implements store.ObservationStore.
func (s *Store) AttachmentAdd(ctx context.Context, p *store.AttachmentAddParams) (*store.Attachment, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	a := *p.Attachment
	a.CreatedAt = rules.Now(p.Now)
	return write(s, ctx, func(tx *wtx) (*store.Attachment, error) {
		var err error
		if a.SessionID, a.RunID, err = tx.stepOwner(a.StepID); err != nil {
			return nil, err
		}
		err = tx.conn().QueryRowContext(bg, `SELECT content_type, size FROM blobs WHERE hash = ?`, a.BlobHash).Scan(&a.ContentType, &a.Size)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, rules.NotFound("blob", a.BlobHash)
		}
		if err != nil {
			return nil, err
		}
		_, err = tx.conn().ExecContext(bg, `INSERT INTO attachments (`+sqlrow.AttachmentCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			a.ID, a.StepID, a.SessionID, a.RunID, a.Name, a.Kind, a.ContentType, a.Size, a.BlobHash, nanos(a.CreatedAt))
		if isUnique(err) {
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
	return queryOne(s, ctx, "attachment", p.ID, sqlrow.ScanAttachment, `SELECT `+sqlrow.AttachmentCols+` FROM attachments WHERE id = ?`, p.ID)
}

// AttachmentList implements store.ObservationStore.
func (s *Store) AttachmentList(ctx context.Context, p *store.AttachmentListParams) ([]*store.Attachment, error) {
	if p == nil || (p.StepID == "" && p.SessionID == "") {
		return nil, rules.Invalid("attachment list needs a step id or a session id")
	}
	var w where
	w.eq("step_id", p.StepID)
	w.eq("session_id", p.SessionID)
	return queryAll(s, ctx, sqlrow.ScanAttachment, `SELECT `+sqlrow.AttachmentCols+` FROM attachments WHERE `+w.sql()+` ORDER BY rowid`, w.args...)
}

// StepEventAppend implements store.ObservationStore. The writer runs the
// whole call in one savepoint: a failing event writes nothing.
func (s *Store) StepEventAppend(ctx context.Context, p *store.StepEventAppendParams) ([]*store.StepEvent, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	now := rules.Now(p.Now)
	return write(s, ctx, func(tx *wtx) ([]*store.StepEvent, error) {
		out := make([]*store.StepEvent, 0, len(p.Events))
		for _, in := range p.Events {
			e := *in
			var err error
			if e.SessionID, e.RunID, err = tx.stepOwner(e.StepID); err != nil {
				return nil, err
			}
			if err := rules.PlaceEventPayload(&e, in.Payload, now, func(data []byte) (*store.Blob, error) {
				return tx.putBlob(data, "application/json", now)
			}); err != nil {
				return nil, err
			}
			err = tx.conn().QueryRowContext(bg, `INSERT INTO step_events (`+sqlrow.EventCols+`)
				VALUES (?, ?, ?, ?, (SELECT count(*) FROM step_events WHERE step_id = ?), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
				RETURNING idx`,
				e.ID, e.StepID, e.SessionID, e.RunID, e.StepID, e.Type, e.Name, e.Attempt, nanos(e.StartedAt),
				int64(e.Duration), e.Error, blob(e.Payload), nullString(e.BlobHash), e.Size, nanos(now)).Scan(&e.Index)
			if isUnique(err) {
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
	return queryAll(s, ctx, sqlrow.ScanEvent, `SELECT `+sqlrow.EventCols+` FROM step_events WHERE `+w.sql()+` ORDER BY rowid`+limitSQL(p.Limit), w.args...)
}
