package complete_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/app/sms/admit"
	"github.com/relayhq/relay/internal/app/sms/complete"
	"github.com/relayhq/relay/internal/app/sms/gateway"
	"github.com/relayhq/relay/internal/app/sms/route"
	"github.com/relayhq/relay/internal/app/sms/tenancy"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaywork"
)

// start is 10:00 China time.
var start = time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC)

// chain is the send chain on a fresh schema with a fake clock: the API
// and stage A/B (driven by engine.Work), the gateway played by the test
// (it reads the commands from the outbox and writes results and reports to
// the test's own streams), the intake (ReadOnce) and completers (Process
// on claims the test takes).
type chain struct {
	t              *testing.T
	ctx            context.Context
	d              *relaypgx.Driver
	clock          *relayclock.Fake
	rdb            *redis.Client
	api            http.Handler
	engine         *relay.Engine
	work           *relaywork.Store
	intake         *complete.Intake
	creds          map[string]tenancy.AppCredentials
	seen           int64 // the last outbox id read by commands
	result, report string
}

func newChain(t *testing.T) *chain {
	t.Helper()
	ctx := t.Context()
	d := testdb.PGDriver(t)
	clock := relayclock.NewFake(start)
	_, err := relaymigrate.Up(ctx, d, clock, tenancy.MigrationLines()...)
	require.NoError(t, err)
	c := &chain{t: t, ctx: ctx, d: d, clock: clock, creds: map[string]tenancy.AppCredentials{}}
	f := tenancy.DemoFixture(func(name string) string { return "file:/etc/relay/sms/" + name + ".secret" })
	_, err = tenancy.Seed(ctx, d.Pool(), f, tenancy.SeedOpts{Clock: clock, NewApp: func(a tenancy.AppCredentials) error {
		c.creds[a.Enterprise+"/"+a.App] = a
		return nil
	}})
	require.NoError(t, err)
	_, err = d.Pool().Exec(ctx, `UPDATE sms_app SET webhook_topic = 'yuntong-otp' WHERE name = 'otp'`)
	require.NoError(t, err)
	c.work, err = complete.NewWorkStore(d.Pool(), clock)
	require.NoError(t, err)
	stage, err := admit.NewStage(admit.StageConfig{Driver: d, Clock: clock, Work: c.work})
	require.NoError(t, err)
	c.engine, err = relay.NewEngine(d, admit.EngineConfig(stage, "", clock, nil))
	require.NoError(t, err)
	c.api, err = admit.NewAPI(admit.APIConfig{Driver: d, Engine: c.engine, Clock: clock})
	require.NoError(t, err)

	c.rdb = redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	t.Cleanup(func() { _ = c.rdb.Close() })
	prefix := fmt.Sprintf("t:%s:%d:", t.Name(), time.Now().UnixNano())
	c.result, c.report = prefix+"result", prefix+"report"
	t.Cleanup(func() { c.rdb.Del(context.Background(), c.result, c.report) })
	c.intake, err = complete.NewIntake(complete.IntakeConfig{Pool: d.Pool(), Redis: c.rdb, Work: c.work, Clock: clock,
		Consumer: "test", ResultStream: c.result, ReportStream: c.report})
	require.NoError(t, err)
	require.NoError(t, c.intake.Init(ctx), "Redis on 127.0.0.1:6379")
	return c
}

// completer returns a completer named owner.
func (c *chain) completer(owner string) *complete.Completer {
	c.t.Helper()
	x, err := complete.NewCompleter(complete.Config{Driver: c.d, Work: c.work, Clock: c.clock, Owner: owner})
	require.NoError(c.t, err)
	return x
}

