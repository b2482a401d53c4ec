package reconcile_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/gateway"
	"github.com/relayhq/relay/internal/app/sms/reconcile"
	"github.com/relayhq/relay/internal/app/sms/rules"
	"github.com/relayhq/relay/internal/app/sms/tenancy"
	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaymigrate"
)

var start = time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC)

// workTable is the completion work table as the relay_work migration line
// defines it (the columns reconcile reads); that line is not on this branch
// yet, so the fixture creates it.
const workTable = `CREATE TABLE relay_work (
    queue text NOT NULL, key text NOT NULL,
    revision bigint NOT NULL DEFAULT 0, processed_revision bigint NOT NULL DEFAULT 0,
    state text NOT NULL CHECK (state IN ('pending', 'processing', 'retry_wait', 'idle', 'needs_review')),
    created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL,
    PRIMARY KEY (queue, key))`

type bundle struct {
	t       *testing.T
	ctx     context.Context
	pool    *pgxpool.Pool
	rdb     *redis.Client
	app     string // application_name of the fixture's sessions
	record  string
	streams []string
	appID   int64
	account int64
	nextID  int64
	submits []int64 // accepted submitIds, in the record once each
}

// setup builds a small consistent, drained send chain in a fresh schema:
// the demo tenancy, four messages (completed with a delivered and a failed
// recipient; completed after a retry, three segments; completed unknown then
// refunded; refused), their attempts, submits settled ACCEPTED by the
// gateway and recorded once by the supplier, the ledger entries the
// completion would post, sent outbox events, idle work records, one matched
// parked report and three streams whose groups read and acknowledged all.
func setup(t *testing.T) *bundle {
	t.Helper()
	ctx := t.Context()
	var rb [6]byte
	_, _ = rand.Read(rb[:])
	app := "reconcile_t_" + hex.EncodeToString(rb[:])
	url, err := dsn.WithParam(testdb.PGSchema(t), "application_name", app)
	require.NoError(t, err)
	d := testdb.PGDriverAt(t, url)
	clock := relayclock.NewFake(start)
	_, err = relaymigrate.Up(ctx, d, clock, tenancy.MigrationLine(), gateway.MigrationLine())
	require.NoError(t, err)
	f := tenancy.DemoFixture(func(name string) string { return "file:/etc/relay/sms/" + name + ".secret" })
	_, err = tenancy.Seed(ctx, d.Pool(), f, tenancy.SeedOpts{Clock: clock})
	require.NoError(t, err)

	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", DisableIdentity: true})
	t.Cleanup(func() { _ = rdb.Close() })
	require.NoError(t, rdb.Ping(ctx).Err(), "Redis at 127.0.0.1:6379 must be running")

	b := &bundle{t: t, ctx: ctx, pool: d.Pool(), rdb: rdb, app: app, record: filepath.Join(t.TempDir(), "supplier.record"),
		nextID: 1000}
	pfx := "test:reconcile:" + hex.EncodeToString(rb[:]) + ":"
	b.streams = []string{pfx + "submit", pfx + "result", pfx + "report"}
	t.Cleanup(func() { _ = rdb.Del(context.Background(), b.streams...).Err() })
	b.exec(workTable)
	b.scan(`SELECT a.id FROM sms_app a JOIN sms_enterprise e ON e.id = a.enterprise_id WHERE e.name = 'yuntong' AND a.name = 'otp'`, &b.appID)
	b.scan(`SELECT a.id FROM sms_account a JOIN sms_enterprise e ON e.id = a.enterprise_id WHERE e.name = 'yuntong'`, &b.account)

	// 1: two recipients, one delivered (charged), one failed (released).
	m1 := b.message("completed", []string{"delivered", "failed"}, 1)
	b.attempt(m1, 0, 1, 0, "delivered", 1)
	b.attempt(m1, 1, 1, 0, "failed", 1)
	b.post(tenancy.KindFreeze, fmt.Sprintf("freeze:%d", m1), 90)
	b.post(tenancy.KindCharge, fmt.Sprintf("charge:%d:0", m1), 45)
	b.post(tenancy.KindRelease, fmt.Sprintf("release:%d:1", m1), 45)
	// 2: three segments, the first attempt failed, the retry delivered.
	m2 := b.message("completed", []string{"delivered"}, 3)
	a := b.attempt(m2, 0, 1, 0, "failed", 3)
	b.attempt(m2, 0, 2, a, "delivered", 3)
	b.post(tenancy.KindFreeze, fmt.Sprintf("freeze:%d", m2), 135)
	b.post(tenancy.KindCharge, fmt.Sprintf("charge:%d:0", m2), 135)
	// 3: charged as unknown, then reported failed and refunded.
	m3 := b.message("completed", []string{"unknown"}, 1)
	b.attempt(m3, 0, 1, 0, "unknown", 1)
	b.post(tenancy.KindFreeze, fmt.Sprintf("freeze:%d", m3), 45)
	b.post(tenancy.KindCharge, fmt.Sprintf("charge:%d:0", m3), 45)
	b.post(tenancy.KindRefund, fmt.Sprintf("refund:%d:0", m3), 45)
	// 4: refused by the rules: nothing attempted or frozen.
	b.message("refused", nil, 0)

	b.exec(`INSERT INTO relay_outbox (event_id, target, key, seq, event_type, state, created_at, sent_at, updated_at)
		VALUES ('s1', 'sms-submit', 'cm-a', 1, 'UPSERT', 'SENT', $1, $1, $1), ('n1', 'sms-webhook', 'k', 1, 'UPSERT', 'SENT', $1, $1, $1)`, start)
	b.exec(`INSERT INTO relay_work (queue, key, revision, processed_revision, state, created_at, updated_at)
		SELECT 'sms-completion', 'attempt:' || id, 2, 2, 'idle', $1, $1 FROM sms_attempt`, start)
	b.exec(`INSERT INTO sms_report_parked (event_key, channel, msg_id, stat, received_at, matched_at, attempt_id)
		SELECT 'report:cm-a:1:DELIVRD', 'cm-a', '1', 'DELIVRD', $1, $1, min(id) FROM sms_attempt`, start)
	var recs []map[string]any
	for _, id := range b.submits {
		recs = append(recs, map[string]any{"k": "submit", "boot": 1, "key": fmt.Sprint(id), "pk_total": 1, "pk_number": 1})
	}
	b.writeRecord(b.record, recs...)
	for _, s := range b.streams {
		require.NoError(t, rdb.XGroupCreateMkStream(ctx, s, "g", "0").Err())
		require.NoError(t, rdb.XAdd(ctx, &redis.XAddArgs{Stream: s, Values: map[string]any{"f": "v"}}).Err())
		msgs, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "c", Streams: []string{s, ">"}, Count: 10}).Result()
		require.NoError(t, err)
		require.NoError(t, rdb.XAck(ctx, s, "g", msgs[0].Messages[0].ID).Err())
	}
	return b
}

