-- relay engine line, version 4: archival of terminal processing rows (seed 000
-- §9.3, PROC_STATE → PROC_STATE_HST). relay_message_history holds the full row
-- of every archived message (payload included) as it was when archived; the
-- main table keeps an ARCHIVED shadow row with the id and identity, so the
-- identity's unique constraint keeps deduplicating (INV-9). Every timestamp is
-- written from a parameter (the engine's Clock), never from now(). The history
-- needs its own retention job (G-HST-RETENTION); rows are never updated.

CREATE TABLE relay_message_history (
    pipeline           text        NOT NULL,
    id                 bigint      NOT NULL,
    key                text        NOT NULL DEFAULT '',
    -- The terminal state the row had when archived.
    state              text        NOT NULL,
    attempts           integer     NOT NULL DEFAULT 0,
    next_attempt_at    timestamptz,
    error_class        text        NOT NULL DEFAULT '',
    last_error         text        NOT NULL DEFAULT '',
    identity_key       text,
    payload            bytea,
    received_at        timestamptz,
    enqueued_at        timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL,
    ack_next_at        timestamptz,
    ack_at             timestamptz,
    ack_attempts       integer     NOT NULL DEFAULT 0,
    ack_abandoned_at   timestamptz,
    ack_abandon_reason text        NOT NULL DEFAULT '',
    lease_owner        text        NOT NULL DEFAULT '',
    lease_expires_at   timestamptz,
    -- When the archival job moved the row here.
    archived_at        timestamptz NOT NULL,
    CONSTRAINT relay_message_history_pkey PRIMARY KEY (pipeline, id)
);

-- Archival candidates: terminal rows of a pipeline by updated_at.
CREATE INDEX relay_message_archive_idx ON relay_message (pipeline, updated_at)
    WHERE state IN ('SUCCEEDED', 'SKIPPED', 'DEAD');
