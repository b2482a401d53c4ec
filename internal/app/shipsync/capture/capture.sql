-- SQL of the trigger capture, on the business database (MariaDB/MySQL).
-- Statements whose names start with Trigger are text/template templates
-- (install.go fills them from information_schema); identifiers in them are
-- quoted and literals escaped by install.go, never taken raw from a caller.

-- name: ChangelogCreate
-- One row per captured row change, appended by the AFTER triggers in the
-- business transaction. id is the capture's position (source.pos); payload
-- is what the watermark intake copies into the local store: a virtual
-- column, so the row is written once.
CREATE TABLE IF NOT EXISTS _sync_changelog (
    id          BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
    db_name     VARCHAR(64) NOT NULL,
    table_name  VARCHAR(64) NOT NULL,
    schema_id   BIGINT      NOT NULL,
    op          CHAR(1)     NOT NULL,
    key_json    LONGTEXT    NOT NULL,
    before_json LONGTEXT    NULL,
    after_json  LONGTEXT    NULL,
    changed_at  DATETIME(6) NOT NULL,
    payload     LONGTEXT AS (JSON_OBJECT('db', db_name, 'table', table_name, 'schema_id', schema_id,
        'op', op, 'key', key_json,
        'before', before_json, 'after', after_json,
        'changed_at', DATE_FORMAT(changed_at, '%Y-%m-%d %H:%i:%s.%f'))) VIRTUAL
) ENGINE=InnoDB;

-- name: SchemaCreate
-- The schema history: every column set install generated triggers for
-- (information_schema, as JSON), never changed or deleted while the
-- changelog exists. Each trigger writes its schema id into the changelog
-- row, so the producer types every row by the schema its trigger was made
-- for, across ALTER TABLE and re-install.
CREATE TABLE IF NOT EXISTS _sync_capture_schema (
    id           BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
    db_name      VARCHAR(64) NOT NULL,
    table_name   VARCHAR(64) NOT NULL,
    columns_json LONGTEXT    NOT NULL,
    key_json     LONGTEXT    NOT NULL,
    installed_at DATETIME(6) NOT NULL
) ENGINE=InnoDB;

-- name: SchemaInsert
INSERT INTO _sync_capture_schema (db_name, table_name, columns_json, key_json, installed_at) VALUES (?, ?, ?, ?, ?);

-- name: SchemaGet
SELECT db_name, table_name, columns_json, key_json FROM _sync_capture_schema WHERE id = ?;

-- name: TableMetaCreate
-- The tables installed now: the node id baked into their triggers and the
-- schema they write.
CREATE TABLE IF NOT EXISTS _sync_capture_table (
    db_name      VARCHAR(64) NOT NULL,
    table_name   VARCHAR(64) NOT NULL,
    node_id      VARCHAR(64) NOT NULL,
    schema_id    BIGINT      NOT NULL,
    installed_at DATETIME(6) NOT NULL,
    PRIMARY KEY (db_name, table_name)
) ENGINE=InnoDB;

