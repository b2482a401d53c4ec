-- The example app's own table, in its own migration line ("orders"), applied
-- beside the engine's line by relaymigrate.Up.
CREATE TABLE orders (
    order_id      TEXT PRIMARY KEY,
    status        TEXT NOT NULL,
    amount_cents  BIGINT NOT NULL,
    -- version counts the events applied to the order: a replayed or duplicate
    -- event that changed the row twice would show here.
    version       BIGINT NOT NULL,
    last_event_id TEXT NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL
);
