-- Queries of the msgx flight store (PostgreSQL only), parsed once at package
-- init by sqlfile.MustParse (statements.go). Every time is a parameter. The
-- collection names 'GATE' … 'VIPF' are flight.ResourceKind/ServiceKind
-- strings and "DELY"; statements.go checks at init that every kind appears.

-- ---------------------------------------------------------------------------
-- PIPELINE_LOCK (seed 000 §5.3, INV-18)

-- name: PipelineLock
-- Transaction-scoped advisory lock; the key is the current schema and the
-- lock's name, so deployments (and tests) in different schemas of one database
-- do not exclude each other. Re-entrant within a session.
SELECT pg_advisory_xact_lock(hashtextextended(coalesce(current_schema(), '') || '/msgx:pipeline_lock', 0));

-- ---------------------------------------------------------------------------
-- Flight state: FLIGHT_SCHD and its detail tables (seed 000 §11)

-- name: SchdLoad
-- The FLIGHT_SCHD rows of exactly the flights $1 (SchdKeys selects a wider
-- set: masters and children). The array is read through the materialized CTE
-- t so that no plan depends on its length: PostgreSQL then keeps one generic
-- plan per connection instead of planning a custom one every time.
WITH t AS MATERIALIZED (
    SELECT $1::text[] AS flids
)
SELECT s.flid, s.state, s.state_version, s.operation_day, s.last_msg_id, s.created_at, s.updated_at,
       s.flno, s.awcd, s.adid, s.flty, s.sodt, s.eodt, s.aodt, s.acty, s.acrg, s.term,
       s.stat, s.abst, s.abrs, s.maid, s.csop, s.csft
FROM flight_schd s
WHERE s.flid = ANY ((SELECT flids FROM t)::text[]);

-- name: DetailsLoad
-- Every detail row of exactly the flights $1 (as SchdLoad), in one result of
-- a shared shape: tab names the collection (the resource kind, DELY, SRVT,
-- VIPF or the route kind); code is the code or APCD; t1..t4 the times (BTIM,
-- ETIM, ABTM, AETM; SARR, SDEP for routes); n is DURA or QNTY.
WITH t AS MATERIALIZED (
    SELECT $1::text[] AS flids
)
SELECT 'GATE' AS tab, d.flid, d.ordinal, d.source_seq, d.code, d.begin_at AS t1, d.end_at AS t2,
       d.actual_begin_at AS t3, d.actual_end_at AS t4, NULL::bigint AS n, NULL::text AS remark
FROM flight_gate d WHERE d.flid = ANY ((SELECT flids FROM t)::text[])
UNION ALL
SELECT 'CKIC', d.flid, d.ordinal, d.source_seq, d.code, d.begin_at, d.end_at, d.actual_begin_at, d.actual_end_at, NULL, NULL
FROM flight_ckic d WHERE d.flid = ANY ((SELECT flids FROM t)::text[])
UNION ALL
SELECT 'BELT', d.flid, d.ordinal, d.source_seq, d.code, d.begin_at, d.end_at, d.actual_begin_at, d.actual_end_at, NULL, NULL
FROM flight_belt d WHERE d.flid = ANY ((SELECT flids FROM t)::text[])
UNION ALL
SELECT 'STND', d.flid, d.ordinal, d.source_seq, d.code, d.begin_at, d.end_at, d.actual_begin_at, d.actual_end_at, NULL, NULL
FROM flight_stnd d WHERE d.flid = ANY ((SELECT flids FROM t)::text[])
UNION ALL
SELECT 'CHUT', d.flid, d.ordinal, d.source_seq, d.code, d.begin_at, d.end_at, d.actual_begin_at, d.actual_end_at, NULL, NULL
FROM flight_chut d WHERE d.flid = ANY ((SELECT flids FROM t)::text[])
UNION ALL
SELECT 'BRDG', d.flid, d.ordinal, d.source_seq, d.code, d.begin_at, d.end_at, d.actual_begin_at, d.actual_end_at, NULL, NULL
FROM flight_brdg d WHERE d.flid = ANY ((SELECT flids FROM t)::text[])
UNION ALL
SELECT 'CHOK', d.flid, d.ordinal, d.source_seq, d.code, d.begin_at, d.end_at, d.actual_begin_at, d.actual_end_at, NULL, NULL
FROM flight_chok d WHERE d.flid = ANY ((SELECT flids FROM t)::text[])
UNION ALL
SELECT 'DELY', d.flid, d.ordinal, d.source_seq, d.code, NULL, NULL, NULL, NULL, d.minutes, d.remark
FROM flight_dely d WHERE d.flid = ANY ((SELECT flids FROM t)::text[])
UNION ALL
SELECT 'SRVT', d.flid, d.ordinal, d.source_seq, d.code, NULL, NULL, NULL, NULL, d.quantity, d.remark
FROM flight_srvt d WHERE d.flid = ANY ((SELECT flids FROM t)::text[])
UNION ALL
SELECT 'VIPF', d.flid, d.ordinal, d.source_seq, d.code, NULL, NULL, NULL, NULL, d.quantity, d.remark
FROM flight_vipf d WHERE d.flid = ANY ((SELECT flids FROM t)::text[])
UNION ALL
SELECT d.route_kind, d.flid, d.ordinal, d.source_seq, d.airport, d.sched_arr, d.sched_dep, NULL, NULL, NULL, NULL
FROM flight_route_point d WHERE d.flid = ANY ((SELECT flids FROM t)::text[])
ORDER BY 2, 1, 3;

