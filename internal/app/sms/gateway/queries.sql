-- Queries of the sms gateway's dedupe table (PostgreSQL only), parsed once at
-- package init by sqlfile.MustParse (store.go). Every time is a parameter.
-- submit_id and msg_id are uint64 values kept as numeric(20,0) and passed as
-- decimal text, since bigint holds only half their range.

-- name: Claim
-- Claims the submit ids $1 (decimal text, ascending, no repeats) with the
-- channels $2 for consumer $3 at $4: new rows, or rows left NOT_SENT (nothing
-- reached the supplier). Returns the ids claimed; an id whose row exists in
-- any other state is not returned: it must not be submitted again. The ids
-- come ascending so that two gateways claiming overlapping sets lock the
-- rows in one order.
INSERT INTO gateway_submit (submit_id, channel, state, claimed_by, claimed_at)
SELECT t.id::numeric, t.channel, 'CLAIMED', $3, $4
FROM unnest($1::text[], $2::text[]) AS t(id, channel)
ON CONFLICT (submit_id) DO UPDATE
    SET state = 'CLAIMED', channel = EXCLUDED.channel, claimed_by = EXCLUDED.claimed_by,
        claimed_at = EXCLUDED.claimed_at, msg_id = NULL, result = NULL, settled_at = NULL
    WHERE gateway_submit.state = 'NOT_SENT'
RETURNING submit_id::text;

-- name: Load
SELECT channel, state, coalesce(msg_id::text, ''), coalesce(result, ''), claimed_by, claimed_at
FROM gateway_submit
WHERE submit_id = $1::text::numeric;

-- name: Settle
-- Settles the claims of the ids $1 (claimed by $5 at $6) as the states $2,
-- Msg_Ids $3 ('' for none) and results $4, at $7. Returns the ids settled;
-- a row whose claim is no longer that one (another gateway judged it stale)
-- does not change and is not returned.
UPDATE gateway_submit AS g
SET state = t.state, msg_id = nullif(t.msg_id, '')::numeric, result = t.result, settled_at = $7
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS t(id, state, msg_id, result)
WHERE g.submit_id = t.id::numeric AND g.state = 'CLAIMED' AND g.claimed_by = $5 AND g.claimed_at = $6
RETURNING g.submit_id::text;

-- name: Late
-- Records a SubmitResp that came after the Submit $1 was settled UNKNOWN;
-- a second record of the same submit changes nothing.
INSERT INTO gateway_late_response (submit_id, channel, msg_id, result, received_at)
VALUES ($1::text::numeric, $2, $3::text::numeric, $4, $5)
ON CONFLICT (submit_id) DO NOTHING;