// send posts req for app and runs stage A/B until it is decided.
func (c *chain) send(app string, req admit.Request) int64 {
	c.t.Helper()
	body, err := json.Marshal(req)
	require.NoError(c.t, err)
	cr := c.creds[app]
	ts := c.clock.Now().Unix()
	r := httptest.NewRequest(http.MethodPost, "/v1/messages", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(admit.HeaderKey, cr.APIKey)
	r.Header.Set(admit.HeaderTimestamp, strconv.FormatInt(ts, 10))
	r.Header.Set(admit.HeaderSignature, admit.Sign(cr.HMACSecret, http.MethodPost, "/v1/messages", ts, body))
	w := httptest.NewRecorder()
	c.api.ServeHTTP(w, r)
	require.Equal(c.t, http.StatusAccepted, w.Code, w.Body.String())
	var out struct {
		MessageID int64 `json:"message_id"`
	}
	require.NoError(c.t, json.Unmarshal(w.Body.Bytes(), &out))
	_, err = c.engine.Work(c.ctx)
	require.NoError(c.t, err)
	require.Equal(c.t, "admitted", c.str(`SELECT state FROM sms_message WHERE id = $1`, out.MessageID))
	return out.MessageID
}

func otp(id string, numbers ...string) admit.Request {
	return admit.Request{ClientMsgID: id, Numbers: numbers, Template: "otp", SignName: "云通科技",
		Params: map[string]string{"code": "123456", "minutes": "5"}}
}

// long is a three-segment content message (146 UCS2 characters).
func long(id string, numbers ...string) admit.Request {
	body := ""
	for range 10 {
		body += "您的订单已发货，请注意查收。"
	}
	return admit.Request{ClientMsgID: id, Numbers: numbers, Content: "【云通科技】" + body}
}

// commands returns the gateway commands queued since the last call, in
// outbox order.
func (c *chain) commands() []gateway.Command {
	c.t.Helper()
	rows, err := c.d.Pool().Query(c.ctx, `SELECT id, payload FROM relay_outbox WHERE target = $1 AND id > $2 ORDER BY id`,
		route.Target, c.seen)
	require.NoError(c.t, err)
	var out []gateway.Command
	for rows.Next() {
		var payload []byte
		require.NoError(c.t, rows.Scan(&c.seen, &payload))
		cmd, err := gateway.ParseCommand(map[string]any{gateway.FieldPayload: string(payload)})
		require.NoError(c.t, err)
		out = append(out, cmd)
	}
	require.NoError(c.t, rows.Err())
	return out
}

// msgID is the supplier Msg_Id the test gives a submit.
func msgID(cmd gateway.Command) uint64 { return 9_000_000 + cmd.SubmitID }

// submitted writes the gateway's result of cmd.
func (c *chain) submitted(cmd gateway.Command, state gateway.State) {
	c.t.Helper()
	r := gateway.Result{EventID: "submit:" + strconv.FormatUint(cmd.SubmitID, 10), SubmitID: cmd.SubmitID,
		Channel: cmd.Channel, State: state, Result: "0"}
	if state == gateway.StateAccepted {
		r.MsgID = msgID(cmd)
	}
	require.NoError(c.t, c.rdb.XAdd(c.ctx, &redis.XAddArgs{Stream: c.result, Values: r.Values()}).Err())
}

// reported writes a status report of cmd with stat.
func (c *chain) reported(cmd gateway.Command, stat string) {
	c.t.Helper()
	v := map[string]any{"event_id": gateway.ReportEventID(cmd.Channel, msgID(cmd), stat), "kind": "report",
		"channel": cmd.Channel, "msg_id": strconv.FormatUint(msgID(cmd), 10), "stat": stat}
	require.NoError(c.t, c.rdb.XAdd(c.ctx, &redis.XAddArgs{Stream: c.report, Values: v}).Err())
}

// lateResp writes a late SubmitResp of cmd (code 0: accepted, with its
// Msg_Id).
func (c *chain) lateResp(cmd gateway.Command, code string) {
	c.t.Helper()
	v := map[string]any{"event_id": gateway.LateEventID(cmd.Channel, cmd.SubmitID), "kind": "late_resp",
		"channel": cmd.Channel, "submit_id": strconv.FormatUint(cmd.SubmitID, 10),
		"msg_id": strconv.FormatUint(msgID(cmd), 10), "result": code}
	require.NoError(c.t, c.rdb.XAdd(c.ctx, &redis.XAddArgs{Stream: c.report, Values: v}).Err())
}

// take reads everything new into the event log.
func (c *chain) take() int {
	c.t.Helper()
	n, err := c.intake.ReadOnce(c.ctx)
	require.NoError(c.t, err)
	return n
}

// claim claims up to n work records for owner.
func (c *chain) claim(owner string, n int) []relaywork.Claim {
	c.t.Helper()
	cl, err := c.work.Claim(c.ctx, owner, n)
	require.NoError(c.t, err)
	return cl
}

// finish takes facts in and completes every claimable work record, with
// completer x, until nothing is claimable.
func (c *chain) finish(x *complete.Completer) {
	c.t.Helper()
	c.take()
	for range 10 {
		cl := c.claim("finish", 64)
		if len(cl) == 0 {
			return
		}
		x.Process(c.ctx, cl)
	}
	c.t.Fatal("work still claimable after 10 rounds")
}

func (c *chain) str(sql string, args ...any) string {
	c.t.Helper()
	var s string
	require.NoError(c.t, c.d.Pool().QueryRow(c.ctx, sql, args...).Scan(&s))
	return s
}

func (c *chain) n(sql string, args ...any) int64 {
	c.t.Helper()
	var n int64
	require.NoError(c.t, c.d.Pool().QueryRow(c.ctx, sql, args...).Scan(&n))
	return n
}

// outcomes returns a completed message's outcomes (nil while admitted).
func (c *chain) outcomes(id int64) []string {
	c.t.Helper()
	var out []string
	require.NoError(c.t, c.d.Pool().QueryRow(c.ctx, `SELECT outcomes FROM sms_message WHERE id = $1`, id).Scan(&out))
	return out
}

// ledger returns the message's ledger entries as "kind key amount".
func (c *chain) ledger(id int64) []string {
	c.t.Helper()
	rows, err := c.d.Pool().Query(c.ctx, `SELECT kind || ' ' || idem_key || ' ' || amount_li FROM sms_ledger
		WHERE idem_key = 'freeze:' || $1 OR idem_key LIKE '%:' || $1 || ':%' ORDER BY id`, strconv.FormatInt(id, 10))
	require.NoError(c.t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(c.t, err)
	return out
}

// account returns yuntong's balance and frozen amount.
func (c *chain) account() (balance, frozen int64) {
	c.t.Helper()
	require.NoError(c.t, c.d.Pool().QueryRow(c.ctx, `SELECT a.balance_li, a.frozen_li FROM sms_account a
		JOIN sms_enterprise e ON e.id = a.enterprise_id WHERE e.name = 'yuntong'`).Scan(&balance, &frozen))
	return balance, frozen
}

func formatUint(v uint64) string { return strconv.FormatUint(v, 10) }

// redisArgs builds an XADD of raw values.
type redisArgs struct {
	stream string
	values map[string]any
}

func (a *redisArgs) args() *redis.XAddArgs {
	return &redis.XAddArgs{Stream: a.stream, Values: a.values}
}

// get reads message id through the API as app.
func (c *chain) get(app string, id int64) admit.MessageAnswer {
	c.t.Helper()
	cr := c.creds[app]
	ts := c.clock.Now().Unix()
	path := "/v1/messages/" + strconv.FormatInt(id, 10)
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.Header.Set(admit.HeaderKey, cr.APIKey)
	r.Header.Set(admit.HeaderTimestamp, strconv.FormatInt(ts, 10))
	r.Header.Set(admit.HeaderSignature, admit.Sign(cr.HMACSecret, http.MethodGet, path, ts, nil))
	w := httptest.NewRecorder()
	c.api.ServeHTTP(w, r)
	require.Equal(c.t, http.StatusOK, w.Code, w.Body.String())
	var m admit.MessageAnswer
	require.NoError(c.t, json.Unmarshal(w.Body.Bytes(), &m))
	return m
}
