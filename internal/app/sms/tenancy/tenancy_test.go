package tenancy_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/rules"
	"github.com/relayhq/relay/internal/app/sms/tenancy"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaytype"
)

var start = time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)

type bundle struct {
	ctx   context.Context
	pool  *pgxpool.Pool
	clock *relayclock.Fake
}

// setup gives a fresh schema with the sms line applied (it fails when
// PostgreSQL is absent).
func setup(t *testing.T) *bundle {
	t.Helper()
	ctx := t.Context()
	d, err := relaypgx.Open(ctx, testdb.PGSchema(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	clock := relayclock.NewFake(start)
	_, err = relaymigrate.Up(ctx, d, clock, tenancy.MigrationLine())
	require.NoError(t, err)
	require.NoError(t, relaymigrate.Check(ctx, d, tenancy.MigrationLine()))
	return &bundle{ctx: ctx, pool: d.Pool(), clock: clock}
}

func secretRef(name string) string { return "file:/etc/relay/sms/" + name + ".secret" }

// dump returns every sms_ table's rows as text, in a stable order.
func dump(t *testing.T, b *bundle) map[string]string {
	t.Helper()
	rows, err := b.pool.Query(b.ctx, `SELECT table_name FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_name LIKE 'sms\_%' ORDER BY 1`)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Len(t, tables, 24) // 16 of 001_tenancy, 2 of 002_admit, 5 of 003_send, 1 of 004_rules_version
	out := map[string]string{}
	for _, tbl := range tables {
		if tbl == "sms_rules_version" {
			continue // a count of write statements (one that changes no row counts too), not data
		}
		var text string
		require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT coalesce(string_agg(t::text, E'\n' ORDER BY t::text), '') FROM `+
			pgx.Identifier{tbl}.Sanitize()+` t`).Scan(&text))
		out[tbl] = text
	}
	return out
}

// TestSeedIdempotentAndLoad seeds the demo fixture twice on the real
// PostgreSQL: the second run creates nothing and changes no row; the
// snapshot holds the fixture and plans a message end to end.
func TestSeedIdempotentAndLoad(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var kept []tenancy.AppCredentials
	res, err := tenancy.Seed(b.ctx, b.pool, tenancy.DemoFixture(secretRef), tenancy.SeedOpts{Clock: b.clock,
		NewApp: func(c tenancy.AppCredentials) error { kept = append(kept, c); return nil }})
	require.NoError(t, err)
	require.Equal(t, 3, res.Created["sms_carrier"])
	require.Equal(t, 40, res.Created["sms_number_segment"])
	require.Equal(t, 6, res.Created["sms_channel"])
	require.Equal(t, 2, res.Created["sms_enterprise"])
	require.Equal(t, 3, res.Created["sms_app"])
	require.Equal(t, 2, res.Created["sms_ledger"])
	require.Len(t, kept, 3)
	require.Equal(t, kept, res.NewApps)
	require.NotContains(t, kept[0].String(), string(kept[0].HMACSecret))
	require.Contains(t, kept[0].String(), "[redacted]")
	require.Zero(t, len(res.Kept))

	before := dump(t, b)
	b.clock.Advance(time.Hour)
	res2, err := tenancy.Seed(b.ctx, b.pool, tenancy.DemoFixture(secretRef), tenancy.SeedOpts{Clock: b.clock,
		NewApp: func(tenancy.AppCredentials) error { t.Fatal("no app is new on the second run"); return nil }})
	require.NoError(t, err)
	require.Zero(t, res2.TotalCreated(), "%v", res2.Created)
	require.Equal(t, res.Created, res2.Kept)
	require.Equal(t, before, dump(t, b), "the second run changed rows")

	// a positive price, the opening balances through the ledger
	var minPrice, balance int64
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT min(unit_li) FROM sms_price`).Scan(&minPrice))
	require.Equal(t, int64(45), minPrice)
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT sum(balance_li) FROM sms_account`).Scan(&balance))
	require.Equal(t, int64(700_000), balance)

	snap, err := tenancy.Load(b.ctx, b.pool, b.clock)
	require.NoError(t, err)
	require.Equal(t, b.clock.Now(), snap.TakenAt())
	d := snap.Data()
	require.Len(t, d.Carriers, 3)
	require.Len(t, d.Channels, 6)
	require.Len(t, d.Apps, 3)
	require.Len(t, d.Groups, 4)
	require.Len(t, d.Routes, 10)
	require.Len(t, d.Frequency, 5)
	require.Len(t, d.Blacklist, 3)
	for _, c := range d.Channels {
		require.True(t, strings.HasPrefix(c.SecretRef, "file:"), c.Name)
		require.Equal(t, rules.ConnDisconnected, c.ConnState)
	}

	otp := snap.AppByKey(kept[0].APIKey)
	require.NotNil(t, otp)
	require.Equal(t, "otp", otp.Name)
	id, secret, err := tenancy.AppSecret(b.ctx, b.pool, kept[0].APIKey)
	require.NoError(t, err)
	require.Equal(t, otp.ID, id)
	require.Equal(t, kept[0].HMACSecret, secret)
	_, _, err = tenancy.AppSecret(b.ctx, b.pool, "nope")
	require.ErrorIs(t, err, relaytype.ErrNotFound)

	req := rules.Request{AppID: otp.ID, Number: "+86 138 1234 5678", SignName: "云通科技", TemplateCode: "otp",
		Params: map[string]string{"code": "520131", "minutes": "5"}}
	p, err := snap.Check(req, b.clock.Now(), rules.RouteOpts{})
	require.NoError(t, err)
	require.Equal(t, "mobile", p.Carrier)
	require.Equal(t, tenancy.DemoPrice, p.Amount)
	require.Equal(t, []string{"cm-a", "cm-b"}, []string{p.Candidates[0].Channel, p.Candidates[1].Channel})
	require.Equal(t, "1069000101", p.Candidates[0].SrcID)
	// the gateway has reported no connection yet
	_, err = snap.Check(req, b.clock.Now(), rules.RouteOpts{RequireConnected: true})
	r, _ := rules.ReasonOf(err)
	require.Equal(t, rules.ReasonNoChannel, r)
	// the marketing signature is pinned to cm-b; elsewhere it is pending
	req.SignName = "云通商城"
	p, err = snap.Check(req, b.clock.Now(), rules.RouteOpts{})
	require.NoError(t, err)
	require.Len(t, p.Candidates, 1)
	require.Equal(t, "cm-b", p.Candidates[0].Channel)
	req.Number = "13012345678"
	_, err = snap.Check(req, b.clock.Now(), rules.RouteOpts{})
	r, _ = rules.ReasonOf(err)
	require.Equal(t, rules.ReasonNoChannel, r)
	// platform blacklist
	req.SignName, req.Number = "云通科技", "13800000000"
	_, err = snap.Check(req, b.clock.Now(), rules.RouteOpts{})
	r, _ = rules.ReasonOf(err)
	require.Equal(t, rules.ReasonBlacklisted, r)
}

// TestSchemaRefusesBadRows: the constraints a production system leans on.
func TestSchemaRefusesBadRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := tenancy.Seed(b.ctx, b.pool, tenancy.DemoFixture(secretRef), tenancy.SeedOpts{Clock: b.clock})
	require.NoError(t, err)
	for name, sql := range map[string]string{
		"zero price":             `UPDATE sms_price SET unit_li = 0`,
		"bad channel state":      `UPDATE sms_channel SET conn_state = 'up'`,
		"bad cmpp version":       `UPDATE sms_channel SET cmpp_version = '4.0'`,
		"a secret, not a ref":    `UPDATE sms_channel SET secret_ref = 'hunter2'`,
		"overdraft":              `UPDATE sms_account SET frozen_li = balance_li + 1`,
		"negative balance":       `UPDATE sms_account SET balance_li = -1, frozen_li = 0`,
		"bad number segment":     `INSERT INTO sms_number_segment VALUES ('12', 'mobile', now())`,
		"unknown carrier":        `INSERT INTO sms_number_segment VALUES ('1999', 'nope', now())`,
		"duplicate platform bl":  `INSERT INTO sms_blacklist (number, reason, created_at) VALUES ('13800000000', '', now())`,
		"bad blacklist number":   `INSERT INTO sms_blacklist (number, reason, created_at) VALUES ('+8613800000000', '', now())`,
		"route, foreign sig":     `INSERT INTO sms_route (enterprise_id, app_id, carrier, signature_id, group_id, priority, created_at, updated_at) SELECT e.id, a.id, 'mobile', s.id, 1, 9, now(), now() FROM sms_enterprise e JOIN sms_app a ON a.enterprise_id = e.id, sms_signature s WHERE e.name = 'yuntong' AND s.text = '蓝鲸物流' LIMIT 1`,
		"duplicate route":        `INSERT INTO sms_route (enterprise_id, app_id, carrier, signature_id, group_id, priority, created_at, updated_at) SELECT enterprise_id, app_id, carrier, signature_id, group_id, priority + 100, now(), now() FROM sms_route LIMIT 1`,
		"ledger update":          `UPDATE sms_ledger SET amount_li = 1`,
		"ledger delete":          `DELETE FROM sms_ledger`,
		"ledger truncate":        `TRUNCATE sms_ledger`,
		"signature with bracket": `UPDATE sms_signature SET text = '【云通】'`,
		"bad registration state": `UPDATE sms_signature_registration SET state = 'ok'`,
		"short hmac secret":      `UPDATE sms_app SET hmac_secret = '\x00'`,
	} {
		_, err := b.pool.Exec(b.ctx, sql)
		require.Error(t, err, name)
	}
}

// TestPostLedger walks an account through every kind of entry and the
// idempotency and refusal rules.
func TestPostLedger(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := tenancy.Seed(b.ctx, b.pool, tenancy.DemoFixture(secretRef), tenancy.SeedOpts{Clock: b.clock})
	require.NoError(t, err)
	var ent int64
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT id FROM sms_enterprise WHERE name = 'lanjing'`).Scan(&ent))
	acct, err := tenancy.AccountOf(b.ctx, b.pool, ent)
	require.NoError(t, err)

	post := func(kind tenancy.Kind, key string, amount rules.Money) (tenancy.Posted, error) {
		tx, err := b.pool.Begin(b.ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(b.ctx) }()
		p, err := tenancy.Post(b.ctx, tx, tenancy.Entry{AccountID: acct, Kind: kind, IdemKey: key, Amount: amount, At: b.clock.Now()})
		if err != nil {
			return p, err
		}
		return p, tx.Commit(b.ctx)
	}
	p, err := post(tenancy.KindFreeze, "freeze:m1", 90)
	require.NoError(t, err)
	require.True(t, p.Created)
	require.Equal(t, tenancy.Posted{ID: p.ID, Created: true, BalanceAfter: 200_000, FrozenAfter: 90}, p)
	again, err := post(tenancy.KindFreeze, "freeze:m1", 90)
	require.NoError(t, err)
	require.False(t, again.Created)
	require.Equal(t, p.ID, again.ID)
	_, err = post(tenancy.KindFreeze, "freeze:m1", 45)
	require.ErrorIs(t, err, tenancy.ErrKeyReused)

	p, err = post(tenancy.KindCharge, "charge:m1", 90)
	require.NoError(t, err)
	require.Equal(t, rules.Money(199_910), p.BalanceAfter)
	require.Equal(t, rules.Money(0), p.FrozenAfter)
	_, err = post(tenancy.KindRelease, "release:m2", 1)
	require.Error(t, err, "nothing frozen")
	p, err = post(tenancy.KindRefund, "refund:m1", 90)
	require.NoError(t, err)
	require.Equal(t, rules.Money(200_000), p.BalanceAfter)

	_, err = post(tenancy.KindFreeze, "freeze:big", 200_001)
	r, ok := rules.ReasonOf(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, rules.ReasonInsufficientBalance, r)
	_, err = post(tenancy.KindFreeze, "freeze:m3", 0)
	require.Error(t, err)
	_, err = post("gift", "gift:1", 5)
	require.Error(t, err)

	// the account equals the sums of its ledger
	var balance, frozen, sumBalance, sumFrozen int64
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT balance_li, frozen_li FROM sms_account WHERE id = $1`, acct).Scan(&balance, &frozen))
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT
		coalesce(sum(amount_li) FILTER (WHERE kind IN ('topup', 'refund')), 0) - coalesce(sum(amount_li) FILTER (WHERE kind = 'charge'), 0),
		coalesce(sum(amount_li) FILTER (WHERE kind = 'freeze'), 0) - coalesce(sum(amount_li) FILTER (WHERE kind IN ('release', 'charge')), 0)
		FROM sms_ledger WHERE account_id = $1`, acct).Scan(&sumBalance, &sumFrozen))
	require.Equal(t, balance, sumBalance)
	require.Equal(t, frozen, sumFrozen)
	_, err = tenancy.AccountOf(b.ctx, b.pool, 999_999)
	require.True(t, errors.Is(err, relaytype.ErrNotFound))
}

