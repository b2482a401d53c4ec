-- The bench effect table's queue column follows the engine's rename of
-- "pipeline" to "queue".

ALTER TABLE bench_effect RENAME COLUMN pipeline TO queue;