func (b *bundle) exec(sql string, args ...any) {
	b.t.Helper()
	_, err := b.pool.Exec(b.ctx, sql, args...)
	require.NoError(b.t, err, sql)
}

func (b *bundle) scan(sql string, dst ...any) {
	b.t.Helper()
	require.NoError(b.t, b.pool.QueryRow(b.ctx, sql).Scan(dst...), sql)
}

// message inserts an sms_message (and its engine message) in state with
// one number per outcome (mobile numbers, 45 li per segment).
func (b *bundle) message(state string, outcomes []string, segments int) int64 {
	b.t.Helper()
	b.nextID++
	id := b.nextID
	b.exec(`INSERT INTO relay_message (queue, id, state, identity_key, enqueued_at, updated_at)
		VALUES ('sms-admit', $1, 'SUCCEEDED', 'sms:' || $1::bigint, $2, $2)`, id, start)
	if state == "refused" {
		b.exec(`INSERT INTO sms_message (id, app_id, client_msg_id, numbers, sign_name, template_code, params, content,
			state, reason, accepted_at, decided_at) VALUES ($1, $2, 'c-' || $1::bigint, '{13812340000}', '云通科技', 'otp', '{}', '',
			'refused', 'blacklisted', $3, $3)`, id, b.appID, start)
		return id
	}
	n := len(outcomes)
	numbers, carriers, units := make([]string, n), make([]string, n), make([]int64, n)
	for i := range n {
		numbers[i], carriers[i], units[i] = fmt.Sprintf("1381234%04d", int(id)*10+i), "mobile", 45
	}
	b.exec(`INSERT INTO sms_message (id, app_id, client_msg_id, numbers, sign_name, template_code, params, content,
		carriers, segments, unit_li, amount_li, state, accepted_at, decided_at, outcomes, completed_at)
		VALUES ($1, $2, 'c-' || $1::bigint, $3, '云通科技', 'otp', '{}', '【云通科技】x', $4, $5, $6, $7, 'completed', $8, $8, $9, $8)`,
		id, b.appID, numbers, carriers, segments, units, int64(45*segments*n), start, outcomes)
	return id
}

