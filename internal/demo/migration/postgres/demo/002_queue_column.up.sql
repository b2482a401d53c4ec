-- The demo projection's queue column follows the engine's rename of
-- "pipeline" to "queue".

ALTER TABLE demo_projection RENAME COLUMN pipeline TO queue;
