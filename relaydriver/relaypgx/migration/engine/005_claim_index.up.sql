-- relay engine line, version 5: claim indexes of the unordered and per-key
-- modes (docs/benchmarks.md, issue 5). Leases live only on unfinished rows and
-- every write that ends or releases a lease (complete, fail, exhaust, replay,
-- archive) clears lease_owner, so among unfinished rows lease_owner = '' means
-- "not leased" and lease_owner <> '' means "leased, live or expired".

-- Unleased unfinished rows in id order: what a claim takes. A claim moves the
-- row out of this index (lease_owner is set), so the scan never steps over the
-- rows in flight, only over the (killed) entries of rows already claimed.
CREATE INDEX relay_message_ready_idx ON relay_message (pipeline, id)
    WHERE state IN ('PENDING', 'FAILED') AND lease_owner = '';

-- Leased unfinished rows by key and expiry: the per-key claim's "no live lease
-- on this key" check reads only the key's live leases, not its backlog, and
-- the search for expired leases (recovery) reads only leased rows.
CREATE INDEX relay_message_leased_idx ON relay_message (pipeline, key, lease_expires_at)
    WHERE state IN ('PENDING', 'FAILED') AND lease_owner <> '';

-- Unfinished rows by key, for the per-key claim's "is this the head of its
-- key" probe. It replaces relay_message_key_head_idx (same columns) with a
-- predicate spelled differently from every other partial index: the probe
-- spells "unfinished" the same way, so it implies this predicate and no
-- other, and the planner cannot serve it from relay_message_head_idx — which,
-- without statistics, it did, reading every smaller unfinished id of the
-- pipeline per candidate. FAILED and PENDING are the only states between
-- 'FAILED' and 'PENDING' (relay_message_state_check).
DROP INDEX relay_message_key_head_idx;
CREATE INDEX relay_message_key_order_idx ON relay_message (pipeline, key, id)
    WHERE state BETWEEN 'FAILED' AND 'PENDING';