// attempt inserts an attempt with one submit per segment, each settled
// ACCEPTED by the gateway; it returns the attempt id.
func (b *bundle) attempt(msg int64, recipient, no int, retryOf int64, state string, segments int) int64 {
	b.t.Helper()
	var id int64
	var retry any
	if retryOf != 0 {
		retry = retryOf
	}
	require.NoError(b.t, b.pool.QueryRow(b.ctx, `INSERT INTO sms_attempt (message_id, recipient, attempt_no, retry_of, channel_id,
		receipt_mode, segments, state, created_at, decided_at)
		VALUES ($1, $2, $3, $4, (SELECT id FROM sms_channel WHERE name = 'cm-a'), 'per_segment', $5, $6, $7, $7) RETURNING id`,
		msg, recipient, no, retry, segments, state, start).Scan(&id))
	for pk := 1; pk <= segments; pk++ {
		sid := id*256 + int64(pk)
		b.exec(`INSERT INTO sms_submit (submit_id, attempt_id, channel_id, pk_number, registered, result)
			VALUES ($1, $2, (SELECT id FROM sms_channel WHERE name = 'cm-a'), $3, true, 'ACCEPTED')`, sid, id, pk)
		b.exec(`INSERT INTO gateway_submit (submit_id, channel, state, msg_id, claimed_by, claimed_at, settled_at)
			VALUES ($1, 'cm-a', 'ACCEPTED', $1, 'gw', $2, $2)`, sid, start)
		b.submits = append(b.submits, sid)
	}
	return id
}

// post posts a ledger entry with the tenancy code (the account row follows).
func (b *bundle) post(kind tenancy.Kind, key string, amount int64) {
	b.t.Helper()
	require.NoError(b.t, pgx.BeginFunc(b.ctx, b.pool, func(tx pgx.Tx) error {
		_, err := tenancy.Post(b.ctx, tx, tenancy.Entry{AccountID: b.account, Kind: kind, IdemKey: key,
			Amount: rules.Money(amount), At: start})
		return err
	}))
}

func (b *bundle) writeRecord(path string, lines ...map[string]any) {
	b.t.Helper()
	var buf bytes.Buffer
	buf.WriteString(`{"k":"boot","boot":1,"at":"2026-12-02T02:00:00Z"}` + "\n")
	for _, l := range lines {
		j, err := json.Marshal(l)
		require.NoError(b.t, err)
		buf.Write(append(j, '\n'))
	}
	require.NoError(b.t, os.WriteFile(path, buf.Bytes(), 0o644))
}

func (b *bundle) opts() reconcile.Options {
	return reconcile.Options{SupplierRecords: []string{b.record}, Redis: b.rdb, Streams: b.streams,
		ApplicationName: b.app, Strict: true}
}

func (b *bundle) run(opts reconcile.Options) *reconcile.Report {
	b.t.Helper()
	rep, err := reconcile.Run(b.ctx, b.pool, opts)
	require.NoError(b.t, err)
	var out bytes.Buffer
	require.NoError(b.t, rep.Write(&out))
	b.t.Log("\n" + out.String())
	return rep
}

// failsOnly runs reconcile and requires exactly check name to fail, with a
// failure line containing want.
func (b *bundle) failsOnly(name, want string) *reconcile.Report {
	b.t.Helper()
	return b.failsWith(b.opts(), name, want)
}

// failsWith is failsOnly with opts.
func (b *bundle) failsWith(opts reconcile.Options, name, want string) *reconcile.Report {
	b.t.Helper()
	rep := b.run(opts)
	require.False(b.t, rep.OK())
	require.Equal(b.t, []string{name}, rep.Failed())
	require.Contains(b.t, strings.Join(rep.Check(name).Failures, "\n"), want)
	return rep
}

