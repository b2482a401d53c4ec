-- The ship's remote applier (MariaDB). The conditional writes themselves
-- are package apply's.

-- name: TableColumns
-- The columns of a rule's table, in table order; none when it does not
-- exist.
SELECT COLUMN_NAME FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?
ORDER BY ORDINAL_POSITION;