// TestSeedNewAppFailureRollsBack: a credential that could not be kept
// leaves no app behind, so no secret is ever lost.
func TestSeedNewAppFailureRollsBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := tenancy.Seed(b.ctx, b.pool, tenancy.DemoFixture(secretRef), tenancy.SeedOpts{Clock: b.clock,
		NewApp: func(tenancy.AppCredentials) error { return errors.New("disk full") }})
	require.ErrorContains(t, err, "disk full")
	var n int
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM sms_app`).Scan(&n))
	require.Zero(t, n)
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM sms_carrier`).Scan(&n))
	require.Zero(t, n, "one transaction")
}

// TestPostConcurrent: many transactions freezing from one account at once
// never overdraw it, and one key posted by several at once is one entry.
func TestPostConcurrent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := tenancy.Seed(b.ctx, b.pool, tenancy.DemoFixture(secretRef), tenancy.SeedOpts{Clock: b.clock})
	require.NoError(t, err)
	var ent int64
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT id FROM sms_enterprise WHERE name = 'lanjing'`).Scan(&ent))
	acct, err := tenancy.AccountOf(b.ctx, b.pool, ent)
	require.NoError(t, err)

	post := func(key string, amount rules.Money) (tenancy.Posted, error) {
		tx, err := b.pool.Begin(b.ctx)
		if err != nil {
			return tenancy.Posted{}, err
		}
		defer func() { _ = tx.Rollback(b.ctx) }()
		p, err := tenancy.Post(b.ctx, tx, tenancy.Entry{AccountID: acct, Kind: tenancy.KindFreeze, IdemKey: key, Amount: amount, At: b.clock.Now()})
		if err != nil {
			return p, err
		}
		return p, tx.Commit(b.ctx)
	}
	type outcome struct {
		p   tenancy.Posted
		err error
	}
	// 16 distinct freezes of 30 CNY against 200 CNY: exactly 6 fit
	results := make(chan outcome, 16)
	for i := range 16 {
		go func() {
			p, err := post("freeze:c"+strconv.Itoa(i), 30_000)
			results <- outcome{p, err}
		}()
	}
	ok, refused := 0, 0
	for range 16 {
		o := <-results
		if o.err == nil {
			ok++
			continue
		}
		r, isRefusal := rules.ReasonOf(o.err)
		require.True(t, isRefusal, "%v", o.err)
		require.Equal(t, rules.ReasonInsufficientBalance, r)
		refused++
	}
	require.Equal(t, 6, ok)
	require.Equal(t, 10, refused)

	// one key from 8 transactions at once: one entry, every caller sees it
	same := make(chan outcome, 8)
	for range 8 {
		go func() {
			p, err := post("freeze:same", 1_000)
			same <- outcome{p, err}
		}()
	}
	created, ids := 0, map[int64]bool{}
	for range 8 {
		o := <-same
		require.NoError(t, o.err)
		if o.p.Created {
			created++
		}
		ids[o.p.ID] = true
	}
	require.Equal(t, 1, created)
	require.Len(t, ids, 1)
	var frozen int64
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT frozen_li FROM sms_account WHERE id = $1`, acct).Scan(&frozen))
	require.Equal(t, int64(6*30_000+1_000), frozen)
}

