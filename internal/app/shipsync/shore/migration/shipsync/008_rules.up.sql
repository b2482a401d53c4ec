-- shipsync shore: the rules release lifecycle, the per-node config version
-- and the approvals that old one-way backlog is not delivered.

-- One release of a registered rule version to a set of nodes. The state
-- moves DRAFT → VALIDATED (checked against the shore database) → APPROVED
-- (by someone other than the author) → DISTRIBUTING (offered to the target
-- nodes) → ACTIVE (every target node runs it) or FAILED (a node's
-- validation refused it). An ACTIVE version becomes SUPERSEDED when another
-- version of the rule becomes ACTIVE or is rolled back to; a rollback makes
-- an earlier version ROLLBACK_TARGET, offered again until every target runs
-- it. revision counts transitions (the optimistic version).
CREATE TABLE sync_rule_release (
    rule_id      text        NOT NULL,
    rule_version bigint      NOT NULL,
    state        text        NOT NULL CHECK (state IN ('DRAFT', 'VALIDATED', 'APPROVED', 'DISTRIBUTING', 'ACTIVE',
                                                       'FAILED', 'SUPERSEDED', 'ROLLBACK_TARGET')),
    revision     bigint      NOT NULL CHECK (revision >= 1),
    -- The node-side rule (the rules file's JSON form of one rule).
    ship_rule    text        NOT NULL,
    targets      text[]      NOT NULL CHECK (cardinality(targets) >= 1),
    author       text        NOT NULL,
    approver     text,
    -- Why it FAILED (the node and its validator's bounded message).
    failure      text,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    PRIMARY KEY (rule_id, rule_version),
    FOREIGN KEY (rule_id, rule_version) REFERENCES sync_rule (rule_id, rule_version)
);
-- At most one version of a rule is in flight, and one is ACTIVE.
CREATE UNIQUE INDEX sync_rule_release_in_flight ON sync_rule_release (rule_id)
    WHERE state IN ('DISTRIBUTING', 'ROLLBACK_TARGET');
CREATE UNIQUE INDEX sync_rule_release_active ON sync_rule_release (rule_id) WHERE state = 'ACTIVE';

-- Each target node of an in-flight release: the node config version that
-- first offered it, and whether the node runs it (a heartbeat reporting that
-- config version or a later one) or refused it.
CREATE TABLE sync_rule_release_node (
    rule_id        text        NOT NULL,
    rule_version   bigint      NOT NULL,
    node_id        text        NOT NULL REFERENCES sync_node (node_id),
    config_version bigint      NOT NULL,
    state          text        NOT NULL CHECK (state IN ('OFFERED', 'RUNNING', 'REJECTED')),
    problem        text,
    updated_at     timestamptz NOT NULL,
    PRIMARY KEY (rule_id, rule_version, node_id),
    FOREIGN KEY (rule_id, rule_version) REFERENCES sync_rule_release (rule_id, rule_version)
);

-- The config version each node is offered (GET /sync/v1/config and the
-- heartbeat answer); a missing row is version 1. It increases whenever what
-- the node should run changes.
CREATE TABLE sync_node_config (
    node_id        text        PRIMARY KEY REFERENCES sync_node (node_id),
    config_version bigint      NOT NULL CHECK (config_version >= 1),
    updated_at     timestamptz NOT NULL
);

-- An operator's approval that a node's backlog of a one-way rule captured
-- before a fixed boundary is not delivered: those events end EXPIRED_APPROVED
-- on the node. Immutable (the trigger below refuses UPDATE and DELETE).
CREATE TABLE sync_expiry_approval (
    approval_id      uuid        PRIMARY KEY,
    node_id          text        NOT NULL REFERENCES sync_node (node_id),
    rule_id          text        NOT NULL,
    rule_version     bigint      NOT NULL,
    captured_before  timestamptz NOT NULL,
    -- The node's backlog of the rule as last reported (estimates).
    events_estimate  bigint      NOT NULL,
    bytes_estimate   bigint      NOT NULL,
    business_owner   text        NOT NULL,
    actor            text        NOT NULL,
    reason           text        NOT NULL CHECK (reason <> ''),
    created_at       timestamptz NOT NULL
);
CREATE INDEX sync_expiry_approval_node ON sync_expiry_approval (node_id, created_at);

CREATE FUNCTION sync_expiry_approval_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'sync_expiry_approval is append-only';
END $$;
CREATE TRIGGER sync_expiry_approval_immutable BEFORE UPDATE OR DELETE ON sync_expiry_approval
    FOR EACH ROW EXECUTE FUNCTION sync_expiry_approval_immutable();

-- What the node reported doing with an approval: how many events (and raw
-- bytes) it ended EXPIRED_APPROVED. One row per approval, the first report.
CREATE TABLE sync_expiry_result (
    approval_id  uuid        PRIMARY KEY REFERENCES sync_expiry_approval (approval_id),
    events       bigint      NOT NULL,
    raw_bytes    bigint      NOT NULL,
    reported_at  timestamptz NOT NULL
);
