-- shipsync shore: what each node's heartbeats say about its backlog and its
-- uploading — the inputs of the backlog view and the ETA.

-- The transfer window and upload limit the node last reported (the ETA maps
-- the remaining time onto the window), and its compression ratio.
ALTER TABLE sync_node
    ADD COLUMN transfer_window      text NOT NULL DEFAULT '',
    ADD COLUMN transfer_window_zone text NOT NULL DEFAULT '',
    ADD COLUMN upload_rate_limit    double precision NOT NULL DEFAULT 0,
    ADD COLUMN compression_ratio    double precision NOT NULL DEFAULT 0,
    ADD COLUMN compression_ratio_measured boolean NOT NULL DEFAULT false,
    -- The CDC backlog past the node's read positions (not in its per-rule
    -- summaries) and its estimated raw size.
    ADD COLUMN unread_events    bigint NOT NULL DEFAULT 0,
    ADD COLUMN unread_raw_bytes bigint NOT NULL DEFAULT 0,
    -- The size of the node's platform state on its disk.
    ADD COLUMN state_disk_bytes bigint NOT NULL DEFAULT 0;

-- One row per heartbeat that carried a transfer interval: the stretch of
-- uploading it describes, ending at the shore's receive time. The ETA reads
-- the last 24 hours; the retention job deletes rows past their keep time.
CREATE TABLE sync_node_sample (
    node_id            text             NOT NULL REFERENCES sync_node (node_id),
    at                 timestamptz      NOT NULL,
    elapsed_seconds    double precision NOT NULL CHECK (elapsed_seconds >= 0),
    active_seconds     double precision NOT NULL CHECK (active_seconds >= 0),
    effective_bytes    bigint           NOT NULL CHECK (effective_bytes >= 0),
    physical_bytes     bigint           NOT NULL CHECK (physical_bytes >= 0),
    incoming_raw_bytes bigint           NOT NULL CHECK (incoming_raw_bytes >= 0),
    backlog_events     bigint           NOT NULL,
    backlog_raw_bytes  bigint           NOT NULL,
    PRIMARY KEY (node_id, at)
);
CREATE INDEX sync_node_sample_at ON sync_node_sample (at);

-- The node's backlog by direction, rule, priority and state as its last
-- heartbeat reported it (replaced whole by every heartbeat; '' and 0 where
-- an older node reports per rule only).
CREATE TABLE sync_node_backlog (
    node_id            text        NOT NULL REFERENCES sync_node (node_id),
    direction          text        NOT NULL,
    rule_id            text        NOT NULL,
    priority           integer     NOT NULL,
    state              text        NOT NULL,
    events             bigint      NOT NULL,
    raw_bytes          bigint      NOT NULL,
    estimated_bytes    bigint      NOT NULL,
    oldest_captured_at timestamptz,
    newest_captured_at timestamptz,
    oldest_business_at timestamptz,
    newest_business_at timestamptz,
    reported_at        timestamptz NOT NULL,
    PRIMARY KEY (node_id, direction, rule_id, priority, state)
);

-- Retention: when an inbox event's body was cut down to its header (the
-- row images dropped) because its result is long settled. The row stays:
-- it is the de-duplication record of the event.
ALTER TABLE sync_inbox_event ADD COLUMN body_trimmed_at timestamptz;
CREATE INDEX sync_inbox_event_untrimmed ON sync_inbox_event (received_at) WHERE body_trimmed_at IS NULL;
CREATE INDEX sync_upload_batch_age ON sync_upload_batch (received_at);
