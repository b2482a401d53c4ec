-- The demo pipeline's projection: one row per (pipeline, key) that the demo
-- handler updates in the engine's transaction, together with the message's
-- terminal state.
CREATE TABLE demo_projection (
    pipeline    TEXT   NOT NULL,
    key         TEXT   NOT NULL,
    messages    BIGINT NOT NULL,
    total       BIGINT NOT NULL,
    last_msg_id BIGINT NOT NULL,
    PRIMARY KEY (pipeline, key)
);