func TestConsistent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rep := b.run(b.opts())
	require.True(t, rep.OK(), rep.Failed())
	require.Len(t, rep.Checks, 6)
	for _, c := range rep.Checks {
		require.Equal(t, reconcile.Pass, c.Result, c.Name)
	}
	fig := func(name string) string { return strings.Join(rep.Check(name).Figures, "\n") }
	require.Contains(t, fig(reconcile.CheckLost), "messages: 4 (completed 3, refused 1)")
	require.Contains(t, fig(reconcile.CheckSubmits), "supplier records: 1 files, 9 accepted submits, 9 distinct submitIds, 0 accepted more than once")
	require.Contains(t, fig(reconcile.CheckSubmits), "retries: 1; badly linked: 0")
	require.Contains(t, fig(reconcile.CheckLedger), "freezes 270, charges 225, releases 45, refunds 45")
	require.Contains(t, fig(reconcile.CheckDrained), "completion work sms-completion: 5 records (idle 5")

	// Without Redis and records, those parts say they were not checked.
	rep = b.run(reconcile.Options{ApplicationName: b.app})
	require.True(t, rep.OK())
	require.Contains(t, strings.Join(rep.Check(reconcile.CheckDrained).Figures, "\n"), "not checked: Redis streams")
	require.Contains(t, strings.Join(rep.Check(reconcile.CheckSubmits).Figures, "\n"), "not checked: supplier-side counts")
}

func TestLostMessage(t *testing.T) {
	t.Parallel()
	t.Run("engine message without a row", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.exec(`INSERT INTO relay_message (queue, id, state, enqueued_at, updated_at) VALUES ('sms-admit', 99, 'SUCCEEDED', $1, $1)`, start)
		b.failsOnly(reconcile.CheckLost, "1 engine messages of sms-admit have no sms_message row (e.g. 99)")
	})
	t.Run("admitted and never completed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.exec(`INSERT INTO relay_message (queue, id, state, enqueued_at, updated_at) VALUES ('sms-admit', 99, 'SUCCEEDED', $1, $1)`, start)
		b.exec(`INSERT INTO sms_message (id, app_id, client_msg_id, numbers, sign_name, template_code, params, content,
			carriers, segments, unit_li, amount_li, state, accepted_at, decided_at)
			VALUES (99, $1, 'lost', '{13812349999}', '云通科技', 'otp', '{}', 'x', '{mobile}', 1, '{45}', 45, 'admitted', $2, $2)`, b.appID, start)
		b.post(tenancy.KindFreeze, "freeze:99", 45)
		rep := b.failsOnly(reconcile.CheckLost, "1 messages not refused or completed (accepted 0, admitted 1) (e.g. 99)")
		require.Contains(t, strings.Join(rep.Check(reconcile.CheckLost).Failures, "\n"), "1 recipients have no attempt 1")
		require.Contains(t, strings.Join(rep.Check(reconcile.CheckLedger).Figures, "\n"), "frozen for messages in flight 45")

		// Allowed in flight, the unfinished message is no failure, but the
		// missing attempt still is.
		opts := b.opts()
		opts.InFlight = true
		rep = b.run(opts)
		require.Contains(t, strings.Join(rep.Check(reconcile.CheckLost).Figures, "\n"), "in flight: 1 messages not refused or completed")
		require.Equal(t, []string{"1 recipients have no attempt 1 or more than one (e.g. 99)"}, rep.Check(reconcile.CheckLost).Failures)
	})
}

func TestDuplicateClientID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(`ALTER TABLE sms_message DROP CONSTRAINT sms_message_app_id_client_msg_id_key`)
	b.exec(`INSERT INTO relay_message (queue, id, state, enqueued_at, updated_at) VALUES ('sms-admit', 99, 'SUCCEEDED', $1, $1)`, start)
	b.exec(`INSERT INTO sms_message (id, app_id, client_msg_id, numbers, sign_name, template_code, params, content,
		state, reason, accepted_at, decided_at)
		SELECT 99, app_id, client_msg_id, numbers, sign_name, template_code, params, content, state, reason, accepted_at, decided_at
		FROM sms_message WHERE state = 'refused'`)
	b.failsOnly(reconcile.CheckUnique, "1 (app, client_msg_id) pairs appear more than once (e.g. 99)")
}