-- name: SchdKeys
-- The flights $1; with $3 also their current masters (MAID); with $2 also
-- every flight whose MAID is one of those (children, any STATE) — each with
-- its STATE_VERSION and xmin, the row version a Cache checks its entry
-- against. LoadWith reads this set first when it needs masters or children,
-- then the rows it still needs with SchdLoad and DetailsLoad. The parameters
-- go through the materialized CTE p for one generic plan (see SchdLoad); a
-- false flag gates its scan off at run time.
WITH p AS MATERIALIZED (
    SELECT $1::text[] AS flids, $2::boolean AS children, $3::boolean AS masters
), x AS (
    SELECT f.flid FROM p, unnest(p.flids) AS f (flid)
    UNION
    SELECT s.maid FROM flight_schd s
    WHERE (SELECT masters FROM p) AND s.flid = ANY ((SELECT flids FROM p)::text[]) AND s.maid IS NOT NULL
)
SELECT s.flid, s.state_version, s.xmin::text::bigint FROM flight_schd s WHERE s.flid = ANY (ARRAY(SELECT flid FROM x))
UNION
SELECT s.flid, s.state_version, s.xmin::text::bigint FROM flight_schd s
WHERE (SELECT children FROM p) AND s.maid = ANY (ARRAY(SELECT flid FROM x));

-- name: SchdSave
-- INV-14: delete the detail rows of the collections to be rewritten — the
-- pairs ($24[i], $25[i]) of collection name (the tab values of DetailsLoad)
-- and FLID — and upsert the FLIGHT_SCHD rows of the flights $1 from the
-- parallel arrays (the whole row comes from the state). Each sub-statement
-- touches its own table, so their order does not matter; DetailsInsert then
-- inserts those collections in full. The guard trigger refuses an
-- OPERATION_DAY change and a STATE_VERSION that moves back, which fails the
-- whole statement, deletes included. Each upserted row is returned with its
-- xmin, the row version a Cache checks. As in SchdLoad, the parameters are
-- read through a materialized CTE so that the plan does not depend on the
-- arrays' lengths and PostgreSQL keeps a generic plan. Each delete joins the
-- (tab, FLID) pairs to its table, so it probes the primary key per pair
-- rather than scanning a small table whole (what "flid = ANY (array)" got
-- on a generic plan).
WITH a AS MATERIALIZED (
    SELECT $1::text[] AS flid, $2::text[] AS state, $3::bigint[] AS state_version, $4::text[] AS operation_day,
           $5::bigint[] AS last_msg_id, $6::timestamptz[] AS created_at, $7::timestamptz[] AS updated_at,
           $8::text[] AS flno, $9::text[] AS awcd, $10::text[] AS adid, $11::text[] AS flty,
           $12::timestamptz[] AS sodt, $13::timestamptz[] AS eodt, $14::timestamptz[] AS aodt,
           $15::text[] AS acty, $16::text[] AS acrg, $17::text[] AS term,
           $18::text[] AS stat, $19::text[] AS abst, $20::text[] AS abrs,
           $21::text[] AS maid, $22::text[] AS csop, $23::text[] AS csft,
           $24::text[] AS del_tab, $25::text[] AS del_flid
), d AS MATERIALIZED (
    SELECT u.tab, u.flid FROM a, unnest(a.del_tab, a.del_flid) AS u (tab, flid)
),
gate AS (DELETE FROM flight_gate x USING d WHERE d.tab = 'GATE' AND x.flid = d.flid),
ckic AS (DELETE FROM flight_ckic x USING d WHERE d.tab = 'CKIC' AND x.flid = d.flid),
belt AS (DELETE FROM flight_belt x USING d WHERE d.tab = 'BELT' AND x.flid = d.flid),
stnd AS (DELETE FROM flight_stnd x USING d WHERE d.tab = 'STND' AND x.flid = d.flid),
chut AS (DELETE FROM flight_chut x USING d WHERE d.tab = 'CHUT' AND x.flid = d.flid),
brdg AS (DELETE FROM flight_brdg x USING d WHERE d.tab = 'BRDG' AND x.flid = d.flid),
chok AS (DELETE FROM flight_chok x USING d WHERE d.tab = 'CHOK' AND x.flid = d.flid),
dely AS (DELETE FROM flight_dely x USING d WHERE d.tab = 'DELY' AND x.flid = d.flid),
srvt AS (DELETE FROM flight_srvt x USING d WHERE d.tab = 'SRVT' AND x.flid = d.flid),
vipf AS (DELETE FROM flight_vipf x USING d WHERE d.tab = 'VIPF' AND x.flid = d.flid),
rout AS (DELETE FROM flight_route_point x USING d WHERE d.tab = 'ROUT' AND x.flid = d.flid AND x.route_kind = 'ROUT'),
erut AS (DELETE FROM flight_route_point x USING d WHERE d.tab = 'ERUT' AND x.flid = d.flid AND x.route_kind = 'ERUT')
INSERT INTO flight_schd (flid, state, state_version, operation_day, last_msg_id, created_at, updated_at,
                         flno, awcd, adid, flty, sodt, eodt, aodt, acty, acrg, term,
                         stat, abst, abrs, maid, csop, csft)
