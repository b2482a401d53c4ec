-- Queries of stage D, the intake and the completion (migration line "sms",
-- 003_send; PostgreSQL only), parsed once at package init by
-- sqlfile.MustParse (store.go). Every time is a parameter.

-- name: ResultsRecord
-- Records a batch's submit results and late SubmitResps as events of their
-- attempts. The submitId names the submit; the channel the gateway names
-- must be the submit's. A Msg_Id the fact carries is written to the submit
-- (the key its reports are matched by) unless the submit has one, or
-- another submit of the channel holds it. A fact that names no submit of
-- ours is kept in sms_intake_reject. Returns the attempts of the events
-- that are new (a fact delivered again is stored once), each with whether
-- the event can decide anything: an ACCEPTED result of a segment that asked
-- for a status report cannot (the segment waits for its report, which
-- brings its own event, or for the deadline its work record already wakes
-- at), so the completion need not run for it; the intake writes that
-- segment's result (ACCEPTED, as the completion's roll-up would: the first
-- result stands) to the submit itself, for readers.
--
-- Each fact probes its submit and the Msg_Id's current holder by index
-- (LATERAL, LIMIT 1), and the submits to write are locked by a probe of
-- their own and written by the locked row's ctid, so neither the reads nor
-- the write depend on statistics: a generic plan made while the tables
-- were small (never re-planned until an ANALYZE) planned a join of the
-- write over a scan of every submit. The last row (attempt NULL) carries
-- how many submits were to be written and how many were: when another
-- transaction changed a submit after this statement's snapshot, the lock
-- returns the newer row, which the write does not see, and the caller
-- fails the batch (it is read again) rather than lose the write.
WITH v AS (
    SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])
        AS v(event_key, submit_id, channel, kind, state, msg_id, detail)
), m AS (
    SELECT v.*, s.attempt_id, s.channel_id,
           s.attempt_id IS NOT NULL AND v.msg_id <> '' AND s.msg_id IS NULL AND h.held IS NULL AS set_msg_id,
           s.attempt_id IS NOT NULL AND v.kind = 'result' AND v.state = 'ACCEPTED' AND s.registered AS awaits,
           s.attempt_id IS NOT NULL AND v.kind = 'result' AND v.state = 'ACCEPTED' AND s.registered AND s.result IS NULL
               AS set_result
    FROM v
    LEFT JOIN sms_channel c ON c.name = v.channel
    LEFT JOIN LATERAL (SELECT s.attempt_id, s.channel_id, s.msg_id, s.registered, s.result FROM sms_submit s
                       WHERE s.submit_id = v.submit_id AND s.channel_id = c.id LIMIT 1) s ON true
    LEFT JOIN LATERAL (SELECT true AS held FROM sms_submit x
                       WHERE x.channel_id = c.id AND x.msg_id = v.msg_id LIMIT 1) h ON true
), w AS (
    -- one write per submit: a batch may carry two facts of one submit
    SELECT m.submit_id, bool_or(m.set_msg_id) AS set_msg_id, min(m.msg_id) FILTER (WHERE m.set_msg_id) AS msg_id,
           bool_or(m.set_result) AS set_result
    FROM m WHERE m.set_msg_id OR m.set_result
    GROUP BY m.submit_id
    ORDER BY m.submit_id -- one lock order for every batch
), ids AS (
    UPDATE sms_submit s
    SET msg_id = CASE WHEN l.set_msg_id AND s.msg_id IS NULL THEN l.msg_id ELSE s.msg_id END,
        result = CASE WHEN l.set_result AND s.result IS NULL THEN 'ACCEPTED' ELSE s.result END
    FROM (SELECT w.*, x.tid FROM w
          CROSS JOIN LATERAL (SELECT ctid AS tid FROM sms_submit WHERE submit_id = w.submit_id LIMIT 1 FOR UPDATE) x) AS l
    WHERE s.ctid = l.tid
    RETURNING 1
), rej AS (
    INSERT INTO sms_intake_reject (event_key, source, reason, received_at)
    SELECT event_key, 'result', 'no submit with this submitId on this channel', $8 FROM m WHERE attempt_id IS NULL
    ON CONFLICT (event_key) DO NOTHING
    RETURNING 1
), ins AS (
    INSERT INTO sms_event (event_key, attempt_id, submit_id, kind, state, msg_id, detail, received_at)
    SELECT event_key, attempt_id, submit_id, kind, state, nullif(msg_id, ''), nullif(detail, ''), $8
    FROM m WHERE attempt_id IS NOT NULL
    ON CONFLICT (event_key) DO NOTHING
    RETURNING event_key, attempt_id
)
SELECT ins.attempt_id, NOT bool_and(m.awaits), 0::bigint, 0::bigint FROM ins JOIN m ON m.event_key = ins.event_key
GROUP BY ins.event_key, ins.attempt_id
UNION ALL
SELECT NULL, NULL, (SELECT count(*) FROM w), (SELECT count(*) FROM ids);

