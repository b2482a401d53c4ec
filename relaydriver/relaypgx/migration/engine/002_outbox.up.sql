-- relay engine line, version 2: the transactional outbox (seed 000 §8.1, §8.3).
-- Every timestamp is written from a parameter (the engine's Clock), never from
-- now(). See docs/outbox.md for why per-key sequences are allocated under a row
-- lock in the business transaction (commit order without gaps).

-- relay_outbox_key holds the last sequence number allocated per (target, key).
-- Appending an event upserts this row inside the business transaction, so
-- same-key writers serialise on its row lock and a rollback consumes no number.
-- Rows are never deleted: a key's sequence never restarts.
CREATE TABLE relay_outbox_key (
    target   text   NOT NULL,
    key      text   NOT NULL,
    last_seq bigint NOT NULL,
    CONSTRAINT relay_outbox_key_pkey PRIMARY KEY (target, key)
);

CREATE SEQUENCE relay_outbox_id_seq;

-- relay_outbox is MSG_EVENT: one row per event of a target (sink).
CREATE TABLE relay_outbox (
    id              bigint      NOT NULL DEFAULT nextval('relay_outbox_id_seq'),
    event_id        text        NOT NULL,
    target          text        NOT NULL,
    topic           text        NOT NULL DEFAULT '',
    key             text        NOT NULL,
    seq             bigint      NOT NULL,
    event_type      text        NOT NULL
        CONSTRAINT relay_outbox_event_type_check CHECK (event_type IN ('UPSERT', 'TOMBSTONE')),
    headers         text        NOT NULL DEFAULT '{}',
    -- NULL for a tombstone.
    payload         bytea,
    state           text        NOT NULL DEFAULT 'PENDING'
        CONSTRAINT relay_outbox_state_check CHECK (state IN ('PENDING', 'SENT', 'DEAD')),
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz,
    last_error      text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL,
    sent_at         timestamptz,
    updated_at      timestamptz NOT NULL,
    CONSTRAINT relay_outbox_pkey PRIMARY KEY (id),
    CONSTRAINT relay_outbox_event_id_key UNIQUE (event_id),
    CONSTRAINT relay_outbox_target_key_seq_key UNIQUE (target, key, seq),
    CONSTRAINT relay_outbox_tombstone_check CHECK (event_type = 'UPSERT' OR payload IS NULL),
    CONSTRAINT relay_outbox_sent_check CHECK ((state = 'SENT') = (sent_at IS NOT NULL))
);

-- Pending heads and runs per key of a target (OutboxFetch).
CREATE INDEX relay_outbox_pending_idx ON relay_outbox (target, key, seq)
    WHERE state = 'PENDING';

-- Retention of SENT rows (OutboxDeleteSent, seed 000 §8.3).
CREATE INDEX relay_outbox_sent_idx ON relay_outbox (target, sent_at)
    WHERE state = 'SENT';
