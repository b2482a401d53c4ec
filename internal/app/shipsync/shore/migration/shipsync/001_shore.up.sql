-- shipsync shore: the node registry, the receive inbox and the upload batches.

-- A ship node allowed to sync. A revoked node's new requests are refused;
-- what it uploaded before stays in the inbox and is processed.
CREATE TABLE sync_node (
    node_id    text        PRIMARY KEY,
    state      text        NOT NULL CHECK (state IN ('active', 'revoked')),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    -- The last heartbeat: shore time, the node's overall health and the
    -- config version it runs (an observation; it moves no checkpoint).
    last_heartbeat_at     timestamptz,
    last_health           text,
    last_config_version   numeric(20)
);

-- The client certificates a node may present, by the SHA-256 of their DER
-- bytes. Rotation registers the new certificate while the old one is still
-- active (at most two active per node, the overlap window), then retires the
-- old one.
CREATE TABLE sync_node_cert (
    fingerprint text        PRIMARY KEY CHECK (fingerprint ~ '^[0-9a-f]{64}$'),
    node_id     text        NOT NULL REFERENCES sync_node (node_id),
    not_before  timestamptz NOT NULL,
    not_after   timestamptz NOT NULL,
    state       text        NOT NULL CHECK (state IN ('active', 'retired')),
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);
CREATE INDEX sync_node_cert_node ON sync_node_cert (node_id);

-- Every event the shore received, once per (origin_node_id, event_id): the
-- de-duplication key of the protocol. A resent event finds its row and is
-- answered RECEIVED again.
CREATE TABLE sync_inbox_event (
    id              bigserial   PRIMARY KEY,
    origin_node_id  text        NOT NULL,
    event_id        uuid        NOT NULL,
    sender_node_id  text        NOT NULL,
    batch_id        text        NOT NULL,
    rule_id         text        NOT NULL,
    rule_version    bigint      NOT NULL,
    pk_hash         bytea       NOT NULL,
    pk_text         text        NOT NULL,
    source_connector_id text    NOT NULL,
    source_partition text       NOT NULL,
    source_position numeric(20) NOT NULL,
    source_sequence numeric(20) NOT NULL,
    schema_version  text        NOT NULL,
    content_hash    bytea       NOT NULL,
    event           bytea       NOT NULL,
    status          text        NOT NULL CHECK (status IN ('received', 'applied', 'conflict_recorded', 'rejected')),
    reason          text,
    received_at     timestamptz NOT NULL,
    UNIQUE (origin_node_id, event_id)
);
CREATE INDEX sync_inbox_event_key ON sync_inbox_event (rule_id, pk_hash, id);

-- The answer given to each upload batch, so a resent batch id gets the same
-- answer. statuses is the serialized UploadResponse.
CREATE TABLE sync_upload_batch (
    node_id     text        NOT NULL,
    batch_id    text        NOT NULL,
    sequence    numeric(20) NOT NULL,
    event_count integer     NOT NULL,
    statuses    bytea       NOT NULL,
    received_at timestamptz NOT NULL,
    PRIMARY KEY (node_id, batch_id)
);

-- Append-only audit of what operators do to nodes and certificates (and,
-- later, rules, expiry approvals, decisions and replays). Never updated.
CREATE TABLE sync_audit_event (
    audit_id    bigserial   PRIMARY KEY,
    at          timestamptz NOT NULL,
    actor       text        NOT NULL,
    action      text        NOT NULL,
    object_type text        NOT NULL,
    object_id   text        NOT NULL,
    before      text,
    after       text,
    reason      text        NOT NULL DEFAULT ''
);

-- The rule versions each node may upload events of: an event of any other
-- rule or version is refused (RULE_NOT_AUTHORIZED). GET /sync/v1/config
-- offers these to the node.
CREATE TABLE sync_node_rule (
    node_id      text        NOT NULL REFERENCES sync_node (node_id),
    rule_id      text        NOT NULL,
    rule_version bigint      NOT NULL CHECK (rule_version >= 1),
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (node_id, rule_id, rule_version)
);
