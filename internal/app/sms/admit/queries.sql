-- Queries of the API and the admission stage (migration line "sms",
-- 002_admit; PostgreSQL only), parsed once at package init by
-- sqlfile.MustParse (store.go). Every time is a parameter; money is bigint li.

-- name: MessageGet
-- One message of one app: another app's id is not found.
SELECT id, client_msg_id, numbers, coalesce(carriers, '{}'), coalesce(segments, 0), coalesce(unit_li, '{}'),
       coalesce(amount_li, 0), state, coalesce(reason, ''), coalesce(detail, ''), accepted_at, decided_at,
       coalesce(outcomes, '{}'), completed_at
FROM sms_message WHERE id = $1 AND app_id = $2;

-- name: MessageAttempts
-- The attempts of one message with their segments, for GET (the caller
-- read the message for its app first).
SELECT a.recipient, a.attempt_no, c.name, a.state, coalesce(a.detail, ''), s.pk_number, s.submit_id,
       coalesce(s.result, ''), coalesce(s.stat, '')
FROM sms_attempt a
JOIN sms_channel c ON c.id = a.channel_id
JOIN sms_submit s ON s.attempt_id = a.id
WHERE a.message_id = $1
ORDER BY a.recipient, a.attempt_no, s.pk_number;

-- name: MessagesLoad
-- The inbox rows of a batch, for deciding them.
SELECT id, app_id, numbers, sign_name, template_code, params, content, state
FROM sms_message WHERE id = ANY($1::bigint[]);

-- name: CountersLock
-- Creates the batch's counter rows that do not exist yet and locks every one
-- (the no-op DO UPDATE locks an existing row), in the order given — the
-- caller sorts the keys, so two batches never wait for each other in a
-- cycle — and returns each count.
INSERT INTO sms_limit_counter AS c (key, count, until, updated_at)
SELECT k, 0, u, $3 FROM unnest($1::text[], $2::timestamptz[]) AS v(k, u)
ON CONFLICT (key) DO UPDATE SET count = c.count
RETURNING key, count;

-- name: CountersSet
-- Writes the counts decided under the locks of CountersLock, each guarded by
-- its limit: a count above its max matches no row, and the caller treats a
-- short count as an error (the batch is retried), never as success.
UPDATE sms_limit_counter AS c SET count = v.n, updated_at = $4
FROM unnest($1::text[], $2::integer[], $3::integer[]) AS v(k, n, mx)
WHERE c.key = v.k AND v.n <= v.mx AND v.n >= 0;

-- name: MessagesDecide
-- Moves a batch's accepted rows to their decision; a row already decided
-- (cannot happen: a message is decided in the transaction that completes its
-- engine message) matches nothing and the caller fails the batch.
--
-- Each decision probes its row by primary key (LATERAL) and the update
-- reaches it by that row's ctid, so no plan scans the messages: joined
-- directly to jsonb_to_recordset and filtered by a state that almost no row
-- has, the update was planned as a scan of every message, once a batch
-- (TestDecidePlanDoesNotScanTheMessages). A row another transaction changed
-- meanwhile has a new ctid and matches nothing, which the caller treats as
-- above.
UPDATE sms_message AS m SET numbers = v.numbers, content = v.content, carriers = v.carriers, segments = v.segments,
       unit_li = v.unit_li, amount_li = v.amount_li, state = v.state, reason = v.reason, detail = v.detail,
       decided_at = $2
FROM (SELECT d.*, x.tid
      FROM jsonb_to_recordset($1::jsonb) AS d(id bigint, numbers text[], content text, carriers text[], segments integer,
           unit_li bigint[], amount_li bigint, state text, reason text, detail text)
      CROSS JOIN LATERAL (SELECT ctid AS tid FROM sms_message WHERE id = d.id AND state = 'accepted' LIMIT 1) AS x) AS v
WHERE m.ctid = v.tid;

-- name: MessageRefuse
-- Turns one admitted row of this transaction into a refusal (the freeze
-- found the balance short).
UPDATE sms_message SET state = 'refused', reason = $2, detail = $3, carriers = NULL, segments = NULL, unit_li = NULL,
       amount_li = NULL
WHERE id = $1 AND state = 'admitted';

-- name: CountersSweep
-- Deletes up to $2 limit counters whose window ended before $1 (their key
-- can never be counted again: a later message has a later window's key).
DELETE FROM sms_limit_counter WHERE key IN (
    SELECT key FROM sms_limit_counter WHERE until < $1 ORDER BY until LIMIT $2
);

-- name: MessageAcceptMany
-- The inbox rows of one accept batch, written in the transaction that
-- enqueues them. $4 numbers and $7 params are JSON texts, one per row.
INSERT INTO sms_message (id, app_id, client_msg_id, numbers, sign_name, template_code, params, content, state, accepted_at)
SELECT v.id, v.app_id, v.client_msg_id, ARRAY(SELECT jsonb_array_elements_text(v.numbers::jsonb)),
       v.sign_name, v.template_code, v.params::jsonb, v.content, 'accepted', $9
FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[])
     AS v(id, app_id, client_msg_id, numbers, sign_name, template_code, params, content);
