-- The downlink on the ship: the shore's commands as pulled, each applied
-- once in sequence order and acknowledged until the shore answered. Times
-- are Unix microseconds UTC.

-- One row per command, stored with the page's cursor before anything is
-- done with it. state RECEIVED: stored, not yet applied; TERMINAL: its
-- result is known (result, reason, current_revision; ack holds the
-- CommandAck sent, again until the shore answers it). acked: the shore
-- answered the ack (ack_status: RECEIVED, or its refusal).
CREATE TABLE inbound_command (
    command_id       TEXT PRIMARY KEY,
    sequence         INTEGER NOT NULL UNIQUE,
    kind             TEXT NOT NULL CHECK (kind IN ('CHANGE', 'DECISION', 'RESEND', 'UNKNOWN')),
    body             BLOB NOT NULL,
    state            TEXT NOT NULL CHECK (state IN ('RECEIVED', 'TERMINAL')),
    result           TEXT,
    reason           TEXT,
    current_revision TEXT,
    ack              BLOB,
    acked            INTEGER NOT NULL DEFAULT 0 CHECK (acked IN (0, 1)),
    ack_status       TEXT,
    received_at      INTEGER NOT NULL,
    applied_at       INTEGER,
    acked_at         INTEGER
);
-- The open commands, in order: to apply, and to acknowledge. The downlink
-- checkpoint is the first of each.
CREATE INDEX inbound_command_unapplied ON inbound_command (sequence) WHERE state <> 'TERMINAL';
CREATE INDEX inbound_command_unacked ON inbound_command (sequence) WHERE acked = 0;
