-- Two indexes that every send wrote to and no read needs.
--
-- sms_attempt_message (message_id) repeats the leading column of the unique
-- index on (message_id, recipient, attempt_no), which serves every lookup
-- of a message's attempts (an equality on message_id) just as well. Each
-- attempt row and each of its updates that is not heap-only added an entry
-- to both.
--
-- sms_event had a surrogate primary key (id) beside its natural key
-- (event_key, unique): the idempotency key every intake insert conflicts
-- on. No statement looks an event up by id; id only orders an attempt's
-- events (EventsOfAttempts sorts the few rows it read by attempt_id), so
-- event_key becomes the primary key and id stays an identity column without
-- an index of its own. One index entry fewer per event.
DROP INDEX sms_attempt_message;

ALTER TABLE sms_event DROP CONSTRAINT sms_event_pkey;
ALTER TABLE sms_event DROP CONSTRAINT sms_event_event_key_key;
ALTER TABLE sms_event ADD CONSTRAINT sms_event_pkey PRIMARY KEY (event_key);
