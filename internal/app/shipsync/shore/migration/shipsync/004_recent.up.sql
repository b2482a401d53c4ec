-- The revisions a record held before its current one, newest first (at most
-- eight): a change whose result revision is among them, or is the current
-- one, was applied already — a repeat of its source record (CDC delivers at
-- least once: a connector restarted after a crash sends records again) —
-- and is answered APPLIED without a write instead of becoming a conflict.
ALTER TABLE sync_record_head ADD COLUMN recent_revisions text[] NOT NULL DEFAULT '{}';

-- How such a repeat was known: from the record head.
ALTER TABLE sync_apply_job DROP CONSTRAINT sync_apply_job_learnt_by_check;
ALTER TABLE sync_apply_job ADD CONSTRAINT sync_apply_job_learnt_by_check
    CHECK (learnt_by IN ('write', 'job', 'ledger', 'target', 'head', 'repeat'));
