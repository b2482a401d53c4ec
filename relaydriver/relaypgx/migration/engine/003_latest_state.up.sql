-- relay engine line, version 3: latest-state outbox rows (seed 000 §8.2,
-- §12.4). One row per (target, key) holding the key's latest full state; see
-- docs/outbox.md "Latest-state rows". Every timestamp is written from a
-- parameter (the engine's Clock), never from now().

-- Write generations: every accepted upsert takes a new value, used to confirm
-- or fail only the generation the dispatcher read.
CREATE SEQUENCE relay_latest_generation_seq;

CREATE TABLE relay_latest (
    target          text        NOT NULL,
    key             text        NOT NULL,
    topic           text        NOT NULL DEFAULT '',
    -- STATE_VERSION: an upsert is accepted only when its version is >= this.
    version         bigint      NOT NULL,
    generation      bigint      NOT NULL,
    event_type      text        NOT NULL
        CONSTRAINT relay_latest_event_type_check CHECK (event_type IN ('UPSERT', 'TOMBSTONE')),
    headers         text        NOT NULL DEFAULT '{}',
    -- NULL for a tombstone.
    payload         bytea,
    state           text        NOT NULL DEFAULT 'PENDING'
        CONSTRAINT relay_latest_state_check CHECK (state IN ('PENDING', 'SENT', 'DEAD')),
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz,
    last_error      text        NOT NULL DEFAULT '',
    updated_at      timestamptz NOT NULL,
    sent_at         timestamptz,
    CONSTRAINT relay_latest_pkey PRIMARY KEY (target, key),
    CONSTRAINT relay_latest_tombstone_check CHECK (event_type = 'UPSERT' OR payload IS NULL),
    CONSTRAINT relay_latest_sent_check CHECK ((state = 'SENT') = (sent_at IS NOT NULL))
);

-- PENDING rows of a target in key order (LatestFetch).
CREATE INDEX relay_latest_pending_idx ON relay_latest (target, key)
    WHERE state = 'PENDING';
