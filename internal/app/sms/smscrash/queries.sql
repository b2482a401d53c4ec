-- Queries of the sms gateway crash harness over the gateway's table
-- gateway_submit (PostgreSQL), parsed once at package init (smscrash.go).
-- submit_id and msg_id are numeric(20,0) and read as decimal text.

-- name: CountRows
-- Every row of the run's schema: the harness refuses a schema an earlier
-- run used.
SELECT count(*) FROM gateway_submit;

-- name: StateCounts
SELECT state, count(*) FROM gateway_submit GROUP BY state;

-- name: Rows
SELECT submit_id::text, state, coalesce(msg_id::text, ''), coalesce(result, '') FROM gateway_submit;
