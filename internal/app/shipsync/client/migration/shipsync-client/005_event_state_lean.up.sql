-- Two indexes of event_state served no query that runs while the client
-- works: (result, rule_id) and (rule_id, business_at). The census and the
-- backlog groups read every row anyway. Each was written on every event's
-- insert, and the first again when its result arrived, on the path that
-- limits how fast a backlog drains; they go.
DROP INDEX IF EXISTS event_state_result;
DROP INDEX IF EXISTS event_state_business;