SELECT u.* FROM a, unnest(a.flid, a.state, a.state_version, a.operation_day, a.last_msg_id, a.created_at, a.updated_at,
                          a.flno, a.awcd, a.adid, a.flty, a.sodt, a.eodt, a.aodt, a.acty, a.acrg, a.term,
                          a.stat, a.abst, a.abrs, a.maid, a.csop, a.csft) AS u
ON CONFLICT (flid) DO UPDATE SET
    state = excluded.state, state_version = excluded.state_version, operation_day = excluded.operation_day,
    last_msg_id = excluded.last_msg_id, created_at = excluded.created_at, updated_at = excluded.updated_at,
    flno = excluded.flno, awcd = excluded.awcd, adid = excluded.adid, flty = excluded.flty,
    sodt = excluded.sodt, eodt = excluded.eodt, aodt = excluded.aodt,
    acty = excluded.acty, acrg = excluded.acrg, term = excluded.term,
    stat = excluded.stat, abst = excluded.abst, abrs = excluded.abrs,
    maid = excluded.maid, csop = excluded.csop, csft = excluded.csft
RETURNING flid, xmin::text::bigint;

-- name: DetailsInsert
-- Every detail row of a Save in one statement, from three sets of parallel
-- arrays whose first column names the collection (the tab values of
-- DetailsLoad): resources $1..$9 (tab, flid, ordinal, source_seq, code, begin,
-- end, actual begin, actual end), delays and services $10..$16 (tab, flid,
-- ordinal, source_seq, code, minutes or quantity, remark), route points
-- $17..$23 (route kind, flid, ordinal, source_seq, airport, SARR, SDEP). The
-- arrays go through the materialized CTE a for a generic plan (see SchdSave).
WITH a AS MATERIALIZED (
    SELECT $1::text[] AS r1, $2::text[] AS r2, $3::integer[] AS r3, $4::bigint[] AS r4, $5::text[] AS r5,
           $6::timestamptz[] AS r6, $7::timestamptz[] AS r7, $8::timestamptz[] AS r8, $9::timestamptz[] AS r9,
           $10::text[] AS n1, $11::text[] AS n2, $12::integer[] AS n3, $13::bigint[] AS n4, $14::text[] AS n5,
           $15::bigint[] AS n6, $16::text[] AS n7,
           $17::text[] AS p1, $18::text[] AS p2, $19::integer[] AS p3, $20::bigint[] AS p4, $21::text[] AS p5,
           $22::timestamptz[] AS p6, $23::timestamptz[] AS p7
), r AS (
    SELECT u.* FROM a, unnest(a.r1, a.r2, a.r3, a.r4, a.r5, a.r6, a.r7, a.r8, a.r9)
        AS u (tab, flid, ordinal, source_seq, code, begin_at, end_at, actual_begin_at, actual_end_at)
), n AS (
    SELECT u.* FROM a, unnest(a.n1, a.n2, a.n3, a.n4, a.n5, a.n6, a.n7)
        AS u (tab, flid, ordinal, source_seq, code, n, remark)
),
gate AS (INSERT INTO flight_gate (flid, ordinal, source_seq, code, begin_at, end_at, actual_begin_at, actual_end_at)
         SELECT flid, ordinal, source_seq, code, begin_at, end_at, actual_begin_at, actual_end_at FROM r WHERE tab = 'GATE'),
