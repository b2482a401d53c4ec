-- Queries of the send chain's tenancy tables (migration line "sms",
-- PostgreSQL only), parsed once at package init by sqlfile.MustParse
-- (store.go). Every time is a parameter; money is bigint li.

-- name: LoadCarriers
SELECT code, name FROM sms_carrier ORDER BY code;

-- name: LoadSegments
SELECT prefix, carrier FROM sms_number_segment ORDER BY prefix;

-- name: LoadEnterprises
SELECT id, name, state = 'active' FROM sms_enterprise ORDER BY id;

-- name: LoadApps
-- The HMAC secret is not read: a snapshot never holds a secret.
SELECT id, enterprise_id, name, api_key, state = 'active', coalesce(daily_limit, 0)
FROM sms_app ORDER BY id;

-- name: LoadChannels
SELECT id, name, supplier, coalesce(carrier, ''), address, cmpp_version, sp_id, secret_ref, src_id, service_id,
       connections, window_size, rate_limit, receipt_mode, active, conn_state
FROM sms_channel ORDER BY id;

-- name: LoadSignatures
SELECT id, enterprise_id, text, state = 'active' FROM sms_signature ORDER BY id;

-- name: LoadRegistrations
SELECT signature_id, channel_id, state, ext_code FROM sms_signature_registration ORDER BY signature_id, channel_id;

-- name: LoadTemplates
SELECT id, enterprise_id, code, kind, body, state FROM sms_template ORDER BY id;

-- name: LoadBlacklist
SELECT coalesce(enterprise_id, 0), number FROM sms_blacklist ORDER BY id;

-- name: LoadGroups
SELECT g.id, g.name, coalesce(m.channel_id, 0), coalesce(m.priority, 0), coalesce(m.weight, 0)
FROM sms_channel_group g LEFT JOIN sms_channel_group_member m ON m.group_id = g.id
ORDER BY g.id, m.priority, m.channel_id;

-- name: LoadRoutes
SELECT id, app_id, carrier, coalesce(signature_id, 0), group_id, priority FROM sms_route ORDER BY id;

-- name: LoadPrices
SELECT app_id, carrier, unit_li FROM sms_price ORDER BY app_id, carrier;

-- name: LoadFrequency
SELECT app_id, window_seconds, max_count FROM sms_frequency_limit ORDER BY app_id, window_seconds;

-- name: AppSecret
-- The API's one way to the HMAC secret of an active app, by its key.
SELECT a.id, a.hmac_secret
FROM sms_app a JOIN sms_enterprise e ON e.id = a.enterprise_id
WHERE a.api_key = $1 AND a.state = 'active' AND e.state = 'active';

-- name: AccountLock
-- Locks an account for a ledger entry; the lock is held to the end of the
-- caller's transaction, and always taken before the ledger row is looked at.
SELECT balance_li, frozen_li FROM sms_account WHERE id = $1 FOR UPDATE;

-- name: AccountOf
SELECT id FROM sms_account WHERE enterprise_id = $1;

-- name: LedgerByKey
SELECT id, account_id, kind, amount_li, balance_after_li, frozen_after_li FROM sms_ledger WHERE idem_key = $1;

-- name: LedgerByKeys
SELECT id, idem_key, account_id, kind, amount_li, balance_after_li, frozen_after_li FROM sms_ledger
WHERE idem_key = ANY($1::text[]);

-- name: LedgerInsertMany
-- PostMany's new entries of one account, in the order decided.
INSERT INTO sms_ledger (account_id, kind, idem_key, amount_li, balance_after_li, frozen_after_li, note, created_at)
SELECT $1, k, key, a, b, f, n, t
FROM unnest($2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[], $7::text[], $8::timestamptz[])
     AS v(k, key, a, b, f, n, t)
RETURNING id, idem_key;

