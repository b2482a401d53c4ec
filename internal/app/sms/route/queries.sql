-- Queries of stage B, the routing and submit facts (migration line "sms",
-- 003_send; PostgreSQL only), parsed once at package init by
-- sqlfile.MustParse (route.go). Every time is a parameter.

-- name: AttemptIDs
-- Allocates attempt ids before the rows exist: a long message's UDH
-- reference and every segment's submitId are derived from its attempt id.
SELECT nextval(pg_get_serial_sequence('sms_attempt', 'id')) FROM generate_series(1, $1::integer);

-- name: AttemptsInsert
-- Writes the attempts that still may go out, with their submits, in one
-- statement, and returns the ids written. Each attempt is re-checked here,
-- against the rows as they are now, not as the batch's snapshot saw them:
-- the app and its enterprise active, the channel active (and connected when
-- $12 is true), the signature active and approved on the channel. An
-- attempt that fails a check is not written and not returned; the caller
-- refuses its message alone. A retry's retry_of is UNIQUE: a second retry of
-- one attempt fails the statement.
WITH v AS (
    SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::smallint[], $4::smallint[], $5::bigint[], $6::bigint[],
                         $7::text[], $8::smallint[], $9::bigint[], $10::bigint[])
        AS v(id, message_id, recipient, attempt_no, retry_of, channel_id, receipt_mode, segments, app_id, signature_id)
), ok AS (
    SELECT v.* FROM v
    JOIN sms_app a ON a.id = v.app_id AND a.state = 'active'
    JOIN sms_enterprise e ON e.id = a.enterprise_id AND e.state = 'active'
    JOIN sms_channel c ON c.id = v.channel_id AND c.active AND (NOT $12::boolean OR c.conn_state = 'connected')
    JOIN sms_signature s ON s.id = v.signature_id AND s.state = 'active'
    JOIN sms_signature_registration r ON r.signature_id = v.signature_id AND r.channel_id = v.channel_id
         AND r.state = 'approved'
), a AS (
    INSERT INTO sms_attempt (id, message_id, recipient, attempt_no, retry_of, channel_id, receipt_mode, segments,
                             state, created_at)
    SELECT id, message_id, recipient, attempt_no, nullif(retry_of, 0), channel_id, receipt_mode, segments, 'queued', $11
    FROM ok ORDER BY id
    RETURNING id
), s AS (
    INSERT INTO sms_submit (submit_id, attempt_id, channel_id, pk_number, registered)
    SELECT x.submit_id, x.attempt_id, x.channel_id, x.pk_number, x.registered
    FROM unnest($13::bigint[], $14::bigint[], $15::bigint[], $16::smallint[], $17::boolean[])
         AS x(submit_id, attempt_id, channel_id, pk_number, registered)
    JOIN a ON a.id = x.attempt_id
    RETURNING 1
)
SELECT id FROM a;

-- name: AttemptsDelete
-- Takes back the attempts (and, by cascade, the submits) of messages that
-- were refused after AttemptsInsert in the same transaction (the freeze
-- found the balance short). Nothing else refers to them yet.
DELETE FROM sms_attempt WHERE message_id = ANY($1::bigint[]) AND state = 'queued';
