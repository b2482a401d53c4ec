-- relay engine schema for SQLite, version 6: a lock row records which process
-- holds it. holder names the machine and its PID namespace, holder_pid the
-- process. A SQLite store is a local file, so when the holder is on this
-- machine, in this PID namespace, and its process no longer exists (killed),
-- TryLock takes the lease at once instead of waiting for it to expire. Rows
-- written before this version have holder '' and are only ever taken on
-- expiry.

ALTER TABLE relay_lock ADD COLUMN holder TEXT NOT NULL DEFAULT '';
ALTER TABLE relay_lock ADD COLUMN holder_pid INTEGER NOT NULL DEFAULT 0;