// BenchmarkLoad measures one snapshot of the demo fixture: the per-batch
// cost a stage pays.
func BenchmarkLoad(bm *testing.B) {
	ctx := bm.Context()
	d, err := relaypgx.Open(ctx, testdb.PGSchema(bm))
	require.NoError(bm, err)
	bm.Cleanup(func() { _ = d.Close() })
	clock := relayclock.NewFake(start)
	_, err = relaymigrate.Up(ctx, d, clock, tenancy.MigrationLine())
	require.NoError(bm, err)
	_, err = tenancy.Seed(ctx, d.Pool(), tenancy.DemoFixture(secretRef), tenancy.SeedOpts{Clock: clock})
	require.NoError(bm, err)
	for bm.Loop() {
		if _, err := tenancy.Load(ctx, d.Pool(), clock); err != nil {
			bm.Fatal(err)
		}
	}
}

// TestPostMany: entries of one account posted in one call are decided in
// order as Post would decide them one after another — a freeze beyond what
// is left is refused alone, a key posted before (or earlier in the call)
// changes nothing, a reused key fails the call — and the account equals
// the ledger's sums afterwards.
func TestPostMany(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := tenancy.Seed(b.ctx, b.pool, tenancy.DemoFixture(secretRef), tenancy.SeedOpts{Clock: b.clock})
	require.NoError(t, err)
	var ent int64
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT id FROM sms_enterprise WHERE name = 'lanjing'`).Scan(&ent))
	acct, err := tenancy.AccountOf(b.ctx, b.pool, ent)
	require.NoError(t, err)
	freeze := func(key string, amount rules.Money) tenancy.Entry {
		return tenancy.Entry{AccountID: acct, Kind: tenancy.KindFreeze, IdemKey: key, Amount: amount, At: b.clock.Now()}
	}
	postMany := func(es ...tenancy.Entry) ([]tenancy.PostResult, error) {
		tx, err := b.pool.Begin(b.ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(b.ctx) }()
		res, err := tenancy.PostMany(b.ctx, tx, es)
		if err != nil {
			return nil, err
		}
		return res, tx.Commit(b.ctx)
	}
	first, err := postMany(freeze("f:1", 100_000))
	require.NoError(t, err)
	require.True(t, first[0].Created)

	res, err := postMany(freeze("f:2", 60_000), freeze("f:1", 100_000), freeze("f:3", 50_000), freeze("f:4", 40_000),
		freeze("f:2", 60_000))
	require.NoError(t, err)
	require.Len(t, res, 5)
	require.True(t, res[0].Created)
	require.Equal(t, rules.Money(160_000), res[0].FrozenAfter)
	require.False(t, res[1].Created, "posted by the first call")
	require.Equal(t, first[0].ID, res[1].ID)
	require.ErrorIs(t, res[2].Refused, rules.ErrRefused, "50 CNY of 40 left")
	r, _ := rules.ReasonOf(res[2].Refused)
	require.Equal(t, rules.ReasonInsufficientBalance, r)
	require.True(t, res[3].Created)
	require.Equal(t, rules.Money(200_000), res[3].FrozenAfter)
	require.False(t, res[4].Created, "repeated in the call")
	require.Equal(t, res[0].ID, res[4].ID)
	require.NotZero(t, res[0].ID)

	_, err = postMany(freeze("f:5", 1), freeze("f:4", 39_999))
	require.ErrorIs(t, err, tenancy.ErrKeyReused)

	var balance, frozen, sumFreeze, entries int64
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT balance_li, frozen_li FROM sms_account WHERE id = $1`, acct).Scan(&balance, &frozen))
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT coalesce(sum(amount_li), 0), count(*) FROM sms_ledger
		WHERE account_id = $1 AND kind = 'freeze'`, acct).Scan(&sumFreeze, &entries))
	require.Equal(t, int64(200_000), balance)
	require.Equal(t, sumFreeze, frozen)
	require.Equal(t, int64(3), entries)
	var lastFrozen int64
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT frozen_after_li FROM sms_ledger WHERE idem_key = 'f:4'`).Scan(&lastFrozen))
	require.Equal(t, int64(200_000), lastFrozen)
}

