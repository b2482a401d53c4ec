-- Queries of the sms gateway's dedupe table (PostgreSQL only), parsed once at
-- package init by sqlfile.MustParse (store.go). Every time is a parameter.
-- submit_id and msg_id are uint64 values kept as numeric(20,0) and passed as
-- decimal text, since bigint holds only half their range.

-- name: Claim
-- Claims $1 for consumer $3 at $4: a new row, or one left NOT_SENT (nothing
-- reached the supplier). Returns no row when the submit exists in any other
-- state: it must not be submitted again.
INSERT INTO gateway_submit (submit_id, channel, state, claimed_by, claimed_at)
VALUES ($1::text::numeric, $2, 'CLAIMED', $3, $4)
ON CONFLICT (submit_id) DO UPDATE
    SET state = 'CLAIMED', channel = EXCLUDED.channel, claimed_by = EXCLUDED.claimed_by,
        claimed_at = EXCLUDED.claimed_at, msg_id = NULL, result = NULL, settled_at = NULL
    WHERE gateway_submit.state = 'NOT_SENT'
RETURNING claimed_at;

-- name: Load
SELECT channel, state, coalesce(msg_id::text, ''), coalesce(result, ''), claimed_by, claimed_at
FROM gateway_submit
WHERE submit_id = $1::text::numeric;

-- name: Settle
-- Settles the claim ($1, claimed by $5 at $6) as $2. No row changes when the
-- claim is no longer that one (another gateway judged it stale).
UPDATE gateway_submit
SET state = $2, msg_id = nullif($3, '')::numeric, result = $4, settled_at = $7
WHERE submit_id = $1::text::numeric AND state = 'CLAIMED' AND claimed_by = $5 AND claimed_at = $6;
