-- Windowed snapshot tasks (WINDOW_RECONCILE): the trusted instant that fixes
-- the dataset window's boundary for the whole task (Unix microseconds UTC;
-- NULL: an ordinary snapshot of the whole table), and the reconcile's result
-- once it ran (JSON: counts, digests, exceptions; NULL: not yet).
ALTER TABLE snapshot_task ADD COLUMN window_now INTEGER;
ALTER TABLE snapshot_task ADD COLUMN result TEXT;

-- A row the windowed snapshot did not send because its business time is
-- NULL, unreadable or in the future: why (NULL: an ordinary row).
ALTER TABLE snapshot_row ADD COLUMN problem TEXT;
CREATE INDEX snapshot_row_problem ON snapshot_row (task_id) WHERE problem IS NOT NULL;
