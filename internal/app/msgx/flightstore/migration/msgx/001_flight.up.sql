-- msgx line, version 1: the flight domain's own tables in the service's
-- PostgreSQL (seed 000 §1.2, §7, §9.3, §11). Identifiers are the seed's
-- upper-case names written in lower case (PostgreSQL folds unquoted names, so
-- FLIGHT_SCHD in a query is flight_schd). Every timestamp is timestamptz,
-- written from a parameter (the processing clock), never from now(). An empty
-- string, a zero time and a nil *int are NULL.

-- FLIGHT_SCHD: one row per flight instance (FLID), its scalar fields, STATE,
-- STATE_VERSION and OPERATION_DAY (seed 000 §11.1). The collections live in
-- the detail tables below.
CREATE TABLE flight_schd (
    flid          text        NOT NULL,
    state         text        NOT NULL
        CONSTRAINT flight_schd_state_check CHECK (state IN ('ACTIVE', 'DELETED')),
    -- INV-13: 1 at creation, +1 per accepted change.
    state_version bigint      NOT NULL
        CONSTRAINT flight_schd_state_version_check CHECK (state_version > 0),
    -- YYYYMMDD; NULL until a SCHD/ADFT record with SODT fixes it (INV-12).
    operation_day text
        CONSTRAINT flight_schd_operation_day_check CHECK (operation_day ~ '^[0-9]{8}$'),
    last_msg_id   bigint      NOT NULL,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    -- FLOP-BASE
    flno          text,
    awcd          text,
    adid          text,
    flty          text,
    sodt          timestamptz,
    eodt          timestamptz,
    aodt          timestamptz,
    acty          text,
    acrg          text,
    term          text,
    -- FLOP-STAT
    stat          text,
    abst          text,
    abrs          text,
    -- FLOP-SHAR: MAID is the master's FLID on a shared flight (seed 000 §11.4).
    maid          text,
    csop          text,
    csft          text,
    CONSTRAINT flight_schd_pkey PRIMARY KEY (flid)
);

-- INV-17: children of a master by MAID (the MAFL projection, FLID ascending).
CREATE INDEX flight_schd_maid_idx ON flight_schd (maid, flid) WHERE maid IS NOT NULL;

-- Flight-history candidates and per-day scans.
CREATE INDEX flight_schd_operation_day_idx ON flight_schd (operation_day);

-- Guards of the current state, raised inside the writing statement so that a
-- bad save aborts even a batch outside an explicit transaction:
-- INV-12: a non-NULL OPERATION_DAY never changes (nor returns to NULL);
-- INV-13: STATE_VERSION never moves backwards (an equal version rewrites the
-- same state and is allowed).
CREATE FUNCTION flight_schd_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.operation_day IS NOT NULL AND NEW.operation_day IS DISTINCT FROM OLD.operation_day THEN
        RAISE EXCEPTION 'flight %: OPERATION_DAY % cannot change to % (INV-12)',
            NEW.flid, OLD.operation_day, coalesce(NEW.operation_day, 'NULL')
            USING ERRCODE = 'check_violation', CONSTRAINT = 'flight_schd_operation_day_immutable';
    END IF;
    IF NEW.state_version < OLD.state_version THEN
        RAISE EXCEPTION 'flight %: STATE_VERSION % cannot move back to % (INV-13)',
            NEW.flid, OLD.state_version, NEW.state_version
            USING ERRCODE = 'check_violation', CONSTRAINT = 'flight_schd_state_version_monotonic';
    END IF;
    RETURN NEW;
END
$$;

-- The WHEN clause keeps the common update (no violation) free of a function call.
CREATE TRIGGER flight_schd_guard BEFORE UPDATE ON flight_schd FOR EACH ROW
    WHEN ((OLD.operation_day IS NOT NULL AND NEW.operation_day IS DISTINCT FROM OLD.operation_day)
          OR NEW.state_version < OLD.state_version)
    EXECUTE FUNCTION flight_schd_guard();

