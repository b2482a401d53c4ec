-- Room on each page for an updated row to stay beside its old version.
-- These tables' rows are inserted and then updated a few times in the
-- next seconds (a limit counter's count, a message's state and outcomes, an
-- attempt's state, a submit's result) without changing any indexed column,
-- so PostgreSQL can make the update "heap-only" — no new entry in any of
-- the table's indexes — but only when the page has free space; at the
-- default fill of 100 % most of these updates had to move the row and add
-- an entry to every index. Applies to pages written from now on.
ALTER TABLE sms_limit_counter SET (fillfactor = 80);
ALTER TABLE sms_message SET (fillfactor = 80);
ALTER TABLE sms_attempt SET (fillfactor = 80);
ALTER TABLE sms_submit SET (fillfactor = 80);
