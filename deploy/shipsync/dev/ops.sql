-- The development business table, the same on the ship and on the shore:
-- its own columns plus the platform's _sync_* columns every synced table has.
CREATE TABLE IF NOT EXISTS voyage (
    id               BIGINT PRIMARY KEY,
    vessel           VARCHAR(40) NOT NULL,
    note             VARCHAR(200) NULL,
    updated_at       DATETIME(6) NOT NULL,
    _sync_revision   CHAR(36) NOT NULL,
    _sync_origin     VARCHAR(64) NOT NULL,
    _sync_event_id   CHAR(36) NULL,
    _sync_updated_at DATETIME(6) NOT NULL
);
