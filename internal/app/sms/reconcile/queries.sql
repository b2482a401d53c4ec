-- Queries of the send chain's reconciliation (reconcile.go), parsed once at
-- package init. Every query only reads. $1 of the queries returning example
-- ids is how many examples to return; examples are ids and keys, never a
-- number or content.

-- name: TableExists
SELECT to_regclass($1) IS NOT NULL;

-- 1. No accepted message lost.

-- name: MessageStates
SELECT state, count(*) FROM sms_message GROUP BY state ORDER BY state;

-- name: Unfinished
SELECT count(*), coalesce((array_agg(id ORDER BY id))[1:$1], '{}')
FROM sms_message WHERE state IN ('accepted', 'admitted');

-- name: EngineWithoutRow
SELECT count(*), coalesce((array_agg(r.id ORDER BY r.id))[1:$1], '{}')
FROM relay_message r
WHERE r.queue = 'sms-admit' AND NOT EXISTS (SELECT 1 FROM sms_message m WHERE m.id = r.id);

-- name: RowWithoutEngine
SELECT count(*), coalesce((array_agg(m.id ORDER BY m.id))[1:$1], '{}')
FROM sms_message m
WHERE NOT EXISTS (SELECT 1 FROM relay_message r WHERE r.queue = 'sms-admit' AND r.id = m.id);

-- name: EngineMessages
SELECT count(*) FROM relay_message WHERE queue = 'sms-admit';

-- name: FirstAttempts
-- Every recipient of an admitted or completed message and its attempts 1.
WITH r AS (
    SELECT m.id, g.r
    FROM sms_message m CROSS JOIN LATERAL generate_series(0, cardinality(m.numbers) - 1) AS g(r)
    WHERE m.state IN ('admitted', 'completed')
), c AS (
    SELECT r.id, (SELECT count(*) FROM sms_attempt a
                  WHERE a.message_id = r.id AND a.recipient = r.r AND a.attempt_no = 1) AS n
    FROM r
)
SELECT count(*), count(*) FILTER (WHERE n <> 1),
       coalesce((array_agg(DISTINCT id) FILTER (WHERE n <> 1))[1:$1], '{}')
FROM c;

-- name: StrayAttempts
-- Attempts of a message that was never admitted, or of a recipient index
-- the message does not have.
SELECT count(*), coalesce((array_agg(DISTINCT m.id))[1:$1], '{}')
FROM sms_attempt a JOIN sms_message m ON m.id = a.message_id
WHERE m.state NOT IN ('admitted', 'completed') OR a.recipient >= cardinality(m.numbers);

-- 2. Ids unique.

-- name: DuplicateIDs
SELECT count(*), coalesce((array_agg(id ORDER BY id))[1:$1], '{}')
FROM (SELECT id FROM sms_message GROUP BY id HAVING count(*) > 1) d;

-- name: DuplicateClientIDs
SELECT count(*), coalesce((array_agg(id ORDER BY id))[1:$1], '{}')
FROM (SELECT min(id) AS id FROM sms_message GROUP BY app_id, client_msg_id HAVING count(*) > 1) d;

-- name: DuplicateEngineIdentities
SELECT count(*)
FROM (SELECT identity_key FROM relay_message WHERE queue = 'sms-admit' AND identity_key IS NOT NULL
      GROUP BY identity_key HAVING count(*) > 1) d;

-- 3. One valid first supplier submit per message; retries linked.

-- name: SubmitsWithGateway
SELECT s.submit_id, a.message_id, coalesce(g.state, '')
FROM sms_submit s JOIN sms_attempt a ON a.id = s.attempt_id
LEFT JOIN gateway_submit g ON g.submit_id = s.submit_id;

-- name: Submits
SELECT s.submit_id, a.message_id, ''
FROM sms_submit s JOIN sms_attempt a ON a.id = s.attempt_id;

-- name: RetryLinks
-- A retry (attempt_no > 1) must name an attempt of the same message and
-- recipient, numbered one less, that failed; an attempt 1 names none.
SELECT count(*) FILTER (WHERE a.attempt_no > 1),
       count(*) FILTER (WHERE bad),
       coalesce((array_agg(a.id ORDER BY a.id) FILTER (WHERE bad))[1:$1], '{}')