func TestSupplierDuplicate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A second simulator's record holds a submitId the first accepted too.
	second := filepath.Join(t.TempDir(), "second.record")
	b.writeRecord(second, map[string]any{"k": "submit", "boot": 1, "key": fmt.Sprint(b.submits[0]), "pk_total": 1, "pk_number": 1})
	opts := b.opts()
	opts.SupplierRecords = append(opts.SupplierRecords, second)
	rep := b.run(opts)
	require.Equal(t, []string{reconcile.CheckSubmits}, rep.Failed())
	require.Equal(t, []string{fmt.Sprintf("1 submitIds were accepted by a supplier more than once (submitIds) (e.g. %d)", b.submits[0])},
		rep.Check(reconcile.CheckSubmits).Failures)

	// An ACCEPTED submit the supplier never recorded.
	b.writeRecord(b.record)
	rep = b.run(b.opts())
	require.Equal(t, []string{reconcile.CheckSubmits}, rep.Failed())
	require.Contains(t, rep.Check(reconcile.CheckSubmits).Failures[0], "9 submits settled ACCEPTED by the gateway are in no supplier record")
}

func TestRetryWithoutLink(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(`ALTER TABLE sms_attempt DROP CONSTRAINT sms_attempt_check`)
	b.exec(`UPDATE sms_attempt SET retry_of = NULL WHERE attempt_no = 2`)
	b.failsOnly(reconcile.CheckSubmits, "1 attempts are not linked to a failed attempt")
}

func TestPendingOutbox(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(`INSERT INTO relay_outbox (event_id, target, key, seq, event_type, created_at, updated_at)
		VALUES ('n2', 'sms-webhook', 'k', 2, 'UPSERT', $1, $1)`, start)
	b.failsOnly(reconcile.CheckDrained, "1 outbox events of sms-webhook not sent")

	opts := b.opts()
	opts.InFlight = true
	rep := b.run(opts)
	require.True(t, rep.OK())
	require.Equal(t, reconcile.InFlight, rep.Check(reconcile.CheckDrained).Result)
}

func TestNotDrained(t *testing.T) {
	t.Parallel()
	t.Run("needs review", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.exec(`UPDATE relay_work SET state = 'needs_review' WHERE key = (SELECT min(key) FROM relay_work)`)
		b.failsOnly(reconcile.CheckDrained, "1 completion work records need review")
	})
	t.Run("stream pending", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		s := b.streams[1]
		require.NoError(t, b.rdb.XAdd(b.ctx, &redis.XAddArgs{Stream: s, Values: map[string]any{"f": "v"}}).Err())
		b.failsOnly(reconcile.CheckDrained, "group g: 1 entries not yet read")
		require.NoError(t, b.rdb.XReadGroup(b.ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "c", Streams: []string{s, ">"}}).Err())
		b.failsOnly(reconcile.CheckDrained, "group g: 1 entries delivered and not acknowledged")
	})
	t.Run("parked report", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.exec(`INSERT INTO sms_report_parked (event_key, channel, msg_id, stat, received_at) VALUES ('r2', 'cm-a', '2', 'DELIVRD', $1)`, start)
		b.failsOnly(reconcile.CheckDrained, "1 status reports parked and never matched")
		opts := b.opts()
		opts.Strict = false
		require.True(t, b.run(opts).OK())
	})
}

func TestDoubleCharge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// The key's unique constraint dropped, a charge written twice by hand.
	b.exec(`ALTER TABLE sms_ledger DROP CONSTRAINT sms_ledger_idem_key_key`)
	b.exec(`INSERT INTO sms_ledger (account_id, kind, idem_key, amount_li, balance_after_li, frozen_after_li, created_at)
		SELECT account_id, kind, idem_key, amount_li, 0, 0, created_at FROM sms_ledger WHERE idem_key = 'charge:1001:0'`)
	rep := b.failsOnly(reconcile.CheckLedger, "1 ledger keys appear more than once (e.g. charge:1001:0)")
	f := strings.Join(rep.Check(reconcile.CheckLedger).Failures, "\n")
	require.Contains(t, f, "1 completed messages: a recipient not settled exactly once")
	require.Contains(t, f, "freezes ≠ charges + releases")
}

