-- shipsync shore: a cheaper inbox insert.

-- No query reads the inbox by record key: events are processed in key order
-- from the engine's apply queue (keyed by rule and primary-key hash), and
-- record heads, conflicts and receipts have their own tables. The index cost
-- every received event an insert at a random place (pk_hash is a SHA-256),
-- about a third of PostgreSQL's CPU for the inbox row (docs/benchmarks.md).
DROP INDEX sync_inbox_event_key;

-- A batch's stored answer (≈ 40 bytes per event: its id as text and its
-- status) is stored out of line as it is: PostgreSQL tried to compress every
-- one (pglz, ≈ 3 % of its CPU per received event) and, the ids being random,
-- always gave up and stored it uncompressed.
ALTER TABLE sync_upload_batch ALTER COLUMN statuses SET STORAGE EXTERNAL;
