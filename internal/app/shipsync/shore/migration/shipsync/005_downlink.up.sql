-- shipsync shore: the downlink. The shore database's own business writes,
-- captured like a ship's, become durable commands per ship node, pulled by
-- the node by cursor and acknowledged with a terminal command result.

-- One row per captured shore change that produced an event (FORWARDED: its
-- commands are stored) or could not be forwarded (BLOCKED: kept with its
-- reason; the consumer's committed position does not pass it). Changes that
-- need no command (the platform's own applies, tombstones, tables without a
-- rule) leave no row: only the position moves. Keyed by the queue position,
-- so a record read again after a crash finds its row.
CREATE TABLE sync_shore_event (
    topic        text        NOT NULL,
    part         integer     NOT NULL CHECK (part >= 0),
    off          bigint      NOT NULL CHECK (off >= 0),
    event_id     uuid,
    rule_id      text        NOT NULL DEFAULT '',
    rule_version bigint      NOT NULL DEFAULT 0,
    result       text        NOT NULL CHECK (result IN ('FORWARDED', 'BLOCKED')),
    reason       text        NOT NULL DEFAULT '',
    detail       text        NOT NULL DEFAULT '',
    -- How many nodes were sent a command.
    commands     integer     NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (topic, part, off)
);
CREATE UNIQUE INDEX sync_shore_event_id ON sync_shore_event (event_id) WHERE event_id IS NOT NULL;
CREATE INDEX sync_shore_event_blocked ON sync_shore_event (topic, part, off) WHERE result = 'BLOCKED';

-- A node's command stream: the next sequence number to give, and the
-- contiguous prefix of commands with a terminal result (the downlink
-- checkpoint on the shore's side). Allocating a number locks the row until
-- the transaction commits, so commands commit in sequence order and a
-- reader by cursor never skips one committing late.
CREATE TABLE sync_downlink_node (
    node_id       text        PRIMARY KEY REFERENCES sync_node (node_id),
    next_sequence bigint      NOT NULL CHECK (next_sequence >= 1),
    acked_through bigint      NOT NULL DEFAULT 0 CHECK (acked_through >= 0),
    updated_at    timestamptz NOT NULL
);

-- One command for one node. body is the serialized Command as served.
-- result and the evidence columns are the node's terminal answer (the
-- first one received is kept).
CREATE TABLE sync_downlink_command (
    target_node_id   text        NOT NULL REFERENCES sync_node (node_id),
    sequence         bigint      NOT NULL CHECK (sequence >= 1),
    command_id       uuid        NOT NULL,
    kind             text        NOT NULL CHECK (kind IN ('change', 'decision', 'resend')),
    -- change: the shore event it carries.
    source_event_id  uuid,
    rule_id          text        NOT NULL DEFAULT '',
    body             bytea       NOT NULL,
    created_at       timestamptz NOT NULL,
    result           text        CHECK (result IN ('COMMAND_APPLIED', 'COMMAND_ALREADY_APPLIED',
                                                   'COMMAND_CONFLICT_REPORTED', 'COMMAND_REJECTED')),
    reason           text        NOT NULL DEFAULT '',
    current_revision text        NOT NULL DEFAULT '',
    -- COMMAND_CONFLICT_REPORTED: the node's row as it reported it (a
    -- serialized RowImage; NULL when the record does not exist there).
    current_row      bytea,
    node_acked_at    timestamptz,
    acked_at         timestamptz,
    PRIMARY KEY (target_node_id, sequence),
    UNIQUE (target_node_id, command_id)
);
CREATE INDEX sync_downlink_command_open ON sync_downlink_command (target_node_id, sequence) WHERE result IS NULL;