func TestLedgerIdentity(t *testing.T) {
	t.Parallel()
	t.Run("refund without charge", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.post(tenancy.KindRefund, "refund:1001:1", 45)
		rep := b.failsOnly(reconcile.CheckLedger, "1 refunds have no charge of the same account and amount (e.g. refund:1001:1)")
		// The refunded recipient was released, not charged: its message is
		// settled wrongly too.
		require.Contains(t, strings.Join(rep.Check(reconcile.CheckLedger).Failures, "\n"), "1 completed messages: a recipient not settled")
	})
	t.Run("charge of a recipient the message does not have", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A freeze of the refused message, "settled" by a charge of a
		// recipient message 1001 does not have.
		b.post(tenancy.KindFreeze, "freeze:1004", 45)
		b.post(tenancy.KindCharge, "charge:1001:7", 45)
		rep := b.failsOnly(reconcile.CheckLedger, "1 freeze or settlement entries name no existing message and recipient")
		f := strings.Join(rep.Check(reconcile.CheckLedger).Failures, "\n")
		require.NotContains(t, f, "freezes ≠", "the stray charge settles the stray freeze: the sums still agree")
	})
	t.Run("account row off its ledger", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.exec(`UPDATE sms_account SET frozen_li = frozen_li + 1 WHERE id = $1`, b.account)
		b.failsOnly(reconcile.CheckLedger, "frozen_li ≠ freezes − releases − charges")
	})
}

func TestHealth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// One of the fixture's sessions holds a row lock, another waits for it.
	holder, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	defer holder.Rollback(context.Background())
	_, err = holder.Exec(b.ctx, `SELECT 1 FROM sms_account WHERE id = $1 FOR UPDATE`, b.account)
	require.NoError(t, err)
	waiter := make(chan error, 1)
	go func() {
		_, err := b.pool.Exec(b.ctx, `UPDATE sms_account SET updated_at = updated_at WHERE id = $1`, b.account)
		waiter <- err
	}()
	opts := b.opts()
	opts.IdleInTransaction = time.Microsecond
	var rep *reconcile.Report
	require.Eventually(t, func() bool {
		rep = b.run(opts)
		return len(rep.Check(reconcile.CheckHealth).Failures) == 2
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, []string{reconcile.CheckHealth}, rep.Failed())
	f := strings.Join(rep.Check(reconcile.CheckHealth).Failures, "\n")
	require.Contains(t, f, "1 sessions idle in a transaction for more than 1µs")
	require.Contains(t, f, "1 sessions waiting on a lock")
	require.NoError(t, holder.Rollback(b.ctx))
	require.NoError(t, <-waiter)

	opts.MaxConnections = 1
	opts.IdleInTransaction = 0
	b.failsWith(opts, reconcile.CheckHealth, "over the budget of 1")
}

// TestHealthCountsRolePools: sessions named "<name>/<role>" (the chain's
// pools) count under ApplicationName; a name that only starts the same
// does not.
func TestHealthCountsRolePools(t *testing.T) {
	t.Parallel()
	b := setup(t)
	conns := func() string {
		rep := b.run(b.opts())
		return strings.Join(rep.Check(reconcile.CheckHealth).Figures, "\n")
	}
	base := conns()
	n := func(s string) int {
		var k int
		_, err := fmt.Sscanf(s[strings.Index(s, ": ")+2:], "%d connections", &k)
		require.NoError(t, err, s)
		return k
	}
	open := func(name string) {
		url, err := dsn.WithParam(testdb.PGSchema(t), "application_name", name)
		require.NoError(t, err)
		c, err := pgx.Connect(b.ctx, url)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close(context.Background()) })
	}
	open(b.app + "/stage")
	open(b.app + "x/stage")
	open(b.app + "x")
	require.Equal(t, n(base)+1, n(conns()))
}

// TestRequiresSchema: a database without the send chain's tables is an
// error, not a report.
func TestRequiresSchema(t *testing.T) {
	t.Parallel()
	d := testdb.PGDriver(t)
	_, err := reconcile.Run(t.Context(), d.Pool(), reconcile.Options{})
	require.ErrorContains(t, err, "table sms_message is missing")
}
