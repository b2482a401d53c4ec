-- shipsync shore: the management API's idempotency keys, and the audit log
-- made append-only with a trace id per entry.

-- One row per (actor, Idempotency-Key) of a management API write. A
-- repeat of the same request (same method, path and body hash) is
-- answered with the stored response instead of acting again; the same key
-- with another request is refused. status 0 marks a request still being
-- served (its row is written before it acts, so a concurrent repeat waits
-- for it instead of acting twice); a request that failed on a server error
-- removes its row, so it may be tried again.
CREATE TABLE sync_mgmt_idempotency (
    actor        text        NOT NULL,
    idem_key     text        NOT NULL CHECK (length(idem_key) BETWEEN 1 AND 200),
    method       text        NOT NULL,
    path         text        NOT NULL,
    request_hash bytea       NOT NULL,
    status       integer     NOT NULL DEFAULT 0,
    body         bytea       NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (actor, idem_key)
);
CREATE INDEX sync_mgmt_idempotency_age ON sync_mgmt_idempotency (created_at);

-- The trace id of the request that made an audit entry ('' : none), so an
-- entry can be matched with the logs of the request.
ALTER TABLE sync_audit_event ADD COLUMN IF NOT EXISTS trace_id text NOT NULL DEFAULT '';
CREATE INDEX sync_audit_event_at ON sync_audit_event (at, audit_id);
CREATE INDEX sync_audit_event_object ON sync_audit_event (object_type, object_id, audit_id);

-- The audit log is append-only: an UPDATE or DELETE of an entry is refused.
CREATE FUNCTION sync_audit_event_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'sync_audit_event is append-only';
END $$;
CREATE TRIGGER sync_audit_event_immutable BEFORE UPDATE OR DELETE ON sync_audit_event
    FOR EACH ROW EXECUTE FUNCTION sync_audit_event_immutable();
