-- shipsync shore: every case of a record, not only its active one.

-- The arbiter asks whether a version a node reported is one the shore has
-- already received from that node (evidence the shore found on any of the
-- record's cases); only the active case had an index by record.
CREATE INDEX sync_conflict_case_record ON sync_conflict_case (rule_id, pk_hash);
