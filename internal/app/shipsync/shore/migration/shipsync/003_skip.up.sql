-- A stream sequence number given up: the event that carried it was valid
-- and numbered but refused for good at ingress (its rule not authorised for
-- the node), so no event will ever be stored under it. The stream's release
-- walks over it like over a received event, so the refusal does not hold
-- every later event of the stream. Kept after the stream has passed it
-- (passed_at) as the record of the skip.
CREATE TABLE sync_stream_skip (
    origin_node_id      text        NOT NULL,
    source_connector_id text        NOT NULL,
    source_partition    text        NOT NULL,
    source_sequence     numeric(20) NOT NULL CHECK (source_sequence >= 1),
    event_id            text        NOT NULL,
    reason              text        NOT NULL,
    skipped_at          timestamptz NOT NULL,
    passed_at           timestamptz,
    PRIMARY KEY (origin_node_id, source_connector_id, source_partition, source_sequence)
);
CREATE INDEX sync_stream_skip_waiting ON sync_stream_skip (origin_node_id, source_connector_id, source_partition, source_sequence)
    WHERE passed_at IS NULL;
