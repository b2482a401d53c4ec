-- relay engine schema for SQLite, version 7: a released permanent hole whose
-- row commits later (after the max commit delay) is a late row. The intake
-- notices it (found_at) and an operator may ingest it explicitly as a
-- message (ingested_at, ingested_id: that message's id). NULL: not found /
-- not ingested. Rows written before this version read as not found. The
-- partial index serves the intake's periodic check (HoleListUnfound): the
-- unfound holes of a queue released within its look-back window, so the check
-- stays cheap however many holes a queue has logged.

ALTER TABLE relay_hole ADD COLUMN found_at INTEGER;
ALTER TABLE relay_hole ADD COLUMN ingested_at INTEGER;
ALTER TABLE relay_hole ADD COLUMN ingested_id INTEGER;
CREATE INDEX relay_hole_unfound_idx ON relay_hole (queue, released_at) WHERE found_at IS NULL;