-- Resource detail tables, one per kind and all of one shape (seed 000 §11.3):
-- ORDINAL is the persisted order from 1 (INV-14), SOURCE_SEQ the upstream SEQU
-- (NULL or repeated allowed); equal codes are distinct allocations.
CREATE TABLE flight_gate (
    flid            text        NOT NULL REFERENCES flight_schd (flid) ON DELETE CASCADE,
    ordinal         integer     NOT NULL CHECK (ordinal > 0),
    source_seq      bigint,
    code            text,
    begin_at        timestamptz,
    end_at          timestamptz,
    actual_begin_at timestamptz,
    actual_end_at   timestamptz,
    PRIMARY KEY (flid, ordinal)
);
CREATE TABLE flight_ckic (LIKE flight_gate INCLUDING ALL);
CREATE TABLE flight_belt (LIKE flight_gate INCLUDING ALL);
CREATE TABLE flight_stnd (LIKE flight_gate INCLUDING ALL);
CREATE TABLE flight_chut (LIKE flight_gate INCLUDING ALL);
CREATE TABLE flight_brdg (LIKE flight_gate INCLUDING ALL);
CREATE TABLE flight_chok (LIKE flight_gate INCLUDING ALL);
-- LIKE copies neither foreign keys nor their cascade: add them.
ALTER TABLE flight_ckic ADD FOREIGN KEY (flid) REFERENCES flight_schd (flid) ON DELETE CASCADE;
ALTER TABLE flight_belt ADD FOREIGN KEY (flid) REFERENCES flight_schd (flid) ON DELETE CASCADE;
ALTER TABLE flight_stnd ADD FOREIGN KEY (flid) REFERENCES flight_schd (flid) ON DELETE CASCADE;
ALTER TABLE flight_chut ADD FOREIGN KEY (flid) REFERENCES flight_schd (flid) ON DELETE CASCADE;
ALTER TABLE flight_brdg ADD FOREIGN KEY (flid) REFERENCES flight_schd (flid) ON DELETE CASCADE;
ALTER TABLE flight_chok ADD FOREIGN KEY (flid) REFERENCES flight_schd (flid) ON DELETE CASCADE;

-- FLIGHT_DELY: delays.
CREATE TABLE flight_dely (
    flid       text    NOT NULL REFERENCES flight_schd (flid) ON DELETE CASCADE,
    ordinal    integer NOT NULL CHECK (ordinal > 0),
    source_seq bigint,
    code       text,
    minutes    bigint,
    remark     text,
    PRIMARY KEY (flid, ordinal)
);

-- FLIGHT_SRVT and FLIGHT_VIPF: services and VIP services (G-SRVT-VIPF).
CREATE TABLE flight_srvt (
    flid       text    NOT NULL REFERENCES flight_schd (flid) ON DELETE CASCADE,
    ordinal    integer NOT NULL CHECK (ordinal > 0),
    source_seq bigint,
    code       text,
    quantity   bigint,
    remark     text,
    PRIMARY KEY (flid, ordinal)
);
CREATE TABLE flight_vipf (LIKE flight_srvt INCLUDING ALL);
ALTER TABLE flight_vipf ADD FOREIGN KEY (flid) REFERENCES flight_schd (flid) ON DELETE CASCADE;

-- FLIGHT_ROUTE_POINT: ROUT and ERUT, independent collections (seed 000 §11.3).
CREATE TABLE flight_route_point (
    flid       text    NOT NULL REFERENCES flight_schd (flid) ON DELETE CASCADE,
    route_kind text    NOT NULL CHECK (route_kind IN ('ROUT', 'ERUT')),
    ordinal    integer NOT NULL CHECK (ordinal > 0),
    source_seq bigint,
    airport    text,
    sched_arr  timestamptz,
    sched_dep  timestamptz,
    PRIMARY KEY (flid, route_kind, ordinal)
);

