-- shipsync shore: ordering per source stream, the rule registry, the apply
-- workflow's state, receipts and conflict cases.

-- Processing state no longer lives on the inbox row: the row is the event as
-- received (immutable), released_at says when its stream was contiguous up
-- to it (it was handed to the per-key processing queue then), and the
-- terminal result is the event's receipt.
ALTER TABLE sync_inbox_event DROP COLUMN status, DROP COLUMN reason,
    ADD COLUMN released_at timestamptz;

-- A sequence number is used once per source stream: a second event claiming
-- it is refused (it contradicts the stream).
CREATE UNIQUE INDEX sync_inbox_event_stream
    ON sync_inbox_event (origin_node_id, source_connector_id, source_partition, source_sequence);

-- One ordered source stream of a node: (connector, partition), whose events
-- carry contiguous source_sequence numbers from 1. Every event below
-- next_sequence has been received and released to processing; events above
-- a missing number are held (counted in held) until the gap is filled.
CREATE TABLE sync_stream (
    origin_node_id      text        NOT NULL,
    source_connector_id text        NOT NULL,
    source_partition    text        NOT NULL,
    next_sequence       numeric(20) NOT NULL CHECK (next_sequence >= 1),
    held                integer     NOT NULL DEFAULT 0 CHECK (held >= 0),
    -- When the current gap was first seen (NULL: no gap), and when a resend
    -- of it was last requested.
    gap_since           timestamptz,
    resend_asked_at     timestamptz,
    updated_at          timestamptz NOT NULL,
    PRIMARY KEY (origin_node_id, source_connector_id, source_partition)
);
CREATE INDEX sync_stream_gap ON sync_stream (gap_since) WHERE gap_since IS NOT NULL;

-- A request to a node to send a stream's missing sequence range again.
CREATE TABLE sync_resend_request (
    request_id          bigserial   PRIMARY KEY,
    node_id             text        NOT NULL,
    source_connector_id text        NOT NULL,
    source_partition    text        NOT NULL,
    from_sequence       numeric(20) NOT NULL,
    to_sequence         numeric(20) NOT NULL,
    created_at          timestamptz NOT NULL
);
CREATE INDEX sync_resend_request_node ON sync_resend_request (node_id, request_id);

-- The shore side of a rule version: which table of the shore database its
-- events write, the key columns (in key order) and every column an event may
-- carry. Immutable once registered (a change is a new version).
CREATE TABLE sync_rule (
    rule_id      text        NOT NULL,
    rule_version bigint      NOT NULL CHECK (rule_version >= 1),
    source_table text        NOT NULL,
    target_table text        NOT NULL,
    key_columns  text[]      NOT NULL CHECK (cardinality(key_columns) >= 1),
    columns      text[]      NOT NULL,
    -- Whether an INSERT may re-create a record whose last known state is a
    -- tombstone.
    insert_over_tombstone boolean NOT NULL DEFAULT true,
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (rule_id, rule_version)
);

-- What the shore knows of each record's current version: the revision token,
-- who produced it, and whether it is a tombstone.
CREATE TABLE sync_record_head (
    rule_id          text        NOT NULL,
    pk_hash          bytea       NOT NULL,
    current_revision text        NOT NULL,
    origin_node_id   text        NOT NULL,
    event_id         uuid,
    tombstone        boolean     NOT NULL,
    updated_at       timestamptz NOT NULL,
    PRIMARY KEY (rule_id, pk_hash)
);

