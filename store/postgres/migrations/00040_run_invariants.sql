-- +goose Up
-- At most one unfinished top-level run per session (store.ErrSessionBusy).
-- Databases written before this invariant may hold several: the oldest
-- stays, the later ones are cancelled (with a reason) so that the index can
-- be built.
UPDATE runs SET status = 'cancelled', lease_owner = '', lease_expires = 0, finished_at = updated_at,
    error = convert_to('{"message":"cancelled by the upgrade: an older unfinished run of the session came first","class":"permanent","recoverable":false,"code":"duplicate_run"}', 'UTF8')
WHERE hop = 0 AND status IN ('queued', 'running', 'waiting') AND EXISTS (
    SELECT 1 FROM runs o WHERE o.session_id = runs.session_id AND o.hop = 0
        AND o.status IN ('queued', 'running', 'waiting')
        AND (o.created_at < runs.created_at OR (o.created_at = runs.created_at AND o.id < runs.id)));
CREATE UNIQUE INDEX runs_one_unfinished ON runs (session_id) WHERE hop = 0 AND status IN ('queued', 'running', 'waiting');

-- Input requests by expiry (store.InputExpiry, unix nanoseconds; 0: none),
-- for StepExpiring.
ALTER TABLE steps ADD COLUMN expires_at BIGINT NOT NULL DEFAULT 0;
UPDATE steps SET expires_at = (extract(epoch FROM (convert_from(body, 'UTF8')::jsonb #>> '{inputs,expires_at}')::timestamptz) * 1000000)::bigint * 1000
WHERE status = 'waiting' AND kind = 'input' AND convert_from(body, 'UTF8')::jsonb #>> '{inputs,expires_at}' IS NOT NULL;
CREATE INDEX steps_expiry ON steps (expires_at) WHERE status = 'waiting' AND expires_at > 0;

-- +goose Down
DROP INDEX steps_expiry;
ALTER TABLE steps DROP COLUMN expires_at;
DROP INDEX runs_one_unfinished;