ckic AS (INSERT INTO flight_ckic (flid, ordinal, source_seq, code, begin_at, end_at, actual_begin_at, actual_end_at)
         SELECT flid, ordinal, source_seq, code, begin_at, end_at, actual_begin_at, actual_end_at FROM r WHERE tab = 'CKIC'),
belt AS (INSERT INTO flight_belt (flid, ordinal, source_seq, code, begin_at, end_at, actual_begin_at, actual_end_at)
         SELECT flid, ordinal, source_seq, code, begin_at, end_at, actual_begin_at, actual_end_at FROM r WHERE tab = 'BELT'),
stnd AS (INSERT INTO flight_stnd (flid, ordinal, source_seq, code, begin_at, end_at, actual_begin_at, actual_end_at)
         SELECT flid, ordinal, source_seq, code, begin_at, end_at, actual_begin_at, actual_end_at FROM r WHERE tab = 'STND'),
chut AS (INSERT INTO flight_chut (flid, ordinal, source_seq, code, begin_at, end_at, actual_begin_at, actual_end_at)
         SELECT flid, ordinal, source_seq, code, begin_at, end_at, actual_begin_at, actual_end_at FROM r WHERE tab = 'CHUT'),
brdg AS (INSERT INTO flight_brdg (flid, ordinal, source_seq, code, begin_at, end_at, actual_begin_at, actual_end_at)
         SELECT flid, ordinal, source_seq, code, begin_at, end_at, actual_begin_at, actual_end_at FROM r WHERE tab = 'BRDG'),
chok AS (INSERT INTO flight_chok (flid, ordinal, source_seq, code, begin_at, end_at, actual_begin_at, actual_end_at)
         SELECT flid, ordinal, source_seq, code, begin_at, end_at, actual_begin_at, actual_end_at FROM r WHERE tab = 'CHOK'),
dely AS (INSERT INTO flight_dely (flid, ordinal, source_seq, code, minutes, remark)
         SELECT flid, ordinal, source_seq, code, n, remark FROM n WHERE tab = 'DELY'),
srvt AS (INSERT INTO flight_srvt (flid, ordinal, source_seq, code, quantity, remark)
         SELECT flid, ordinal, source_seq, code, n, remark FROM n WHERE tab = 'SRVT'),
vipf AS (INSERT INTO flight_vipf (flid, ordinal, source_seq, code, quantity, remark)
         SELECT flid, ordinal, source_seq, code, n, remark FROM n WHERE tab = 'VIPF')
INSERT INTO flight_route_point (route_kind, flid, ordinal, source_seq, airport, sched_arr, sched_dep)
SELECT u.* FROM a, unnest(a.p1, a.p2, a.p3, a.p4, a.p5, a.p6, a.p7) AS u;

-- name: SchdPage
-- LoadAll: the next page of FLIDs after $1.
SELECT flid FROM flight_schd WHERE flid > $1 ORDER BY flid LIMIT $2;

-- ---------------------------------------------------------------------------
-- Flight history (seed 000 §9.3, §12.5, D1)

-- name: HistoryCandidates
-- OPERATION_DAY < $1, or no OPERATION_DAY and created before $5 (NULL: never),
-- and quiet since $2, any STATE, FLID after $4 ('' = from the start), by FLID.
SELECT flid FROM flight_schd
WHERE (operation_day < $1 OR (operation_day IS NULL AND created_at < $5)) AND updated_at < $2 AND flid > $4
ORDER BY flid
LIMIT $3;