-- The apply workflow's internal state per event (job id = inbox id):
-- TARGET_COMMITTED is written on its own right after the shore database
-- committed the write, so recovery knows the write happened; the terminal
-- states are written with the receipt.
CREATE TABLE sync_apply_job (
    inbox_id   bigint      PRIMARY KEY REFERENCES sync_inbox_event (id),
    state      text        NOT NULL CHECK (state IN ('TARGET_COMMITTED', 'FINALIZED', 'CONFLICT_CAPTURED', 'REJECTED')),
    -- How the outcome was learnt: 'write' (rows affected, or the target row
    -- as read for a conflict), 'job' (a TARGET_COMMITTED record), 'ledger'
    -- (the shore database's applied-event ledger, after a crash between its
    -- commit and this table), 'target' (the target row holds the event's
    -- write), 'head' (the record head alone decided).
    learnt_by  text        NOT NULL CHECK (learnt_by IN ('write', 'job', 'ledger', 'target', 'head')),
    updated_at timestamptz NOT NULL
);

-- The terminal result of each uplink event, served to its node by cursor.
-- txid orders the feed: a reader serves only rows of transactions older than
-- every one still running, so a receipt committing late is never skipped.
CREATE TABLE sync_event_receipt (
    receipt_id       bigserial   PRIMARY KEY,
    origin_node_id   text        NOT NULL,
    event_id         uuid        NOT NULL,
    result           text        NOT NULL CHECK (result IN ('APPLIED', 'CONFLICT_RECORDED', 'REJECTED', 'EXPIRED_APPROVED')),
    reason           text        NOT NULL DEFAULT '',
    detail           text        NOT NULL DEFAULT '',
    conflict_id      uuid,
    applied_revision text        NOT NULL DEFAULT '',
    decided_at       timestamptz NOT NULL,
    txid             xid8        NOT NULL DEFAULT pg_current_xact_id(),
    UNIQUE (origin_node_id, event_id)
);
CREATE INDEX sync_event_receipt_feed ON sync_event_receipt (origin_node_id, txid, receipt_id);

-- A conflict: an incoming change made over a revision the shore no longer
-- has. One active case per record; active_conflict_key sorts the two
-- revisions so the same pair seen from either side is one case.
CREATE TABLE sync_conflict_case (
    conflict_id         uuid        PRIMARY KEY,
    rule_id             text        NOT NULL,
    rule_version        bigint      NOT NULL,
    pk_hash             bytea       NOT NULL,
    pk_text             text        NOT NULL,
    active_conflict_key text        NOT NULL,
    state               text        NOT NULL CHECK (state IN ('DETECTED', 'AUTO_DECIDING', 'PENDING_MANUAL', 'DECIDED',
                                                              'DISPATCHED', 'ACKNOWLEDGED', 'EXPIRED', 'CANCELLED')),
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL
);
CREATE UNIQUE INDEX sync_conflict_case_active_record ON sync_conflict_case (rule_id, pk_hash)
    WHERE state IN ('DETECTED', 'AUTO_DECIDING', 'PENDING_MANUAL', 'DECIDED', 'DISPATCHED');
CREATE UNIQUE INDEX sync_conflict_case_active_key ON sync_conflict_case (active_conflict_key)
    WHERE state IN ('DETECTED', 'AUTO_DECIDING', 'PENDING_MANUAL', 'DECIDED', 'DISPATCHED');

-- The evidence of a case: each incoming event that conflicted, with the
-- shore's version as found (from the record head or the target row).
CREATE TABLE sync_conflict_evidence (
    evidence_id              bigserial   PRIMARY KEY,
    conflict_id              uuid        NOT NULL REFERENCES sync_conflict_case (conflict_id),
    origin_node_id           text        NOT NULL,
    event_id                 uuid        NOT NULL,
    operation                text        NOT NULL,
    incoming_base_revision   text        NOT NULL,
    incoming_result_revision text        NOT NULL,
    current_revision         text        NOT NULL,
    current_origin_node_id   text        NOT NULL,
    current_event_id         text        NOT NULL,
    current_tombstone        boolean     NOT NULL,
    -- The target row as read (a serialized RowImage), NULL when the shore's
    -- version came from the record head or the row is absent.
    current_row              bytea,
    found_in                 text        NOT NULL CHECK (found_in IN ('record_head', 'target')),
    recorded_at              timestamptz NOT NULL,
    UNIQUE (conflict_id, origin_node_id, event_id)
);
