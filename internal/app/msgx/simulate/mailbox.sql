-- Statements the AODB simulator runs against the shared MariaDB/MySQL mailbox
-- (go-sql-driver placeholders). The table shapes are the AODB site's: never
-- add columns (seed 000 §1.2). utf8mb4: SIS text may hold any Unicode.

-- name: CreateInbox
CREATE TABLE IF NOT EXISTS CMINMSGS (
  ID          BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  MSGCONTENT  MEDIUMTEXT NULL,
  RECEIVETIME DATETIME(3) NULL,
  PROCFLAG    VARCHAR(16) NULL,
  PROCTIME    DATETIME(3) NULL
) DEFAULT CHARSET = utf8mb4;

-- name: CreateOutbox
CREATE TABLE IF NOT EXISTS COUTMSGS (
  ID         BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  MSGCONTENT MEDIUMTEXT NOT NULL,
  CREATETIME DATETIME(3) NOT NULL,
  SENDFLAG   VARCHAR(16) NULL
) DEFAULT CHARSET = utf8mb4;

-- name: InboxInsert
INSERT INTO CMINMSGS (MSGCONTENT, RECEIVETIME) VALUES (?, ?);

-- The committed rows another connection can see while a late insert is still
-- open: the highest id and whether the late id is (wrongly) visible.
-- name: InboxVisible
SELECT COALESCE(MAX(ID), 0), COUNT(CASE WHEN ID = ? THEN 1 END) FROM CMINMSGS;

-- name: InboxMarks
SELECT ID, PROCFLAG FROM CMINMSGS WHERE ID BETWEEN ? AND ? ORDER BY ID;
