-- relay engine schema for PostgreSQL, version 8: a released permanent hole
-- whose row commits later (after the max commit delay) is a late row. The
-- intake notices it (found_at) and an operator may ingest it explicitly as a
-- new message (ingested_at, ingested_id: the new message's id). NULL: not
-- found / not ingested. Rows written before this version read as not found.

ALTER TABLE relay_hole ADD COLUMN found_at timestamptz;
ALTER TABLE relay_hole ADD COLUMN ingested_at timestamptz;
ALTER TABLE relay_hole ADD COLUMN ingested_id bigint;