-- name: TableMetaUpsert
INSERT INTO _sync_capture_table (db_name, table_name, node_id, schema_id, installed_at)
VALUES (?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE node_id = VALUES(node_id), schema_id = VALUES(schema_id), installed_at = VALUES(installed_at);

-- name: CurrentSchema
-- The schema the table's triggers write now, if installed: reused by a
-- re-install when the columns did not change.
SELECT s.id, s.columns_json, s.key_json FROM _sync_capture_table t
JOIN _sync_capture_schema s ON s.id = t.schema_id
WHERE t.db_name = ? AND t.table_name = ?;

-- name: TableMetaList
SELECT table_name FROM _sync_capture_table WHERE db_name = ? ORDER BY table_name;

-- name: TableMetaDelete
DELETE FROM _sync_capture_table WHERE db_name = ? AND table_name = ?;

-- name: CurrentDatabase
SELECT DATABASE();

-- name: Columns
SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE = 'YES',
    COALESCE(NUMERIC_PRECISION, 0), COALESCE(NUMERIC_SCALE, 0), COALESCE(DATETIME_PRECISION, 0)
FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?
ORDER BY ORDINAL_POSITION;

-- name: PrimaryKey
SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE
WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND CONSTRAINT_NAME = 'PRIMARY'
ORDER BY ORDINAL_POSITION;

-- name: JSONChecks
-- MariaDB's JSON type is LONGTEXT with a json_valid check named after the column.
SELECT CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS
WHERE CONSTRAINT_SCHEMA = ? AND TABLE_NAME = ?;

-- name: TriggerDrop
DROP TRIGGER IF EXISTS {{.Name}};

-- name: ChangelogDrop
DROP TABLE IF EXISTS _sync_changelog, _sync_capture_table, _sync_capture_schema;

-- name: ChangelogPrune
-- Rows at or below the watermark are in the local store already; hole ids
-- still watched for a late row are kept (the NOT IN list, possibly empty).
DELETE FROM _sync_changelog WHERE id <= ? {{.Keep}} ORDER BY id LIMIT {{.Limit}};

-- name: TriggerBeforeInsert
-- A local insert (no event id) gets fresh platform metadata; a remote apply
-- (an event id set) keeps what it writes.
CREATE OR REPLACE TRIGGER {{.Name}} BEFORE INSERT ON {{.Table}} FOR EACH ROW
BEGIN
    IF NEW.`_sync_event_id` IS NULL THEN
        SET NEW.`_sync_revision` = UUID(), NEW.`_sync_origin` = {{.Node}},
            NEW.`_sync_updated_at` = UTC_TIMESTAMP(6);
    END IF;
END;

-- name: TriggerBeforeUpdate
-- A remote apply sets an event id different from the old row's and keeps
-- what it writes; any other update that changes the row is a local write
-- and gets fresh metadata; an update that changes nothing stays a no-op
-- (as in the binlog, it produces no change event).
CREATE OR REPLACE TRIGGER {{.Name}} BEFORE UPDATE ON {{.Table}} FOR EACH ROW
BEGIN
    IF NOT (NEW.`_sync_event_id` IS NOT NULL AND NOT (NEW.`_sync_event_id` <=> OLD.`_sync_event_id`))
        AND NOT ({{.Unchanged}}) THEN
        SET NEW.`_sync_revision` = UUID(), NEW.`_sync_origin` = {{.Node}}, NEW.`_sync_event_id` = NULL,
            NEW.`_sync_updated_at` = UTC_TIMESTAMP(6);
    END IF;
END;

-- name: TriggerAfterInsert
CREATE OR REPLACE TRIGGER {{.Name}} AFTER INSERT ON {{.Table}} FOR EACH ROW
INSERT INTO _sync_changelog (db_name, table_name, schema_id, op, key_json, before_json, after_json, changed_at)
VALUES ({{.DB}}, {{.TableLit}}, {{.SchemaID}}, 'c', {{.NewKey}}, NULL, {{.NewRow}}, UTC_TIMESTAMP(6));

-- name: TriggerAfterUpdate
-- One row even when the primary key changed (key_json is the new key); the
-- producer splits it into Debezium's delete + tombstone + create.
CREATE OR REPLACE TRIGGER {{.Name}} AFTER UPDATE ON {{.Table}} FOR EACH ROW
BEGIN
    IF NOT ({{.Unchanged}}) THEN
        INSERT INTO _sync_changelog (db_name, table_name, schema_id, op, key_json, before_json, after_json, changed_at)
        VALUES ({{.DB}}, {{.TableLit}}, {{.SchemaID}}, 'u', {{.NewKey}}, {{.OldRow}}, {{.NewRow}}, UTC_TIMESTAMP(6));
    END IF;
END;

-- name: TriggerAfterDelete
CREATE OR REPLACE TRIGGER {{.Name}} AFTER DELETE ON {{.Table}} FOR EACH ROW
INSERT INTO _sync_changelog (db_name, table_name, schema_id, op, key_json, before_json, after_json, changed_at)
VALUES ({{.DB}}, {{.TableLit}}, {{.SchemaID}}, 'd', {{.OldKey}}, {{.OldRow}}, NULL, UTC_TIMESTAMP(6));