-- name: ReportsRecord
-- Records a batch's status reports: a report whose (channel, Msg_Id)
-- names a submit becomes an event of its attempt; one that names none yet
-- is parked (its submit result has not brought the Msg_Id yet); one from a
-- channel we do not have is rejected. Run after ResultsRecord of the same
-- batch, so a report that came with its result matches at once. Returns the
-- attempts of the new events.
WITH v AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS v(event_key, channel, msg_id, stat)
), m AS (
    -- A probe of the (channel, Msg_Id) index per report, as in ResultsRecord.
    SELECT v.*, c.id AS channel_id, s.attempt_id, s.submit_id FROM v
    LEFT JOIN sms_channel c ON c.name = v.channel
    LEFT JOIN LATERAL (SELECT s.attempt_id, s.submit_id FROM sms_submit s
                       WHERE s.channel_id = c.id AND s.msg_id = v.msg_id LIMIT 1) s ON true
), rej AS (
    INSERT INTO sms_intake_reject (event_key, source, reason, received_at)
    SELECT event_key, 'report', 'no such channel', $5 FROM m WHERE channel_id IS NULL
    ON CONFLICT (event_key) DO NOTHING
    RETURNING 1
), parked AS (
    INSERT INTO sms_report_parked (event_key, channel, msg_id, stat, received_at)
    SELECT event_key, channel, msg_id, stat, $5 FROM m WHERE channel_id IS NOT NULL AND attempt_id IS NULL
    ON CONFLICT (event_key) DO NOTHING
    RETURNING 1
), ins AS (
    INSERT INTO sms_event (event_key, attempt_id, submit_id, kind, state, msg_id, received_at)
    SELECT event_key, attempt_id, submit_id, 'report', stat, msg_id, $5 FROM m WHERE attempt_id IS NOT NULL
    ON CONFLICT (event_key) DO NOTHING
    RETURNING attempt_id
)
SELECT attempt_id FROM ins;

-- name: ParkedMatch
-- Matches parked reports whose submit now has their Msg_Id: each becomes
-- an event of the attempt and is marked matched. $1: only these Msg_Ids
-- (NULL: any, the periodic sweep); $3 bounds one pass. Rows another
-- transaction is matching are skipped. Returns the attempts of new events.
WITH m AS (
    -- The submit is probed by its (channel, Msg_Id) index and the update
    -- reaches the locked parked row by its ctid, so a generic plan made while
    -- the tables were small still touches only the rows matched. A parked
    -- row changed since the snapshot was matched by another transaction:
    -- the lock's recheck of matched_at drops it, or its newer version is not
    -- the one the update sees; either way it is not matched twice.
    SELECT p.ctid AS tid, p.event_key, p.msg_id, p.stat, s.attempt_id, s.submit_id
    FROM sms_report_parked p
    JOIN sms_channel c ON c.name = p.channel
    CROSS JOIN LATERAL (SELECT s.attempt_id, s.submit_id FROM sms_submit s
                        WHERE s.channel_id = c.id AND s.msg_id = p.msg_id LIMIT 1) s
    WHERE p.matched_at IS NULL AND ($1::text[] IS NULL OR p.msg_id = ANY ($1::text[]))
    ORDER BY p.event_key
    LIMIT $3
    FOR UPDATE OF p SKIP LOCKED
), u AS (
    UPDATE sms_report_parked p SET matched_at = $2, attempt_id = m.attempt_id FROM m
    WHERE p.ctid = m.tid AND p.event_key = m.event_key
    RETURNING 1
), ins AS (
    INSERT INTO sms_event (event_key, attempt_id, submit_id, kind, state, msg_id, received_at)
    SELECT event_key, attempt_id, submit_id, 'report', stat, msg_id, $2 FROM m
    ON CONFLICT (event_key) DO NOTHING
    RETURNING attempt_id
)
SELECT attempt_id FROM ins;

-- name: RejectsRecord
-- Keeps the stream entries a batch could not use at all (they do not
-- parse), keyed by stream and entry id.
INSERT INTO sms_intake_reject (event_key, source, reason, received_at)
SELECT k, s, r, $4 FROM unnest($1::text[], $2::text[], $3::text[]) AS v(k, s, r)
ON CONFLICT (event_key) DO NOTHING;