// TestRulesCache: the cache reads the rules once while nothing changes, and
// again after any statement that writes a rules table, so what it hands out
// is always the rules as committed.
func TestRulesCache(t *testing.T) {
	b := setup(t)
	_, err := tenancy.Seed(b.ctx, b.pool, tenancy.DemoFixture(secretRef), tenancy.SeedOpts{Clock: b.clock})
	require.NoError(t, err)
	c := tenancy.NewCache(b.pool, b.clock)
	first, err := c.Get(b.ctx)
	require.NoError(t, err)
	for range 5 {
		s, err := c.Get(b.ctx)
		require.NoError(t, err)
		require.Same(t, first, s)
	}
	require.EqualValues(t, 1, c.Loads())

	otp := first.AppByKey(appKey(t, b, "otp"))
	require.NotNil(t, otp)
	require.True(t, otp.Active)
	_, err = b.pool.Exec(b.ctx, `UPDATE sms_app SET state = 'suspended' WHERE id = $1`, otp.ID)
	require.NoError(t, err)
	s, err := c.Get(b.ctx)
	require.NoError(t, err)
	require.NotSame(t, first, s)
	require.False(t, s.App(otp.ID).Active, "the suspension is in the next snapshot")
	require.EqualValues(t, 2, c.Loads())

	// A change rolled back changes nothing: the same snapshot again.
	tx, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	_, err = tx.Exec(b.ctx, `DELETE FROM sms_blacklist`)
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(b.ctx))
	again, err := c.Get(b.ctx)
	require.NoError(t, err)
	require.Same(t, s, again)

	// Every rules table bumps the version.
	for _, tbl := range []string{"sms_carrier", "sms_number_segment", "sms_enterprise", "sms_app", "sms_channel",
		"sms_signature", "sms_signature_registration", "sms_template", "sms_blacklist", "sms_channel_group",
		"sms_channel_group_member", "sms_route", "sms_price", "sms_frequency_limit"} {
		var before, after int64
		require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT version FROM sms_rules_version`).Scan(&before))
		_, err := b.pool.Exec(b.ctx, `DELETE FROM `+tbl+` WHERE false`) // a statement that changes no row counts too
		require.NoError(t, err)
		require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT version FROM sms_rules_version`).Scan(&after))
		require.Equal(t, before+1, after, tbl)
	}
}

// appKey is the API key of the fixture's app name.
func appKey(t *testing.T, b *bundle, name string) string {
	t.Helper()
	var key string
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT api_key FROM sms_app WHERE name = $1`, name).Scan(&key))
	return key
}

// TestHotTablesLeaveRoomOnEachPage: the tables whose rows are updated soon
// after they are written without touching an indexed column keep a fifth of
// each page free, so those updates stay heap-only (no new index entries).
func TestHotTablesLeaveRoomOnEachPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rows, err := b.pool.Query(b.ctx, `SELECT c.relname, coalesce(array_to_string(c.reloptions, ','), '')
		FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
		AND c.relname IN ('sms_limit_counter', 'sms_message', 'sms_attempt', 'sms_submit') ORDER BY 1`)
	require.NoError(t, err)
	got := map[string]string{}
	for rows.Next() {
		var name, opts string
		require.NoError(t, rows.Scan(&name, &opts))
		got[name] = opts
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string]string{"sms_attempt": "fillfactor=80", "sms_limit_counter": "fillfactor=80",
		"sms_message": "fillfactor=80", "sms_submit": "fillfactor=80"}, got)
}