FROM (
    SELECT a.id, a.attempt_no,
           CASE WHEN a.attempt_no = 1 THEN a.retry_of IS NOT NULL
                ELSE p.id IS NULL OR p.message_id <> a.message_id OR p.recipient <> a.recipient
                     OR p.attempt_no <> a.attempt_no - 1 OR p.state <> 'failed' END AS bad
    FROM sms_attempt a LEFT JOIN sms_attempt p ON p.id = a.retry_of
) a;

-- name: Successors
SELECT count(*), coalesce((array_agg(retry_of ORDER BY retry_of))[1:$1], '{}')
FROM (SELECT retry_of FROM sms_attempt WHERE retry_of IS NOT NULL GROUP BY retry_of HAVING count(*) > 1) d;

-- 4. Drained.

-- name: EngineStates
SELECT queue, state, count(*) FROM relay_message WHERE queue LIKE 'sms-%' GROUP BY queue, state ORDER BY queue, state;

-- name: OutboxStates
SELECT target, state, count(*) FROM relay_outbox WHERE target LIKE 'sms-%' GROUP BY target, state ORDER BY target, state;

-- name: WorkStates
SELECT state, count(*), count(*) FILTER (WHERE revision <> processed_revision),
       coalesce((array_agg(key ORDER BY key))[1:$1], '{}')
FROM relay_work WHERE queue = 'sms-completion' GROUP BY state ORDER BY state;

-- name: QueuedAttempts
SELECT count(*), coalesce((array_agg(id ORDER BY id))[1:$1], '{}') FROM sms_attempt WHERE state = 'queued';

-- name: ParkedOpen
SELECT count(*), count(*) FILTER (WHERE matched_at IS NULL) FROM sms_report_parked;

-- 5. Ledger.

-- name: AccountSums
-- Per account: the row and the sums of its entries by kind, and what is
-- still frozen for messages not yet decided for good (accepted or
-- admitted): their freezes less what was already settled of them.
WITH e AS (
    SELECT l.account_id, l.kind, l.amount_li,
           CASE WHEN l.idem_key ~ '^(freeze|charge|release|refund):[0-9]{1,18}(:[0-9]{1,3})?$'
                THEN split_part(l.idem_key, ':', 2)::bigint END AS message_id
    FROM sms_ledger l
), open AS (
    SELECT e.account_id,
           coalesce(sum(e.amount_li) FILTER (WHERE e.kind = 'freeze'), 0)
             - coalesce(sum(e.amount_li) FILTER (WHERE e.kind IN ('charge', 'release')), 0) AS amount
    FROM e JOIN sms_message m ON m.id = e.message_id
    WHERE m.state IN ('accepted', 'admitted')
    GROUP BY e.account_id
)
SELECT a.id, a.balance_li, a.frozen_li,
       coalesce(sum(l.amount_li) FILTER (WHERE l.kind = 'topup'), 0),
       coalesce(sum(l.amount_li) FILTER (WHERE l.kind = 'freeze'), 0),
       coalesce(sum(l.amount_li) FILTER (WHERE l.kind = 'charge'), 0),
       coalesce(sum(l.amount_li) FILTER (WHERE l.kind = 'release'), 0),
       coalesce(sum(l.amount_li) FILTER (WHERE l.kind = 'refund'), 0),
       coalesce((SELECT o.amount FROM open o WHERE o.account_id = a.id), 0)
FROM sms_account a LEFT JOIN sms_ledger l ON l.account_id = a.id
GROUP BY a.id ORDER BY a.id;

-- name: StrayEntries
-- Freeze and settlement entries whose key does not name a message (and for
-- settlements a recipient) that exists: freeze:<message>,
-- charge|release|refund:<message>:<recipient index>, the kind's own word
-- first. The message is found by the id in the key (one index lookup per
-- entry).
SELECT count(*), coalesce((array_agg(l.id ORDER BY l.id))[1:$1], '{}')
FROM sms_ledger l
LEFT JOIN sms_message m ON m.id = CASE WHEN l.idem_key ~ '^(freeze|charge|release|refund):[0-9]{1,18}(:[0-9]{1,3})?$'
                                       THEN split_part(l.idem_key, ':', 2)::bigint END
WHERE l.kind IN ('freeze', 'charge', 'release', 'refund')
  AND NOT coalesce(m.id IS NOT NULL AND split_part(l.idem_key, ':', 1) = l.kind
      AND CASE WHEN l.kind = 'freeze' THEN split_part(l.idem_key, ':', 3) = ''
               ELSE split_part(l.idem_key, ':', 3) <> '' AND split_part(l.idem_key, ':', 3)::int < cardinality(m.numbers) END, false);

