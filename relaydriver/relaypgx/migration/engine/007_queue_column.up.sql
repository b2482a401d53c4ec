-- relay engine schema for PostgreSQL, version 7: the column that names a
-- message's queue was called "pipeline", which the documentation also uses
-- for the whole path from source to sink. It is renamed to "queue" in every
-- engine table; indexes, keys and constraints follow the column, and no data
-- moves (PostgreSQL renames a column in the catalog only).

ALTER TABLE relay_message RENAME COLUMN pipeline TO queue;
ALTER TABLE relay_message_history RENAME COLUMN pipeline TO queue;
ALTER TABLE relay_cursor RENAME COLUMN pipeline TO queue;
ALTER TABLE relay_hole RENAME COLUMN pipeline TO queue;
