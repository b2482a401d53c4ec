-- Queries of the API and the admission stage (migration line "sms",
-- 002_admit; PostgreSQL only), parsed once at package init by
-- sqlfile.MustParse (store.go). Every time is a parameter; money is bigint li.

-- name: MessageGet
-- One message of one app: another app's id is not found. The row is found
-- by its primary key alone (the subquery's LIMIT keeps the app's check out
-- of it): with both in one WHERE, statistics taken while the app had one
-- message made the planner walk the app's (app_id, client_msg_id) index —
-- every message of the app — instead (TestGetPlansFollowTheTables).
SELECT id, client_msg_id, numbers, coalesce(carriers, '{}'), coalesce(segments, 0), coalesce(unit_li, '{}'),
       coalesce(amount_li, 0), state, coalesce(reason, ''), coalesce(detail, ''), accepted_at, decided_at,
       coalesce(outcomes, '{}'), completed_at
FROM (SELECT * FROM sms_message WHERE id = $1 LIMIT 1) AS m
WHERE m.app_id = $2;

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

-- name: CountersRead
-- Reads the batch's limit counters that exist, without locking them: a
-- missing counter is 0. Counts within a window only grow, so what this reads
-- is never more than the count at the write (CountersAdd), where each limit
-- is checked again under the row's lock.
--
-- Each key probes the primary key (LATERAL … LIMIT 1 keeps the planner from
-- joining the keys to a scan of the table, whatever its statistics say).
SELECT c.key, c.count
FROM unnest($1::text[]) AS v(k)
CROSS JOIN LATERAL (SELECT key, count FROM sms_limit_counter WHERE key = v.k LIMIT 1) AS c;

-- name: CountersAdd
-- Adds the batch's counts ($2, one per key $1, never negative) to the limit
-- counters, creating the missing ones (window end $4), each guarded by its
-- limit $3: a key whose new count would pass its limit is neither created
-- nor changed, and the caller treats a short row count as an error (the
-- batch is decided again from the counts then committed), never as success.
-- The caller sorts the keys, so two batches lock shared counters in one
-- order; this is the batch's last write, so each counter stays locked only
-- from here to the commit.
INSERT INTO sms_limit_counter AS c (key, count, until, updated_at)
SELECT v.k, v.d, v.u, $5
FROM unnest($1::text[], $2::integer[], $3::integer[], $4::timestamptz[]) WITH ORDINALITY AS v(k, d, mx, u, i)
WHERE v.d >= 0 AND v.d <= v.mx
ORDER BY v.i
ON CONFLICT (key) DO UPDATE SET count = c.count + excluded.count, updated_at = excluded.updated_at
WHERE c.count + excluded.count <= ($3::integer[])[array_position($1::text[], excluded.key)];

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