-- name: MessagesLock
-- Locks the messages of a completion batch, in id order (after the work
-- rows: the lock order is work → message → account), and reads what the
-- completion needs of each: its app, its enterprise's account (0: none)
-- and webhook topic, numbers,
-- carriers, segments, unit prices, the text as sent and when it came in.
SELECT m.id, m.app_id, coalesce(acc.id, 0), coalesce(a.webhook_topic, ''), m.client_msg_id, m.numbers, m.carriers,
       m.segments, m.unit_li, m.content, m.state, m.accepted_at
FROM sms_message m JOIN sms_app a ON a.id = m.app_id
LEFT JOIN sms_account acc ON acc.enterprise_id = a.enterprise_id
WHERE m.id = ANY ($1::bigint[])
ORDER BY m.id
FOR UPDATE OF m;

-- name: AttemptsOfMessages
-- Every attempt of the locked messages (the claimed ones among them).
SELECT id, message_id, recipient, attempt_no, coalesce(retry_of, 0), channel_id, receipt_mode, segments, state,
       created_at
FROM sms_attempt WHERE message_id = ANY ($1::bigint[]);

-- name: AttemptMessages
-- The messages of attempts (to lock them before the attempts are read).
SELECT DISTINCT message_id FROM sms_attempt WHERE id = ANY ($1::bigint[]);

-- name: SubmitsOfAttempts
SELECT submit_id, attempt_id, registered FROM sms_submit WHERE attempt_id = ANY ($1::bigint[]) ORDER BY submit_id;

-- name: EventsOfAttempts
SELECT id, attempt_id, kind, coalesce(submit_id, 0), state, received_at FROM sms_event
WHERE attempt_id = ANY ($1::bigint[]) ORDER BY id;

-- name: AttemptsDecide
-- Writes the decided attempts of a batch; only a queued attempt is
-- decided (a decided one never changes state), and the caller treats a
-- short count as an error.
UPDATE sms_attempt a SET state = v.state, detail = v.detail, decided_at = $4
FROM unnest($1::bigint[], $2::text[], $3::text[]) AS v(id, state, detail)
WHERE a.id = v.id AND a.state = 'queued';

-- name: AttemptsNote
-- Appends a note to decided attempts' detail (a contradicting or late
-- fact kept for audit), bounded.
UPDATE sms_attempt a SET detail = left(coalesce(a.detail || '; ', '') || v.note, 300)
FROM unnest($1::bigint[], $2::text[]) AS v(id, note)
WHERE a.id = v.id AND position(v.note IN coalesce(a.detail, '')) = 0;

-- name: SubmitsFacts
-- The segments' facts as rolled up (for readers: GET's per-segment detail).
UPDATE sms_submit s SET result = nullif(v.result, ''), stat = nullif(v.stat, '')
FROM unnest($1::bigint[], $2::text[], $3::text[]) AS v(submit_id, result, stat)
WHERE s.submit_id = v.submit_id
  AND (s.result IS DISTINCT FROM nullif(v.result, '') OR s.stat IS DISTINCT FROM nullif(v.stat, ''));

-- name: TimeoutsRecord
-- The completion's own fact: an attempt decided by the timeout rule.
INSERT INTO sms_event (event_key, attempt_id, kind, state, detail, received_at)
SELECT 'timeout:' || a, a, 'timeout', 'timeout', d, $3 FROM unnest($1::bigint[], $2::text[]) AS v(a, d)
ON CONFLICT (event_key) DO NOTHING;

-- name: MessagesComplete
-- Completes messages whose every number has its final outcome. Each row is
-- probed by primary key and updated by its ctid, never reached by a scan of
-- every message (see MessagesDecide in internal/app/sms/admit); the batch
-- holds these rows locked since it read them.
UPDATE sms_message m SET state = 'completed', outcomes = v.outcomes, completed_at = $2
FROM (SELECT d.outcomes, x.tid
      FROM jsonb_to_recordset($1::jsonb) AS d(id bigint, outcomes text[])
      CROSS JOIN LATERAL (SELECT ctid AS tid FROM sms_message WHERE id = d.id AND state = 'admitted' LIMIT 1) AS x) AS v
WHERE m.ctid = v.tid;

-- name: ResendsRecord
-- The completion's own fact: the commands of segments without a result
-- were published again (the nth time).
INSERT INTO sms_event (event_key, attempt_id, kind, state, detail, received_at)
SELECT 'resend:' || a || ':' || n, a, 'resend', 'resend', d, $4 FROM unnest($1::bigint[], $2::integer[], $3::text[]) AS v(a, n, d)
ON CONFLICT (event_key) DO NOTHING;
