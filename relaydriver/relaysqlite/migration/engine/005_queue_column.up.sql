-- relay engine schema for SQLite, version 5: the column that names a
-- message's queue was called "pipeline"; it is renamed to "queue" in every
-- engine table, as relaypgx's 007_queue_column does. SQLite rewrites the
-- indexes and keys that name the column; no data moves.

ALTER TABLE relay_message RENAME COLUMN pipeline TO queue;
ALTER TABLE relay_message_history RENAME COLUMN pipeline TO queue;
ALTER TABLE relay_cursor RENAME COLUMN pipeline TO queue;
ALTER TABLE relay_hole RENAME COLUMN pipeline TO queue;
ALTER TABLE relay_sequence RENAME COLUMN pipeline TO queue;
