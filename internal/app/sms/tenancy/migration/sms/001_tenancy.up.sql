-- The send chain's tenancy, rules and ledger skeleton (docs/sms/model.md).
--
-- Conventions: ids are bigint identities; natural keys carry a UNIQUE
-- constraint so a fixture or an operator can address rows idempotently;
-- states are text with a CHECK listing every allowed value; money is bigint
-- in li (厘, 0.001 CNY), never a float; every time is written by the caller
-- (created_at/updated_at have no default: code passes its clock's time).
-- Secrets: channel credentials are never stored, only a reference
-- (secret_ref); an app's HMAC secret is stored because the API must compute
-- the same HMAC, and the column says so.

CREATE TABLE sms_carrier (
    code       text PRIMARY KEY CHECK (code ~ '^[a-z][a-z0-9_]{1,15}$'),
    name       text        NOT NULL CHECK (name <> ''),
    created_at timestamptz NOT NULL
);

-- A number segment: the leading digits of an 11-digit mobile number, mapped
-- to the carrier that owns them. The lookup takes the longest matching
-- prefix, so a 4-digit prefix (a ported or virtual block) overrides its
-- 3-digit parent.
CREATE TABLE sms_number_segment (
    prefix     text PRIMARY KEY CHECK (prefix ~ '^1[3-9][0-9]{1,5}$'),
    carrier    text        NOT NULL REFERENCES sms_carrier (code),
    created_at timestamptz NOT NULL
);

CREATE TABLE sms_enterprise (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       text        NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    title      text        NOT NULL,
    state      text        NOT NULL CHECK (state IN ('active', 'suspended')),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

-- An app is an enterprise's API client. api_key identifies it (it is sent
-- with every request and is not secret); hmac_secret signs the requests.
CREATE TABLE sms_app (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    enterprise_id bigint      NOT NULL REFERENCES sms_enterprise (id),
    name          text        NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    api_key       text        NOT NULL UNIQUE CHECK (api_key ~ '^[A-Za-z0-9]{16,64}$'),
    hmac_secret   bytea       NOT NULL CHECK (octet_length(hmac_secret) >= 32),
    state         text        NOT NULL CHECK (state IN ('active', 'suspended')),
    -- Messages (not segments) the app may send per calendar day in China
    -- Standard Time; NULL: no limit.
    daily_limit   integer CHECK (daily_limit > 0),
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    UNIQUE (enterprise_id, name),
    UNIQUE (id, enterprise_id)
);
COMMENT ON COLUMN sms_app.hmac_secret IS
    'SECRET, stored in clear: the API recomputes request HMACs with it. Never selected by the rules snapshot, never logged; encrypt at rest (a KMS-wrapped key) before production.';

-- A supplier account: one CMPP login at a carrier gateway. secret_ref names
-- where the shared secret lives (file:/path); the secret itself is never
-- stored here.
CREATE TABLE sms_channel (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name          text        NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    supplier      text        NOT NULL CHECK (supplier <> ''),
    -- The carrier this account reaches; NULL: all three (a "three-network"
    -- account).
    carrier       text REFERENCES sms_carrier (code),
    address       text        NOT NULL CHECK (address ~ '^[^\s]+:[0-9]{1,5}$'),
    cmpp_version  text        NOT NULL CHECK (cmpp_version IN ('2.0', '3.0')),
    sp_id         text        NOT NULL CHECK (sp_id ~ '^[0-9]{6}$'),
    secret_ref    text        NOT NULL CHECK (secret_ref ~ '^file:.+'),
    src_id        text        NOT NULL CHECK (src_id ~ '^[0-9]{1,21}$'),
    service_id    text        NOT NULL DEFAULT '' CHECK (length(service_id) <= 10),
    connections   integer     NOT NULL CHECK (connections BETWEEN 1 AND 64),
    window_size   integer     NOT NULL CHECK (window_size BETWEEN 1 AND 1024),
    -- Submits per second over all connections; 0: unbounded.
    rate_limit    integer     NOT NULL CHECK (rate_limit >= 0),
    -- How the supplier reports a long message: one report per segment (all
    -- must succeed) or one for the whole message.
    receipt_mode  text        NOT NULL CHECK (receipt_mode IN ('per_segment', 'message_level')),
    active        boolean     NOT NULL,
    conn_state    text        NOT NULL CHECK (conn_state IN ('disconnected', 'connecting', 'connected')),
    conn_state_at timestamptz NOT NULL,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL
);

-- A signature (签名) belongs to an enterprise; text is what appears between
-- 【 and 】.
CREATE TABLE sms_signature (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    enterprise_id bigint      NOT NULL REFERENCES sms_enterprise (id),
    text          text        NOT NULL CHECK (char_length(text) BETWEEN 2 AND 20 AND text !~ '[【】\[\]\s]'),
    state         text        NOT NULL CHECK (state IN ('active', 'disabled')),
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    UNIQUE (enterprise_id, text),
    UNIQUE (id, enterprise_id)
);

-- A signature's registration (报备) with one channel. Only an approved
-- registration lets a channel carry the signature. ext_code is appended to
-- the channel's src_id for this signature (may be empty).
CREATE TABLE sms_signature_registration (
    signature_id bigint      NOT NULL REFERENCES sms_signature (id),
    channel_id   bigint      NOT NULL REFERENCES sms_channel (id),
    state        text        NOT NULL CHECK (state IN ('pending', 'approved', 'rejected')),
    ext_code     text        NOT NULL DEFAULT '' CHECK (ext_code ~ '^[0-9]{0,6}$'),
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    PRIMARY KEY (signature_id, channel_id)
);

-- A template (模板): body holds ${name} placeholders.
CREATE TABLE sms_template (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    enterprise_id bigint      NOT NULL REFERENCES sms_enterprise (id),
    code          text        NOT NULL CHECK (code ~ '^[A-Za-z0-9_-]{1,64}$'),
    kind          text        NOT NULL CHECK (kind IN ('verification', 'notification', 'marketing')),
    body          text        NOT NULL CHECK (char_length(body) BETWEEN 1 AND 500),
    state         text        NOT NULL CHECK (state IN ('pending', 'approved', 'rejected', 'disabled')),
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    UNIQUE (enterprise_id, code)
);

-- Blocked numbers: enterprise_id NULL is the platform-wide list.
CREATE TABLE sms_blacklist (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    enterprise_id bigint REFERENCES sms_enterprise (id),
    number        text        NOT NULL CHECK (number ~ '^1[3-9][0-9]{9}$'),
    reason        text        NOT NULL CHECK (length(reason) <= 200),
    created_at    timestamptz NOT NULL,
    UNIQUE NULLS NOT DISTINCT (enterprise_id, number)
);

CREATE TABLE sms_channel_group (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       text        NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

-- A group's channels: the lowest priority number is tried first; weight
-- shares the load among channels of one priority.
CREATE TABLE sms_channel_group_member (
    group_id   bigint      NOT NULL REFERENCES sms_channel_group (id),
    channel_id bigint      NOT NULL REFERENCES sms_channel (id),
    priority   integer     NOT NULL CHECK (priority BETWEEN 0 AND 1000),
    weight     integer     NOT NULL CHECK (weight BETWEEN 1 AND 1000),
    created_at timestamptz NOT NULL,
    PRIMARY KEY (group_id, channel_id)
);

-- A route: app × carrier × signature → channel group. signature_id NULL
-- matches any signature of the app's enterprise; a route naming the
-- signature wins over it. Among routes of one key, the lowest priority
-- number is tried first. enterprise_id ties the app and the signature to
-- one enterprise (an app can never route another tenant's signature).
CREATE TABLE sms_route (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    enterprise_id bigint      NOT NULL REFERENCES sms_enterprise (id),
    app_id        bigint      NOT NULL,
    carrier       text        NOT NULL REFERENCES sms_carrier (code),
    signature_id  bigint,
    group_id      bigint      NOT NULL REFERENCES sms_channel_group (id),
    priority      integer     NOT NULL CHECK (priority BETWEEN 0 AND 1000),
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    UNIQUE NULLS NOT DISTINCT (app_id, carrier, signature_id, priority),
    UNIQUE NULLS NOT DISTINCT (app_id, carrier, signature_id, group_id),
    FOREIGN KEY (app_id, enterprise_id) REFERENCES sms_app (id, enterprise_id),
    FOREIGN KEY (signature_id, enterprise_id) REFERENCES sms_signature (id, enterprise_id)
);

-- The price of one segment sent by an app to a carrier's number, in li.
-- Positive: a free send would hide the billing path (and its lock).
CREATE TABLE sms_price (
    app_id     bigint      NOT NULL REFERENCES sms_app (id),
    carrier    text        NOT NULL REFERENCES sms_carrier (code),
    unit_li    bigint      NOT NULL CHECK (unit_li > 0),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (app_id, carrier)
);

-- Per-number frequency limits of an app: at most max_count messages to one
-- number per window of window_seconds (fixed windows aligned in China
-- Standard Time; docs/sms/model.md).
CREATE TABLE sms_frequency_limit (
    app_id         bigint      NOT NULL REFERENCES sms_app (id),
    window_seconds integer     NOT NULL CHECK (window_seconds BETWEEN 1 AND 2678400),
    max_count      integer     NOT NULL CHECK (max_count BETWEEN 1 AND 1000000),
    created_at     timestamptz NOT NULL,
    PRIMARY KEY (app_id, window_seconds)
);

-- One account per enterprise. balance_li is the money held; frozen_li the
-- part of it reserved for messages in flight; available = balance - frozen.
-- No overdraft: the CHECK is the last line of defence behind the ledger code.
CREATE TABLE sms_account (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    enterprise_id bigint      NOT NULL UNIQUE REFERENCES sms_enterprise (id),
    currency      text        NOT NULL CHECK (currency = 'CNY'),
    balance_li    bigint      NOT NULL CHECK (balance_li >= 0),
    frozen_li     bigint      NOT NULL CHECK (frozen_li >= 0 AND frozen_li <= balance_li),
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL
);

-- The ledger: every change of an account, append-only. idem_key is the
-- business key of the change (freeze:<message>, charge:<message>, …): the
-- same change posted twice is one row. balance_after_li/frozen_after_li
-- record the account after the entry, so the account is the last entry and
-- the sums of the entries (docs/sms/model.md, "The ledger").
CREATE TABLE sms_ledger (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id       bigint      NOT NULL REFERENCES sms_account (id),
    kind             text        NOT NULL CHECK (kind IN ('topup', 'freeze', 'release', 'charge', 'refund')),
    idem_key         text        NOT NULL UNIQUE CHECK (char_length(idem_key) BETWEEN 1 AND 200),
    amount_li        bigint      NOT NULL CHECK (amount_li > 0),
    balance_after_li bigint      NOT NULL CHECK (balance_after_li >= 0),
    frozen_after_li  bigint      NOT NULL CHECK (frozen_after_li >= 0 AND frozen_after_li <= balance_after_li),
    note             text        NOT NULL DEFAULT '' CHECK (length(note) <= 200),
    created_at       timestamptz NOT NULL
);
CREATE INDEX sms_ledger_account ON sms_ledger (account_id, id);

CREATE FUNCTION sms_ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'sms_ledger is append-only (% refused)', TG_OP USING ERRCODE = 'restrict_violation';
END
$$;
CREATE TRIGGER sms_ledger_append_only BEFORE UPDATE OR DELETE ON sms_ledger
    FOR EACH ROW EXECUTE FUNCTION sms_ledger_append_only();
CREATE TRIGGER sms_ledger_no_truncate BEFORE TRUNCATE ON sms_ledger
    FOR EACH STATEMENT EXECUTE FUNCTION sms_ledger_append_only();