-- name: RefundsWithoutCharge
-- A refund gives back one recipient's charge: the same account and amount
-- under charge:<message>:<recipient>.
SELECT count(*), coalesce((array_agg(r.idem_key ORDER BY r.id))[1:$1], '{}')
FROM sms_ledger r
WHERE r.kind = 'refund' AND NOT EXISTS (
    SELECT 1 FROM sms_ledger c
    WHERE c.kind = 'charge' AND c.idem_key = 'charge:' || substr(r.idem_key, 8)
      AND c.account_id = r.account_id AND c.amount_li = r.amount_li);

-- name: Settlements
-- Per completed message: every recipient has exactly one of charge and
-- release, of segments × its unit price, consistent with its outcome
-- (delivered: charged, not refunded; unknown: charged; failed: released, or
-- charged and refunded), and the freeze equals what was settled.
WITH r AS (
    SELECT m.id, g.r, m.segments::bigint * m.unit_li[g.r + 1] AS price, m.outcomes[g.r + 1] AS outcome
    FROM sms_message m CROSS JOIN LATERAL generate_series(0, cardinality(m.numbers) - 1) AS g(r)
    WHERE m.state = 'completed'
), x AS (
    SELECT r.id, r.price, r.outcome,
           (SELECT count(*) FROM sms_ledger c WHERE c.idem_key = 'charge:' || r.id || ':' || r.r) AS charges,
           (SELECT sum(amount_li) FROM sms_ledger c WHERE c.idem_key = 'charge:' || r.id || ':' || r.r) AS charge,
           (SELECT sum(amount_li) FROM sms_ledger c WHERE c.idem_key = 'release:' || r.id || ':' || r.r) AS rel,
           (SELECT sum(amount_li) FROM sms_ledger c WHERE c.idem_key = 'refund:' || r.id || ':' || r.r) AS refund
    FROM r
), per AS (
    SELECT x.id,
           coalesce(bool_and(x.charges <= 1 AND (x.charge IS NULL) <> (x.rel IS NULL)
               AND coalesce(x.charge, x.rel) = x.price
               AND (x.refund IS NULL OR x.charge IS NOT NULL)
               AND CASE x.outcome WHEN 'delivered' THEN x.charge IS NOT NULL AND x.refund IS NULL
                                  WHEN 'unknown' THEN x.charge IS NOT NULL
                                  ELSE x.rel IS NOT NULL OR x.refund IS NOT NULL END), false) AS ok,
           sum(coalesce(x.charge, 0) + coalesce(x.rel, 0)) AS settled
    FROM x GROUP BY x.id
), chk AS (
    SELECT per.id, per.ok AND coalesce(f.amount = per.settled, false) AS ok
    FROM per LEFT JOIN LATERAL (SELECT sum(amount_li) AS amount FROM sms_ledger
                                WHERE idem_key = 'freeze:' || per.id) f ON true
)
SELECT count(*), count(*) FILTER (WHERE NOT ok), coalesce((array_agg(id ORDER BY id) FILTER (WHERE NOT ok))[1:$1], '{}')
FROM chk;

-- name: DuplicateKeys
SELECT count(*), coalesce((array_agg(idem_key ORDER BY idem_key))[1:$1], '{}')
FROM (SELECT idem_key FROM sms_ledger GROUP BY idem_key HAVING count(*) > 1) d;

-- 6. Database health. $2 filters on application_name when not empty.

-- name: IdleInTransaction
SELECT count(*), coalesce((array_agg(pid ORDER BY pid))[1:$1], '{}')
FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
  AND state LIKE 'idle in transaction%' AND state_change < clock_timestamp() - make_interval(secs => $3)
  AND ($2 = '' OR application_name = $2 OR left(application_name, length($2) + 1) = $2 || '/');

-- name: LockWaits
SELECT count(*), coalesce((array_agg(pid ORDER BY pid))[1:$1], '{}')
FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'
  AND ($2 = '' OR application_name = $2 OR left(application_name, length($2) + 1) = $2 || '/');

-- name: Connections
SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database()
  AND ($1 = '' OR application_name = $1 OR left(application_name, length($1) + 1) = $1 || '/');
