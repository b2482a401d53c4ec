-- 009: snapshots. The shore needs no table of its own for them: a snapshot
-- row arrives as an ordinary inbox event whose operation is SNAPSHOT, in its
-- task's own source stream, and is applied as an upsert under a version
-- condition; the task, its pinned position, its progress and the catch-up
-- barrier live on the ship. This version keeps the line contiguous.
SELECT 1;