-- name: HistoryArchiveDelete
-- One statement: re-check each candidate's STATE_VERSION (locking the row),
-- archive the unchanged ones and delete exactly those (details cascade). A
-- failing history insert (e.g. a document that is not JSON) fails the whole
-- statement, so nothing is deleted.
WITH i AS (
    SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[]) AS i (flid, state_version, doc)
), c AS (
    SELECT s.flid, s.state, s.state_version, s.operation_day, i.doc
    FROM flight_schd s JOIN i ON i.flid = s.flid AND i.state_version = s.state_version
    FOR UPDATE OF s
), h AS (
    INSERT INTO flight_schd_hst (flid, state, state_version, operation_day, archived_at, doc)
    SELECT flid, state, state_version, operation_day, $4, doc::jsonb FROM c
    RETURNING flid
)
DELETE FROM flight_schd s USING h WHERE s.flid = h.flid
RETURNING s.flid;

-- name: HistoryPurge
-- G-FLIGHT-HIST-RETENTION: at most $2 rows archived before $1, oldest first.
DELETE FROM flight_schd_hst WHERE hst_id IN (
    SELECT hst_id FROM flight_schd_hst WHERE archived_at < $1 ORDER BY archived_at, hst_id LIMIT $2
);

-- ---------------------------------------------------------------------------
-- REF_MASTER (seed 000 §7.2)

-- name: RefUpsert
INSERT INTO ref_master (rtype, rkey, rval, updated_at, last_msg_id)
SELECT $1, k, v, $4, $5 FROM unnest($2::text[], $3::text[]) AS r (k, v)
ON CONFLICT (rtype, rkey) DO UPDATE SET
    rval = excluded.rval, updated_at = excluded.updated_at, last_msg_id = excluded.last_msg_id;

-- name: RefLoad
SELECT rkey, rval FROM ref_master WHERE rtype = $1;

-- ---------------------------------------------------------------------------
-- REQ_TRACK (seed 000 §7.2, G-REQ-TRACK)

-- name: RequestLock
-- Serialises registrations of one (type, scope, sender) so that each expires
-- the previous open request instead of failing on the open-request key.
SELECT pg_advisory_xact_lock(hashtextextended(
    coalesce(current_schema(), '') || '/msgx:req_track/' || $1 || '/' || $2 || '/' || $3, 0));

-- name: RequestExpireOpen
UPDATE req_track SET state = 'EXPIRED', done_at = $4
WHERE req_type = $1 AND scope = $2 AND sender = $3 AND state IN ('PENDING', 'SENT');

-- name: RequestInsert
INSERT INTO req_track (req_type, scope, sender, seqn, state, created_at)
VALUES ($1, $2, $3, $4, 'PENDING', $5)
RETURNING id;

-- name: RequestMarkSent
UPDATE req_track SET state = 'SENT', outbox_id = $2, sent_at = $3
WHERE id = $1 AND state = 'PENDING';

-- name: RequestFindOpen
-- Locks the row so that RequestExpire waits for the caller's transaction.
SELECT id, req_type, scope, sender, seqn, state, outbox_id, created_at, sent_at, done_at
FROM req_track
WHERE req_type = $1 AND sender = $2 AND seqn = $3 AND state IN ('PENDING', 'SENT')
FOR UPDATE;

-- name: RequestDone
UPDATE req_track SET state = 'DONE', done_at = $2 WHERE id = $1 AND state = 'SENT';

-- name: RequestExpire
UPDATE req_track SET state = 'EXPIRED', done_at = $2
WHERE (state = 'SENT' AND sent_at < $1) OR (state = 'PENDING' AND created_at < $1);

-- name: RequestPending
SELECT id, req_type, scope, sender, seqn, state, outbox_id, created_at, sent_at, done_at
FROM req_track WHERE state = 'PENDING' ORDER BY id;

-- name: RequestPurgeClosed
-- G-REQ-TRACK-RETENTION: at most $2 closed rows closed before $1.
DELETE FROM req_track WHERE id IN (
    SELECT id FROM req_track WHERE state IN ('DONE', 'EXPIRED') AND done_at < $1 ORDER BY done_at, id LIMIT $2
);

-- ---------------------------------------------------------------------------
-- SCHD_SNAP_LOG (seed 000 §7.1, §9.3)

-- name: SnapLogAppend
INSERT INTO schd_snap_log (msg_id, kind, identity, records, applied, outcome, scope_start, scope_end, recv_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9);

-- name: SnapLogPurge
-- Received before $1 and covering no operating day from $2 on (a NULL scope
-- covers none); at most $3 rows, oldest first.
DELETE FROM schd_snap_log WHERE id IN (
    SELECT id FROM schd_snap_log
    WHERE recv_at < $1 AND (scope_end IS NULL OR scope_end < $2)
    ORDER BY recv_at, id
    LIMIT $3
);
