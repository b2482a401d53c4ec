-- Queries of the send chain's crash harness, parsed once at package init
-- (chaincrash.go). The harness works in a scratch schema of its own.

-- name: CountMessages
-- The harness refuses a schema an earlier run used.
SELECT count(*) FROM sms_message;

-- name: SetAddress
-- $1 address, $2 channel name: point a channel at its simulated supplier.
UPDATE sms_channel SET address = $1 WHERE name = $2;

-- name: Progress
SELECT count(*),
       count(*) FILTER (WHERE state = 'admitted'),
       count(*) FILTER (WHERE state = 'completed'),
       count(*) FILTER (WHERE state = 'refused'),
       (SELECT count(*) FROM sms_submit WHERE result IS NOT NULL)
FROM sms_message;

-- name: Attempts
-- Attempts, retries among them, and the numbers' outcomes.
SELECT (SELECT count(*) FROM sms_attempt),
       (SELECT count(*) FROM sms_attempt WHERE retry_of IS NOT NULL),
       (SELECT count(*) FROM sms_message, unnest(outcomes) o WHERE o = 'delivered'),
       (SELECT count(*) FROM sms_message, unnest(outcomes) o WHERE o = 'failed'),
       (SELECT count(*) FROM sms_message, unnest(outcomes) o WHERE o = 'unknown');

-- name: MessageIDs
-- $1 client_msg_id prefix: the message id each of the run's requests took.
SELECT client_msg_id, id FROM sms_message WHERE client_msg_id LIKE $1 || '%';

-- name: SetWebhookTopics
-- Every app takes callbacks, on a topic named after it.
UPDATE sms_app SET webhook_topic = name;
