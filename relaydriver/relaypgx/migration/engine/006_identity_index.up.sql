-- relay engine line, version 6: the identity index holds bound messages only.
--
-- The UNIQUE constraint on (pipeline, identity_key) indexed every message,
-- bound or not, so for a bare "pipeline = $1" it was as good a path as the
-- primary key. Generic plans made while a table is still empty (no
-- statistics: every path costs the same) then picked it for the claims' join
-- back to relay_message — "pipeline = ready.pipeline" as the index condition
-- and "id = ready.id" as a filter — which reads every unbound message of the
-- pipeline once per claimed row (0.85 ms per row at a 4,000-message backlog,
-- the continuous benchmark falling from 4,800 to under 2,000 msgs/s, issue 5).
--
-- A partial unique index over the bound rows enforces the same uniqueness
-- (NULLs never conflicted) and serves every lookup by identity (an equality
-- on identity_key implies it is not NULL), but no query that does not name
-- an identity can use it, so the planner has only the primary key for those.
-- It is also smaller: unbound messages (every message of a pipeline without
-- a decoder) no longer have an entry in it.
ALTER TABLE relay_message DROP CONSTRAINT relay_message_identity_key;
CREATE UNIQUE INDEX relay_message_identity_key ON relay_message (pipeline, identity_key)
    WHERE identity_key IS NOT NULL;
