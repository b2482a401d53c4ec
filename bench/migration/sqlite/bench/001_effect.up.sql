-- The effect table of `relay bench`: the benchmark handler inserts one row per
-- message in the engine's transaction.
CREATE TABLE bench_effect (
    pipeline TEXT   NOT NULL,
    msg_id   BIGINT NOT NULL,
    PRIMARY KEY (pipeline, msg_id)
);