-- FLIGHT_SCHD_HST: archived full states (seed 000 §9.3, D1). A surrogate key:
-- a FLID archived, re-created by a late message and archived again keeps both
-- rows. Lives only in this database, never in the shared one.
CREATE TABLE flight_schd_hst (
    hst_id        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    flid          text        NOT NULL,
    state         text        NOT NULL,
    state_version bigint      NOT NULL,
    operation_day text,
    archived_at   timestamptz NOT NULL,
    doc           jsonb       NOT NULL
);
CREATE INDEX flight_schd_hst_flid_idx ON flight_schd_hst (flid);
-- G-FLIGHT-HIST-RETENTION.
CREATE INDEX flight_schd_hst_archived_at_idx ON flight_schd_hst (archived_at);

-- REF_MASTER: static reference data (seed 000 §7.2).
CREATE TABLE ref_master (
    rtype       text        NOT NULL,
    rkey        text        NOT NULL,
    rval        text,
    updated_at  timestamptz NOT NULL,
    last_msg_id bigint      NOT NULL,
    PRIMARY KEY (rtype, rkey)
);

-- REQ_TRACK: upstream requests and their responses (G-REQ-TRACK).
CREATE TABLE req_track (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    req_type   text        NOT NULL CHECK (req_type IN ('SCHD', 'REFD')),
    -- The operating day (YYYYMMDD) of a SCHD request, the reference type of a REFD one.
    scope      text        NOT NULL,
    sender     text        NOT NULL,
    -- Our outbound SEQN, echoed back as RQSQ.
    seqn       text        NOT NULL,
    state      text        NOT NULL CHECK (state IN ('PENDING', 'SENT', 'DONE', 'EXPIRED')),
    outbox_id  bigint,
    created_at timestamptz NOT NULL,
    sent_at    timestamptz,
    -- When it was closed (DONE or EXPIRED).
    done_at    timestamptz,
    -- PENDING has not been sent; SENT and DONE have (EXPIRED may be either).
    CONSTRAINT req_track_sent_check CHECK (
        (state <> 'PENDING' OR (sent_at IS NULL AND outbox_id IS NULL))
        AND (state NOT IN ('SENT', 'DONE') OR (sent_at IS NOT NULL AND outbox_id IS NOT NULL))),
    -- DONE and EXPIRED are closed, and only they.
    CONSTRAINT req_track_done_check CHECK ((state IN ('DONE', 'EXPIRED')) = (done_at IS NOT NULL))
);
-- Seed 000 §1.2: one open request per (type, scope, sender), open states only.
CREATE UNIQUE INDEX req_track_open_key ON req_track (req_type, scope, sender)
    WHERE state IN ('PENDING', 'SENT');
-- A response is matched by its echoed SEQN: never two rows with one SEQN per sender.
CREATE UNIQUE INDEX req_track_seqn_key ON req_track (sender, seqn);
CREATE INDEX req_track_pending_idx ON req_track (id) WHERE state = 'PENDING';
CREATE INDEX req_track_sent_idx ON req_track (sent_at) WHERE state = 'SENT';
-- G-REQ-TRACK-RETENTION.
CREATE INDEX req_track_closed_idx ON req_track (done_at) WHERE state IN ('DONE', 'EXPIRED');

-- SCHD_SNAP_LOG: append-only trace of each SCHD package (seed 000 §7.1, §9.3).
CREATE TABLE schd_snap_log (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    msg_id      bigint      NOT NULL,
    kind        text        NOT NULL,
    identity    text,
    records     integer     NOT NULL,
    applied     integer     NOT NULL,
    outcome     text        NOT NULL,
    scope_start text CHECK (scope_start ~ '^[0-9]{8}$'),
    scope_end   text CHECK (scope_end ~ '^[0-9]{8}$'),
    recv_at     timestamptz NOT NULL
);
-- Retention by (SCOPE_END, RECV_AT) (seed 000 §9.3).
CREATE INDEX schd_snap_log_retention_idx ON schd_snap_log (scope_end, recv_at);
