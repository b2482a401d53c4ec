-- shipsync shore: conflict arbitration. A rule's conflict policy, the
-- arbiter's leases on cases, immutable decisions, decisions sent down as
-- commands, and conflicts a node reports when a command meets another
-- revision there.

-- How a rule's conflicts are decided: MANUAL (an operator), SHORE_WINS (the
-- shore's version, while it is still the one in the evidence) or
-- LAST_WRITER_WINS (the later value of a business time column; a missing or
-- unreadable time, or one further than max_skew_ms in the future, goes to an
-- operator; equal times go to the lower node id, or the higher with
-- lww_tie NODE_DESC).
ALTER TABLE sync_rule
    ADD COLUMN conflict_policy text NOT NULL DEFAULT 'MANUAL'
        CHECK (conflict_policy IN ('MANUAL', 'SHORE_WINS', 'LAST_WRITER_WINS')),
    ADD COLUMN lww_column text NOT NULL DEFAULT '',
    ADD COLUMN lww_max_skew_ms bigint NOT NULL DEFAULT 300000 CHECK (lww_max_skew_ms >= 0),
    ADD COLUMN lww_tie text NOT NULL DEFAULT 'NODE_ASC' CHECK (lww_tie IN ('NODE_ASC', 'NODE_DESC'));

-- The arbiter's lease on a case it is deciding or dispatching (another
-- instance takes the case over once lease_until has passed), the manual
-- task's deadline, why the case is in its state, and for an EXPIRED case
-- the case opened from the newer evidence.
ALTER TABLE sync_conflict_case
    ADD COLUMN lease_owner   text,
    ADD COLUMN lease_until   timestamptz,
    ADD COLUMN attempts      integer NOT NULL DEFAULT 0,
    ADD COLUMN manual_due    timestamptz,
    ADD COLUMN state_reason  text NOT NULL DEFAULT '',
    ADD COLUMN superseded_by uuid;
CREATE INDEX sync_conflict_case_work ON sync_conflict_case (updated_at)
    WHERE state IN ('DETECTED', 'AUTO_DECIDING', 'DECIDED');

-- Evidence a node reported in a command ack: the shore's change (incoming
-- to the node) met the node's own revision (current_*, the node's row in
-- current_row).
ALTER TABLE sync_conflict_evidence DROP CONSTRAINT sync_conflict_evidence_found_in_check;
ALTER TABLE sync_conflict_evidence ADD CONSTRAINT sync_conflict_evidence_found_in_check
    CHECK (found_in IN ('record_head', 'target', 'node'));

-- A case's decisions. Never updated or deleted (a trigger refuses it): a
-- decision that turns out stale expires its case, and the newer evidence
-- opens a new case with a decision of its own; a decision a node rejects
-- sends the case to an operator, whose decision is a new row (attempt 2,
-- …). The latest attempt is the case's decision.
CREATE TABLE sync_conflict_decision (
    decision_id       uuid        PRIMARY KEY,
    conflict_id       uuid        NOT NULL REFERENCES sync_conflict_case (conflict_id),
    attempt           integer     NOT NULL CHECK (attempt >= 1),
    -- 'policy' or the operator's name.
    decided_by        text        NOT NULL,
    policy            text        NOT NULL,
    -- SHORE: the shore's row stays and goes to the nodes; NODE: the node's
    -- version (winner_*) is written to the shore and kept by the node;
    -- VALUE: an operator's complete row; DELETE: the record is deleted.
    choice            text        NOT NULL CHECK (choice IN ('SHORE', 'NODE', 'VALUE', 'DELETE')),
    winner_node_id    text        NOT NULL DEFAULT '',
    -- The node the decision goes to and the revision it must still hold
    -- there ('' : the record must be absent there).
    node_id           text        NOT NULL,
    expected_node_revision text   NOT NULL,
    decided_row       bytea,
    tombstone         boolean     NOT NULL,
    decided_revision  text        NOT NULL,
    -- The shore revision the decision was made against ('' : no row).
    expected_shore_revision text  NOT NULL,
    reason            text        NOT NULL,
    decided_at        timestamptz NOT NULL
);

CREATE UNIQUE INDEX sync_conflict_decision_attempt ON sync_conflict_decision (conflict_id, attempt);

CREATE FUNCTION sync_conflict_decision_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'sync_conflict_decision is append-only';
END $$;
CREATE TRIGGER sync_conflict_decision_immutable BEFORE UPDATE OR DELETE ON sync_conflict_decision
    FOR EACH ROW EXECUTE FUNCTION sync_conflict_decision_immutable();

-- A decision command names its case; processed_at marks an answer the
-- arbiter has acted on (a decision's case acknowledged or expired, a
-- reported conflict turned into a case). Other answers need nothing.
ALTER TABLE sync_downlink_command
    ADD COLUMN conflict_id  uuid,
    ADD COLUMN processed_at timestamptz;
CREATE INDEX sync_downlink_command_answered ON sync_downlink_command (acked_at)
    WHERE processed_at IS NULL AND (kind = 'decision' OR result = 'COMMAND_CONFLICT_REPORTED');