-- name: LedgerInsert
INSERT INTO sms_ledger (account_id, kind, idem_key, amount_li, balance_after_li, frozen_after_li, note, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
RETURNING id;

-- name: AccountSet
UPDATE sms_account SET balance_li = $2, frozen_li = $3, updated_at = $4 WHERE id = $1;

-- name: SeedCarrier
WITH ins AS (
    INSERT INTO sms_carrier (code, name, created_at) VALUES ($1, $2, $3)
    ON CONFLICT (code) DO NOTHING RETURNING 1
)
SELECT count(*) > 0 FROM ins;

-- name: SeedSegment
WITH ins AS (
    INSERT INTO sms_number_segment (prefix, carrier, created_at) VALUES ($1, $2, $3)
    ON CONFLICT (prefix) DO NOTHING RETURNING 1
)
SELECT count(*) > 0 FROM ins;

-- name: SeedEnterprise
-- Inserts the enterprise if its name is new; returns its id and whether it
-- was created. An existing row is left as it is.
WITH ins AS (
    INSERT INTO sms_enterprise (name, title, state, created_at, updated_at) VALUES ($1, $2, 'active', $3, $3)
    ON CONFLICT (name) DO NOTHING RETURNING id
)
SELECT id, true FROM ins
UNION ALL
SELECT id, false FROM sms_enterprise WHERE name = $1 AND NOT EXISTS (SELECT 1 FROM ins);

-- name: SeedAccount
WITH ins AS (
    INSERT INTO sms_account (enterprise_id, currency, balance_li, frozen_li, created_at, updated_at)
    VALUES ($1, 'CNY', 0, 0, $2, $2)
    ON CONFLICT (enterprise_id) DO NOTHING RETURNING id
)
SELECT id, true FROM ins
UNION ALL
SELECT id, false FROM sms_account WHERE enterprise_id = $1 AND NOT EXISTS (SELECT 1 FROM ins);

-- name: SeedApp
WITH ins AS (
    INSERT INTO sms_app (enterprise_id, name, api_key, hmac_secret, state, daily_limit, created_at, updated_at)
    VALUES ($1, $2, $3, $4, 'active', nullif($5, 0), $6, $6)
    ON CONFLICT (enterprise_id, name) DO NOTHING RETURNING id
)
SELECT id, true FROM ins
UNION ALL
SELECT id, false FROM sms_app WHERE enterprise_id = $1 AND name = $2 AND NOT EXISTS (SELECT 1 FROM ins);

-- name: SeedChannel
WITH ins AS (
    INSERT INTO sms_channel (name, supplier, carrier, address, cmpp_version, sp_id, secret_ref, src_id, service_id,
                             connections, window_size, rate_limit, receipt_mode, active, conn_state, conn_state_at,
                             created_at, updated_at)
    VALUES ($1, $2, nullif($3, ''), $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, true, 'disconnected', $14, $14, $14)
    ON CONFLICT (name) DO NOTHING RETURNING id
)
SELECT id, true FROM ins
UNION ALL
SELECT id, false FROM sms_channel WHERE name = $1 AND NOT EXISTS (SELECT 1 FROM ins);

-- name: SeedSignature
WITH ins AS (
    INSERT INTO sms_signature (enterprise_id, text, state, created_at, updated_at) VALUES ($1, $2, 'active', $3, $3)
    ON CONFLICT (enterprise_id, text) DO NOTHING RETURNING id
)
SELECT id, true FROM ins
UNION ALL
SELECT id, false FROM sms_signature WHERE enterprise_id = $1 AND text = $2 AND NOT EXISTS (SELECT 1 FROM ins);

-- name: SeedRegistration
WITH ins AS (
    INSERT INTO sms_signature_registration (signature_id, channel_id, state, ext_code, created_at, updated_at)
    VALUES ($1, $2, $3, $4, $5, $5)
    ON CONFLICT (signature_id, channel_id) DO NOTHING RETURNING 1
)
SELECT count(*) > 0 FROM ins;

-- name: SeedTemplate
WITH ins AS (
    INSERT INTO sms_template (enterprise_id, code, kind, body, state, created_at, updated_at)
    VALUES ($1, $2, $3, $4, $5, $6, $6)
    ON CONFLICT (enterprise_id, code) DO NOTHING RETURNING 1
)
SELECT count(*) > 0 FROM ins;

-- name: SeedBlacklist
-- $1 0: the platform-wide list.
WITH ins AS (
    INSERT INTO sms_blacklist (enterprise_id, number, reason, created_at) VALUES (nullif($1::bigint, 0), $2, $3, $4)
    ON CONFLICT DO NOTHING RETURNING 1
)
SELECT count(*) > 0 FROM ins;

-- name: SeedGroup
WITH ins AS (
    INSERT INTO sms_channel_group (name, created_at, updated_at) VALUES ($1, $2, $2)
    ON CONFLICT (name) DO NOTHING RETURNING id
)
SELECT id, true FROM ins
UNION ALL
SELECT id, false FROM sms_channel_group WHERE name = $1 AND NOT EXISTS (SELECT 1 FROM ins);

-- name: SeedMember
WITH ins AS (
    INSERT INTO sms_channel_group_member (group_id, channel_id, priority, weight, created_at) VALUES ($1, $2, $3, $4, $5)
    ON CONFLICT (group_id, channel_id) DO NOTHING RETURNING 1
)
SELECT count(*) > 0 FROM ins;

-- name: SeedRoute
-- $4 0: any signature.
WITH ins AS (
    INSERT INTO sms_route (enterprise_id, app_id, carrier, signature_id, group_id, priority, created_at, updated_at)
    VALUES ($1, $2, $3, nullif($4::bigint, 0), $5, $6, $7, $7)
    ON CONFLICT DO NOTHING RETURNING 1
)
SELECT count(*) > 0 FROM ins;

-- name: SeedPrice
WITH ins AS (
    INSERT INTO sms_price (app_id, carrier, unit_li, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)
    ON CONFLICT (app_id, carrier) DO NOTHING RETURNING 1
)
SELECT count(*) > 0 FROM ins;

-- name: SeedFrequency
WITH ins AS (
    INSERT INTO sms_frequency_limit (app_id, window_seconds, max_count, created_at) VALUES ($1, $2, $3, $4)
    ON CONFLICT (app_id, window_seconds) DO NOTHING RETURNING 1
)
SELECT count(*) > 0 FROM ins;

-- name: Balances
SELECT e.name, a.balance_li, a.frozen_li
FROM sms_account a JOIN sms_enterprise e ON e.id = a.enterprise_id
ORDER BY e.name;

-- name: RulesVersion
-- The count of committed changes to the rules tables (migration 004).
SELECT version FROM sms_rules_version WHERE id = 1;
