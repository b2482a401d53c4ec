-- relay engine line, version 1: the durable inbox, the intake cursor and the
-- permanent-hole log (seed 000 §1.2). Every timestamp is written from a
-- parameter (the engine's Clock), never from now(); all are timestamptz in UTC.

-- Ids allocated for messages enqueued with ID 0 (push sources, Enqueue).
CREATE SEQUENCE relay_message_id_seq;

-- relay_message is PROC_STATE: one row per message of a pipeline.
CREATE TABLE relay_message (
    pipeline           text        NOT NULL,
    id                 bigint      NOT NULL,
    key                text        NOT NULL DEFAULT '',
    state              text        NOT NULL DEFAULT 'PENDING'
        CONSTRAINT relay_message_state_check
        CHECK (state IN ('PENDING', 'FAILED', 'SUCCEEDED', 'SKIPPED', 'DEAD', 'ARCHIVED')),
    attempts           integer     NOT NULL DEFAULT 0,
    next_attempt_at    timestamptz,
    error_class        text        NOT NULL DEFAULT '',
    last_error         text        NOT NULL DEFAULT '',
    -- NULL until bound once after decoding (seed 000 §2).
    identity_key       text,
    payload            bytea,
    -- Copied from the source's clock; may be NULL (seed 000 §1.2).
    received_at        timestamptz,
    -- Local enqueue time; the only basis of age checks (seed 000 §6.1).
    enqueued_at        timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL,
    -- Acknowledgement write-back facts (seed 000 §6).
    ack_next_at        timestamptz,
    ack_at             timestamptz,
    ack_attempts       integer     NOT NULL DEFAULT 0,
    ack_abandoned_at   timestamptz,
    ack_abandon_reason text        NOT NULL DEFAULT '',
    -- Claim of the per-key and unordered modes.
    lease_owner        text        NOT NULL DEFAULT '',
    lease_expires_at   timestamptz,
    CONSTRAINT relay_message_pkey PRIMARY KEY (pipeline, id),
    -- Business dedupe; ARCHIVED shadow rows keep their identity (seed 000 §9.3).
    CONSTRAINT relay_message_identity_key UNIQUE (pipeline, identity_key)
);

-- FIFO head: smallest unfinished id of a pipeline.
CREATE INDEX relay_message_head_idx ON relay_message (pipeline, id)
    WHERE state IN ('PENDING', 'FAILED');

-- Per-key heads and per-key live-lease checks (leases live only on unfinished rows).
CREATE INDEX relay_message_key_head_idx ON relay_message (pipeline, key, id)
    WHERE state IN ('PENDING', 'FAILED');

-- Acknowledgement scan: terminal, not confirmed, not abandoned; fair order by
-- attempts then id (seed 000 §6.1).
CREATE INDEX relay_message_ack_idx ON relay_message (pipeline, ack_attempts, id)
    WHERE state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')
      AND ack_at IS NULL AND ack_abandoned_at IS NULL;

-- relay_cursor is INBOX_CURSOR: the watermark of a sequence source.
CREATE TABLE relay_cursor (
    pipeline   text        NOT NULL CONSTRAINT relay_cursor_pkey PRIMARY KEY,
    watermark  bigint      NOT NULL,
    hole_since timestamptz,
    seeded_at  timestamptz,
    seed_mode  text        NOT NULL DEFAULT '',
    updated_at timestamptz NOT NULL
);

-- relay_hole logs permanent holes released by the watermark (seed 000 §4.1 step 4).
CREATE TABLE relay_hole (
    pipeline      text        NOT NULL,
    id            bigint      NOT NULL,
    first_seen_at timestamptz,
    released_at   timestamptz,
    CONSTRAINT relay_hole_pkey PRIMARY KEY (pipeline, id)
);
