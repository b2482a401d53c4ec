-- The rules release lifecycle and expiry approvals (PostgreSQL), and the
-- shape of a target table (MariaDB, TargetColumns).

-- name: ReleaseInsert
INSERT INTO sync_rule_release (rule_id, rule_version, state, revision, ship_rule, targets, author, created_at, updated_at)
VALUES ($1, $2, 'DRAFT', 1, $3, $4, $5, $6, $6);

-- name: ReleaseEdit
UPDATE sync_rule_release SET ship_rule = $3, targets = $4, revision = revision + 1, updated_at = $5
WHERE rule_id = $1 AND rule_version = $2 AND state = 'DRAFT';

-- name: ReleaseLock
SELECT rule_id, rule_version, state, revision, ship_rule, targets, author, coalesce(approver, ''),
    coalesce(failure, ''), created_at, updated_at
FROM sync_rule_release WHERE rule_id = $1 AND rule_version = $2 FOR UPDATE;

-- name: ReleaseList
-- Every release of rule $1 ('' for every rule), by rule and version.
SELECT rule_id, rule_version, state, revision, ship_rule, targets, author, coalesce(approver, ''),
    coalesce(failure, ''), created_at, updated_at
FROM sync_rule_release WHERE $1 = '' OR rule_id = $1 ORDER BY rule_id, rule_version;

-- name: ReleaseNodes
SELECT rule_id, rule_version, node_id, config_version, state, coalesce(problem, ''), updated_at
FROM sync_rule_release_node WHERE $1 = '' OR rule_id = $1 ORDER BY rule_id, rule_version, node_id;

-- name: ReleaseSetState
UPDATE sync_rule_release SET state = $3, revision = revision + 1, approver = coalesce($4, approver),
    failure = coalesce($5, failure), updated_at = $6
WHERE rule_id = $1 AND rule_version = $2;

-- name: ReleaseOfState
-- The versions of rule $1 in one of the states $2, locked.
SELECT rule_version, state FROM sync_rule_release WHERE rule_id = $1 AND state = ANY($2::text[])
ORDER BY rule_version FOR UPDATE;

-- name: ReleaseNodeOffer
INSERT INTO sync_rule_release_node (rule_id, rule_version, node_id, config_version, state, updated_at)
VALUES ($1, $2, $3, $4, 'OFFERED', $5)
ON CONFLICT (rule_id, rule_version, node_id) DO UPDATE SET config_version = excluded.config_version,
    state = 'OFFERED', problem = NULL, updated_at = excluded.updated_at;

-- name: ReleaseNodeRunning
-- The node runs every in-flight release it was offered at or before config
-- version $2: those rows become RUNNING; returns their releases.
UPDATE sync_rule_release_node n SET state = 'RUNNING', updated_at = $3
FROM sync_rule_release r
WHERE n.node_id = $1 AND n.state = 'OFFERED' AND n.config_version <= $2
  AND r.rule_id = n.rule_id AND r.rule_version = n.rule_version AND r.state IN ('DISTRIBUTING', 'ROLLBACK_TARGET')
RETURNING n.rule_id, n.rule_version;

-- name: ReleaseNodeOpen
-- The in-flight releases node $1 was offered and does not run yet.
SELECT n.rule_id, n.rule_version FROM sync_rule_release_node n
JOIN sync_rule_release r ON r.rule_id = n.rule_id AND r.rule_version = n.rule_version
WHERE n.node_id = $1 AND n.state = 'OFFERED' AND r.state IN ('DISTRIBUTING', 'ROLLBACK_TARGET')
ORDER BY n.rule_id, n.rule_version;

-- name: ReleaseNodeReject
UPDATE sync_rule_release_node SET state = 'REJECTED', problem = $4, updated_at = $5
WHERE rule_id = $1 AND rule_version = $2 AND node_id = $3;

-- name: ReleasePending
-- How many target nodes of the release do not run it yet.
SELECT count(*) FROM sync_rule_release_node WHERE rule_id = $1 AND rule_version = $2 AND state <> 'RUNNING';

-- name: NodeConfigBump
INSERT INTO sync_node_config (node_id, config_version, updated_at) VALUES ($1, 2, $2)
ON CONFLICT (node_id) DO UPDATE SET config_version = sync_node_config.config_version + 1, updated_at = $2
RETURNING config_version;

-- name: NodeConfigVersion
SELECT coalesce((SELECT config_version FROM sync_node_config WHERE node_id = $1), 1);

-- name: NodeConfigLock
SELECT config_version FROM sync_node_config WHERE node_id = $1 FOR UPDATE;

-- name: NodeReleases
-- Per rule the version node $1 should run: the one in flight to it, else
-- the ACTIVE one.
SELECT DISTINCT ON (rule_id) rule_id, rule_version, ship_rule FROM sync_rule_release
WHERE $1 = ANY(targets) AND state IN ('DISTRIBUTING', 'ROLLBACK_TARGET', 'ACTIVE')
ORDER BY rule_id, state = 'ACTIVE', rule_version DESC;

-- name: ExpiryInsert
INSERT INTO sync_expiry_approval (approval_id, node_id, rule_id, rule_version, captured_before, events_estimate,
    bytes_estimate, business_owner, actor, reason, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11);

-- name: ExpiryOffered
-- The approvals node $1 is offered: not reported yet, or made after $2.
SELECT a.approval_id::text, a.rule_id, a.captured_before FROM sync_expiry_approval a
LEFT JOIN sync_expiry_result r ON r.approval_id = a.approval_id
WHERE a.node_id = $1 AND (r.approval_id IS NULL OR a.created_at > $2)
ORDER BY a.created_at, a.approval_id;

-- name: ExpiryReport
INSERT INTO sync_expiry_result (approval_id, events, raw_bytes, reported_at)
SELECT a.approval_id, $3, $4, $5 FROM sync_expiry_approval a WHERE a.approval_id = $2::uuid AND a.node_id = $1
ON CONFLICT (approval_id) DO NOTHING;

-- name: ExpiryList
SELECT a.approval_id::text, a.node_id, a.rule_id, a.rule_version, a.captured_before, a.events_estimate,
    a.bytes_estimate, a.business_owner, a.actor, a.reason, a.created_at, r.events, r.raw_bytes, r.reported_at
FROM sync_expiry_approval a LEFT JOIN sync_expiry_result r ON r.approval_id = a.approval_id
WHERE $1 = '' OR a.node_id = $1 ORDER BY a.created_at, a.approval_id;

-- name: TargetColumns
-- MariaDB: the columns of a table of the current database in table order,
-- each with its position in the primary key (0: not a key column).
SELECT c.COLUMN_NAME, coalesce(k.ORDINAL_POSITION, 0)
FROM information_schema.COLUMNS c
LEFT JOIN information_schema.KEY_COLUMN_USAGE k ON k.TABLE_SCHEMA = c.TABLE_SCHEMA AND k.TABLE_NAME = c.TABLE_NAME
    AND k.COLUMN_NAME = c.COLUMN_NAME AND k.CONSTRAINT_NAME = 'PRIMARY'
WHERE c.TABLE_SCHEMA = DATABASE() AND c.TABLE_NAME = ?
ORDER BY c.ORDINAL_POSITION;

-- name: WindowRows
-- MariaDB: the rows of a table as a window reconcile sees them. {{cols}}
-- and {{table}} are backtick-quoted plain identifiers (WindowRows checks
-- them).
SELECT {{cols}} FROM {{table}};
