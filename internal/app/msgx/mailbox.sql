-- Statements msgx runs against the shared MariaDB/MySQL mailbox (go-sql-driver
-- placeholders). The mailbox tables belong to the AODB site: msgx never adds
-- columns to them (docs/msgx/overview.md).

-- name: InboxInsert
INSERT INTO CMINMSGS (MSGCONTENT, RECEIVETIME) VALUES (?, ?);

-- name: OutboxInsert
INSERT INTO COUTMSGS (MSGCONTENT, CREATETIME) VALUES (?, ?);

-- name: OutboxFind
SELECT ID, CREATETIME FROM COUTMSGS WHERE CREATETIME >= ? AND MSGCONTENT LIKE ? ORDER BY ID LIMIT 1;

-- name: InboxMarkCounts
SELECT COUNT(*), COALESCE(SUM(PROCFLAG IS NULL), 0) FROM CMINMSGS;

-- name: InboxMarks
SELECT ID, PROCFLAG, PROCTIME IS NOT NULL FROM CMINMSGS ORDER BY ID;
