-- Queries of the load generator (load.go): the progress of a tier's
-- messages and its full supplier submit rate. Read only.

-- name: DrainProgress
-- The tier's messages ($1: accepted at or after): how many, and the ids of
-- those not yet decided for good. One scan of the table; Drain runs it at
-- the start and to confirm the end, and watches the ids in between.
SELECT count(*), coalesce(array_agg(id) FILTER (WHERE state NOT IN ('refused', 'completed')), '{}')
FROM sms_message WHERE accepted_at >= $1 AND ($2::timestamptz IS NULL OR accepted_at < $2);

-- name: DrainPending
-- Which of the ids $1 are not yet decided for good: primary-key probes, so
-- a poll costs what is left, not the tier's whole table.
SELECT coalesce(array_agg(m.id), '{}')
FROM unnest($1::bigint[]) AS u(id)
JOIN sms_message m ON m.id = u.id
WHERE m.state NOT IN ('refused', 'completed');

-- name: SubmitRate
-- Messages accepted in [$1, $2) whose every recipient's attempt 1 had every
-- segment settled ACCEPTED by the gateway: how many, their segments, the
-- first accept of the tier and the last settle of those submits.
WITH m AS (
    SELECT id, cardinality(numbers) AS n, accepted_at
    FROM sms_message WHERE accepted_at >= $1 AND ($2::timestamptz IS NULL OR accepted_at < $2)
), a AS (
    SELECT a.message_id, a.segments,
           count(g.submit_id) FILTER (WHERE g.state = 'ACCEPTED') AS accepted,
           max(g.settled_at) AS settled
    FROM m JOIN sms_attempt a ON a.message_id = m.id AND a.attempt_no = 1
    LEFT JOIN sms_submit s ON s.attempt_id = a.id
    LEFT JOIN gateway_submit g ON g.submit_id = s.submit_id
    GROUP BY a.id, a.message_id, a.segments
), full_msgs AS (
    SELECT a.message_id, sum(a.segments) AS segments, max(a.settled) AS settled
    FROM a JOIN m ON m.id = a.message_id
    GROUP BY a.message_id, m.n
    HAVING count(*) = m.n AND bool_and(a.accepted = a.segments)
)
SELECT (SELECT count(*) FROM full_msgs), (SELECT coalesce(sum(segments), 0) FROM full_msgs),
       (SELECT count(*) FROM m), (SELECT min(accepted_at) FROM m), (SELECT max(settled) FROM full_msgs);
