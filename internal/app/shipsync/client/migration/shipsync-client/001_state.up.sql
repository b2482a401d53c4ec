-- The ship client's platform state (SQLite). The full change payloads stay
-- in the CDC topic; these tables hold an index of the events the client
-- produced, the checkpoints per partition, the rules, the applied downlink
-- commands and backlog samples.

-- One row per event the client produced (or blocked) from the topic. Times
-- are Unix microseconds UTC.
CREATE TABLE event_state (
    event_id      TEXT PRIMARY KEY,
    direction     TEXT NOT NULL CHECK (direction IN ('up', 'down')),
    topic         TEXT NOT NULL,
    part          INTEGER NOT NULL,
    off           INTEGER NOT NULL,
    -- source_sequence in the stream (topic/partition); NULL for an event
    -- blocked before it was numbered.
    seq           INTEGER,
    rule_id       TEXT NOT NULL,
    rule_version  INTEGER NOT NULL,
    priority      INTEGER NOT NULL,
    state         TEXT NOT NULL CHECK (state IN
                    ('READY', 'RECEIVED', 'RETRY_WAIT', 'TERMINAL', 'BLOCKED', 'EXPIRED_APPROVED')),
    -- The terminal result (APPLIED, CONFLICT_RECORDED, REJECTED,
    -- EXPIRED_APPROVED) once known.
    result        TEXT,
    reason        TEXT,
    conflict_id   TEXT,
    raw_bytes     INTEGER NOT NULL,
    business_at   INTEGER,
    captured_at   INTEGER NOT NULL,
    attempts      INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);
CREATE INDEX event_state_position ON event_state (topic, part, off);
CREATE INDEX event_state_result ON event_state (result, rule_id);
CREATE INDEX event_state_business ON event_state (rule_id, business_at);
CREATE INDEX event_state_open ON event_state (state) WHERE state NOT IN ('TERMINAL', 'EXPIRED_APPROVED');

-- Checkpoints per direction, consumer group and partition. *_next are the
-- next offset past the contiguous prefix: read (taken from the topic),
-- received (the shore holds every event before it, or it needed none) and
-- terminal (every event before it has its final result: the platform
-- checkpoint, and what the consumer group commits). next_seq numbers the
-- stream's next uploaded event.
CREATE TABLE partition_watermark (
    direction     TEXT NOT NULL CHECK (direction IN ('up', 'down')),
    grp           TEXT NOT NULL,
    topic         TEXT NOT NULL,
    part          INTEGER NOT NULL,
    read_next     INTEGER NOT NULL,
    received_next INTEGER NOT NULL,
    terminal_next INTEGER NOT NULL,
    next_seq      INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (direction, grp, topic, part)
);

-- Rule versions the node has seen; the ACTIVE one of each rule runs.
CREATE TABLE rule_snapshot (
    rule_id       TEXT NOT NULL,
    version       INTEGER NOT NULL,
    content       TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('CANDIDATE', 'ACTIVE', 'FAILED', 'SUPERSEDED')),
    validation    TEXT,
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (rule_id, version)
);
CREATE UNIQUE INDEX rule_snapshot_active ON rule_snapshot (rule_id) WHERE status = 'ACTIVE';

-- Downlink commands applied on this node's database (idempotency and loop
-- suppression: a captured change carrying one of these ids is the node's own
-- remote apply).
CREATE TABLE applied_command (
    command_id      TEXT PRIMARY KEY,
    operation       TEXT NOT NULL,
    result_revision TEXT NOT NULL,
    result          TEXT NOT NULL,
    applied_at      INTEGER NOT NULL
);

-- Backlog samples for statistics and ETA.
CREATE TABLE queue_metric (
    sampled_at    INTEGER NOT NULL,
    direction     TEXT NOT NULL,
    rule_id       TEXT NOT NULL,
    priority      INTEGER NOT NULL,
    state         TEXT NOT NULL,
    events        INTEGER NOT NULL,
    raw_bytes     INTEGER NOT NULL,
    oldest_captured_at INTEGER,
    newest_captured_at INTEGER,
    PRIMARY KEY (sampled_at, direction, rule_id, priority, state)
);

-- Small named values: the receipt cursor, the upload batch counter.
CREATE TABLE client_meta (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
