package admit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/app/sms/admit"
	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/internal/app/sms/complete"
	"github.com/relayhq/relay/internal/app/sms/gateway"
	"github.com/relayhq/relay/internal/app/sms/route"
	"github.com/relayhq/relay/internal/app/sms/rules"
	"github.com/relayhq/relay/internal/app/sms/tenancy"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaytype"
	"github.com/relayhq/relay/relaywork"
)

// start is 10:00 China time, far from a day's or an hour's boundary.
var start = time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC)

type bundle struct {
	t      testing.TB
	ctx    context.Context
	d      *relaypgx.Driver
	clock  *relayclock.Fake
	creds  map[string]tenancy.AppCredentials // "enterprise/app"
	engine *relay.Engine
	api    http.Handler
}

// setup gives a fresh schema with the engine and sms lines applied, the
// demo fixture changed by tweak, the stage's engine and the API.
func setup(t testing.TB, tweak func(*tenancy.Fixture)) *bundle {
	t.Helper()
	ctx := t.Context()
	d := testdb.PGDriver(t)
	clock := relayclock.NewFake(start)
	_, err := relaymigrate.Up(ctx, d, clock, tenancy.MigrationLines()...)
	require.NoError(t, err)
	f := tenancy.DemoFixture(func(name string) string { return "file:/etc/relay/sms/" + name + ".secret" })
	if tweak != nil {
		tweak(&f)
	}
	b := &bundle{t: t, ctx: ctx, d: d, clock: clock, creds: map[string]tenancy.AppCredentials{}}
	_, err = tenancy.Seed(ctx, d.Pool(), f, tenancy.SeedOpts{Clock: clock, NewApp: func(c tenancy.AppCredentials) error {
		b.creds[c.Enterprise+"/"+c.App] = c
		return nil
	}})
	require.NoError(t, err)
	b.engine = b.newEngine("")
	b.api, err = admit.NewAPI(admit.APIConfig{Driver: d, Engine: b.engine, Clock: clock})
	require.NoError(t, err)
	return b
}

func (b *bundle) newEngine(instance string) *relay.Engine {
	b.t.Helper()
	stage, err := admit.NewStage(admit.StageConfig{Driver: b.d, Clock: b.clock, Work: b.workStore()})
	require.NoError(b.t, err)
	e, err := relay.NewEngine(b.d, admit.EngineConfig(stage, instance, b.clock, nil))
	require.NoError(b.t, err)
	return e
}

// do sends a request signed for app at the clock's time (plus skew) and
// returns the status and the decoded JSON body.
func (b *bundle) do(app, method, path string, body []byte, skew time.Duration, mutate func(*http.Request)) (int, map[string]any) {
	b.t.Helper()
	c := b.creds[app]
	require.NotEmpty(b.t, c.APIKey, app)
	ts := b.clock.Now().Add(skew).Unix()
	r := httptest.NewRequest(method, path, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(admit.HeaderKey, c.APIKey)
	r.Header.Set(admit.HeaderTimestamp, strconv.FormatInt(ts, 10))
	r.Header.Set(admit.HeaderSignature, admit.Sign(c.HMACSecret, method, path, ts, body))
	if mutate != nil {
		mutate(r)
	}
	w := httptest.NewRecorder()
	b.api.ServeHTTP(w, r)
	var out map[string]any
	require.NoError(b.t, json.Unmarshal(w.Body.Bytes(), &out), w.Body.String())
	return w.Code, out
}

func (b *bundle) send(app string, req admit.Request) (int, map[string]any) {
	b.t.Helper()
	body, err := json.Marshal(req)
	require.NoError(b.t, err)
	return b.do(app, http.MethodPost, "/v1/messages", body, 0, nil)
}

// accepted sends req and returns its message id (202 required).
func (b *bundle) accepted(app string, req admit.Request) int64 {
	b.t.Helper()
	status, out := b.send(app, req)
	require.Equal(b.t, http.StatusAccepted, status, out)
	require.Equal(b.t, false, out["duplicate"])
	return int64(out["message_id"].(float64))
}

func (b *bundle) get(app string, id int64) (int, map[string]any) {
	b.t.Helper()
	return b.do(app, http.MethodGet, "/v1/messages/"+strconv.FormatInt(id, 10), nil, 0, nil)
}

func (b *bundle) work() int {
	b.t.Helper()
	n, err := b.engine.Work(b.ctx)
	require.NoError(b.t, err)
	return n
}

func (b *bundle) scalar(sql string, args ...any) int64 {
	b.t.Helper()
	var n int64
	require.NoError(b.t, b.d.Pool().QueryRow(b.ctx, sql, args...).Scan(&n))
	return n
}

// frozen is the account's frozen amount of enterprise ent.
func (b *bundle) frozen(ent string) int64 {
	return b.scalar(`SELECT a.frozen_li FROM sms_account a JOIN sms_enterprise e ON e.id = a.enterprise_id WHERE e.name = $1`, ent)
}

func otp(id string, numbers ...string) admit.Request {
	return admit.Request{ClientMsgID: id, Numbers: numbers, Template: "otp", SignName: "云通科技",
		Params: map[string]string{"code": "123456", "minutes": "5"}}
}

// TestSendAdmitted: a signed request is accepted (202, its inbox row
// accepted), then admitted by the stage with its price per segment and
// number, and exactly that is frozen under "freeze:<id>".
func TestSendAdmitted(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	id := b.accepted("yuntong/otp", otp("c-1", "+86 138-1234-5678", "13012345678"))
	status, m := b.get("yuntong/otp", id)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "accepted", m["state"])

	require.Equal(t, 1, b.work())
	status, m = b.get("yuntong/otp", id)
	require.Equal(t, http.StatusOK, status, m)
	require.Equal(t, "admitted", m["state"], m)
	require.EqualValues(t, 1, m["segments"])
	require.EqualValues(t, 2*tenancy.DemoPrice, m["amount_li"])
	recips := m["recipients"].([]any)
	require.Len(t, recips, 2)
	r0 := recips[0].(map[string]any)
	atts := r0["attempts"].([]any)
	delete(r0, "attempts")
	require.Equal(t, map[string]any{"number": "13812345678", "carrier": "mobile", "segments": 1.0,
		"unit_li": float64(tenancy.DemoPrice), "amount_li": float64(tenancy.DemoPrice)}, r0)
	require.Len(t, atts, 1, "attempt 1, written with the admission")
	a0 := atts[0].(map[string]any)
	require.Equal(t, "queued", a0["state"])
	require.EqualValues(t, 1, a0["attempt"])
	require.Len(t, a0["segments"].([]any), 1)
	require.Equal(t, "unicom", recips[1].(map[string]any)["carrier"])

	require.Equal(t, int64(2*tenancy.DemoPrice), b.frozen("yuntong"))
	require.Equal(t, int64(2*tenancy.DemoPrice), b.scalar(`SELECT amount_li FROM sms_ledger WHERE idem_key = $1 AND kind = 'freeze'`,
		admit.FreezeKey(id)))
	require.Equal(t, relaytype.StateSucceeded, b.state(id))
	// The counters: the daily key counts two messages, each number's keys one.
	require.Equal(t, int64(2), b.scalar(`SELECT count FROM sms_limit_counter WHERE key LIKE 'daily:%'`))
	require.Equal(t, int64(6), b.scalar(`SELECT count(*) FROM sms_limit_counter WHERE key LIKE 'freq:%' AND count = 1`))

	// Stage B in the same transaction: attempt 1 per number on a channel of
	// the number's carrier, one submit each, one gateway command each in
	// the outbox, keyed by channel, that the gateway parses back.
	rows, err := b.d.Pool().Query(b.ctx, `SELECT a.recipient, a.attempt_no, c.name, c.carrier, a.segments, a.state,
		s.submit_id, s.registered FROM sms_attempt a JOIN sms_channel c ON c.id = a.channel_id
		JOIN sms_submit s ON s.attempt_id = a.id WHERE a.message_id = $1 ORDER BY a.recipient`, id)
	require.NoError(t, err)
	type att struct {
		recip, no        int
		channel, carrier string
		segs             int
		state            string
		submit           int64
		registered       bool
	}
	var got []att
	for rows.Next() {
		var a att
		require.NoError(t, rows.Scan(&a.recip, &a.no, &a.channel, &a.carrier, &a.segs, &a.state, &a.submit, &a.registered))
		got = append(got, a)
	}
	require.NoError(t, rows.Err())
	require.Len(t, got, 2)
	require.Equal(t, "mobile", got[0].carrier)
	require.Equal(t, "unicom", got[1].carrier)
	require.Equal(t, "cu-a", got[1].channel, "the unicom group's first tier")
	cmds := b.commands()
	require.Len(t, cmds, 2)
	for i, a := range got {
		require.Equal(t, 1, a.no)
		require.Equal(t, "queued", a.state)
		require.True(t, a.registered)
		c := cmds[uint64(a.submit)]
		require.Equal(t, a.channel, c.Channel)
		require.Equal(t, []string{[]string{"13812345678", "13012345678"}[i]}, c.Dests)
		require.EqualValues(t, 1, c.PkTotal)
		require.EqualValues(t, 1, c.RegisteredDelivery)
		require.Equal(t, uint64(a.submit)&0xff, uint64(1), "segment 1")
	}
}

// commands reads the gateway commands in the outbox, by submitId, and
// checks each event's key is its channel.
func (b *bundle) commands() map[uint64]gateway.Command {
	b.t.Helper()
	rows, err := b.d.Pool().Query(b.ctx, `SELECT key, topic, payload FROM relay_outbox WHERE target = $1 ORDER BY id`, route.Target)
	require.NoError(b.t, err)
	out := map[uint64]gateway.Command{}
	for rows.Next() {
		var key, topic string
		var payload []byte
		require.NoError(b.t, rows.Scan(&key, &topic, &payload))
		require.Equal(b.t, route.Stream, topic)
		c, err := gateway.ParseCommand(map[string]any{gateway.FieldPayload: string(payload)})
		require.NoError(b.t, err)
		require.Equal(b.t, key, c.Channel)
		out[c.SubmitID] = c
	}
	require.NoError(b.t, rows.Err())
	return out
}

func (b *bundle) state(id int64) relaytype.State {
	b.t.Helper()
	m, err := b.d.GetExecutor().MessageGet(b.ctx, admit.Queue, id)
	require.NoError(b.t, err)
	return m.State
}

// TestSendLongMessage: a long message is counted and priced per segment.
func TestSendLongMessage(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	body := ""
	for range 10 {
		body += "您的订单已发货，请注意查收。" // 14 characters
	}
	id := b.accepted("yuntong/notify", admit.Request{ClientMsgID: "long", Numbers: []string{"13812345678"},
		Content: "【云通科技】" + body})
	require.Equal(t, 1, b.work())
	_, m := b.get("yuntong/notify", id)
	require.Equal(t, "admitted", m["state"], m)
	require.EqualValues(t, 3, m["segments"], "146 UCS2 characters: 67 per segment")
	require.EqualValues(t, 3*tenancy.DemoPrice, m["amount_li"])
	require.Equal(t, int64(3*tenancy.DemoPrice), b.frozen("yuntong"))

	// Three submits, one per segment, each with the concatenation UDH
	// (one reference, numbers 1..3) and its own submitId.
	cmds := b.commands()
	require.Len(t, cmds, 3)
	refs := map[uint16]bool{}
	for sid, c := range cmds {
		h, _, err := cmpp.ParseUDH(c.Content)
		require.NoError(t, err)
		require.EqualValues(t, 3, c.PkTotal)
		require.EqualValues(t, sid&0xff, c.PkNumber)
		require.EqualValues(t, 1, c.TPUDHI)
		require.EqualValues(t, 3, h.Total)
		require.EqualValues(t, c.PkNumber, h.Seq)
		refs[h.Ref] = true
	}
	require.Len(t, refs, 1, "one reference for the three segments")
	require.Equal(t, int64(3), b.scalar(`SELECT segments FROM sms_attempt WHERE message_id = $1`, id))
}

// TestAuthentication: every way a request fails before the inbox, with its
// status and reason code; nothing is enqueued.
func TestAuthentication(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	good, err := json.Marshal(otp("a-1", "13812345678"))
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		body   []byte
		skew   time.Duration
		mutate func(*http.Request)
		status int
		reason admit.Code
	}{
		{"bad signature", good, 0, func(r *http.Request) { r.Header.Set(admit.HeaderSignature, fmt.Sprintf("%064x", 1)) },
			401, admit.CodeBadSignature},
		{"body changed after signing", good, 0, func(r *http.Request) {
			changed := bytes.Replace(good, []byte("123456"), []byte("654321"), 1)
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(changed)), int64(len(changed))
		}, 401, admit.CodeBadSignature},
		{"stale timestamp", good, -6 * time.Minute, nil, 401, admit.CodeStaleTimestamp},
		{"future timestamp", good, 6 * time.Minute, nil, 401, admit.CodeStaleTimestamp},
		{"unknown key", good, 0, func(r *http.Request) { r.Header.Set(admit.HeaderKey, "NoSuchKey0000000") }, 401, admit.CodeUnauthenticated},
		{"no signature", good, 0, func(r *http.Request) { r.Header.Del(admit.HeaderSignature) }, 401, admit.CodeUnauthenticated},
		{"malformed json", []byte(`{"client_msg_id": "x", `), 0, nil, 400, admit.CodeMalformedJSON},
		{"unknown field", []byte(`{"client_msg_id": "x", "numbers": ["13812345678"], "content": "【云通科技】hi", "cc": 1}`), 0, nil, 400, admit.CodeMalformedJSON},
		{"no numbers", []byte(`{"client_msg_id": "x", "numbers": [], "content": "【云通科技】hi"}`), 0, nil, 400, admit.CodeBadRequest},
		{"both content and template", []byte(`{"client_msg_id": "x", "numbers": ["1"], "content": "a", "template": "otp"}`), 0, nil, 400, admit.CodeBadRequest},
		{"bad client id", []byte(`{"client_msg_id": "a b", "numbers": ["1"], "content": "a"}`), 0, nil, 400, admit.CodeBadRequest},
		{"too large", append(append([]byte(`{"client_msg_id": "x", "content": "`), bytes.Repeat([]byte("a"), admit.MaxBodyDefault)...), `"}`...),
			0, nil, 413, admit.CodeTooLarge},
	} {
		status, out := b.do("yuntong/otp", http.MethodPost, "/v1/messages", tc.body, tc.skew, tc.mutate)
		require.Equal(t, tc.status, status, "%s: %v", tc.name, out)
		require.Equal(t, string(tc.reason), out["reason"], tc.name)
		require.NotContains(t, out["error"], "13812345678", tc.name)
	}
	// Not JSON: relayhttp's content-type guard.
	status, _ := b.do("yuntong/otp", http.MethodPost, "/v1/messages", good, 0, func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") })
	require.Equal(t, http.StatusUnsupportedMediaType, status)
	st, err := b.engine.Stats(b.ctx)
	require.NoError(t, err)
	require.Zero(t, st.MaxID, "nothing enqueued")
	require.Zero(t, b.scalar(`SELECT count(*) FROM sms_message`))

	// A GET is signed too, and an app sees only its own messages.
	id := b.accepted("yuntong/otp", otp("mine", "13812345678"))
	status, _ = b.get("yuntong/notify", id)
	require.Equal(t, http.StatusNotFound, status)
	status, _ = b.do("yuntong/otp", http.MethodGet, "/v1/messages/"+strconv.FormatInt(id, 10), nil, 0,
		func(r *http.Request) { r.Header.Set(admit.HeaderSignature, fmt.Sprintf("%064x", 2)) })
	require.Equal(t, http.StatusUnauthorized, status)
	status, _ = b.get("yuntong/otp", id)
	require.Equal(t, http.StatusOK, status)
}

// TestDuplicateClientID: a resend of a client message id answers the same
// message id (200, duplicate) — one inbox row, one engine message, one
// freeze — before and after the stage decided it.
func TestDuplicateClientID(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	id := b.accepted("yuntong/otp", otp("dup", "13812345678"))
	status, out := b.send("yuntong/otp", otp("dup", "13812345678"))
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, true, out["duplicate"])
	require.EqualValues(t, id, out["message_id"])
	require.Equal(t, 1, b.work())
	status, out = b.send("yuntong/otp", otp("dup", "13812345678"))
	require.Equal(t, http.StatusOK, status)
	require.EqualValues(t, id, out["message_id"])
	require.Zero(t, b.work())
	// Another app may use the same client id: its own message.
	other := b.accepted("yuntong/notify", otp("dup", "13912345678"))
	require.NotEqual(t, id, other)

	require.Equal(t, int64(2), b.scalar(`SELECT count(*) FROM sms_message`))
	require.Equal(t, int64(1), b.scalar(`SELECT count(*) FROM sms_ledger WHERE idem_key = $1`, admit.FreezeKey(id)))
	require.Equal(t, int64(tenancy.DemoPrice), b.frozen("yuntong"))
}

// TestRefusals: a refused message is the message's business outcome — state
// refused with its reason and the reason's status, the engine message
// succeeded — and nothing is frozen or counted for it.
func TestRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, func(f *tenancy.Fixture) {
		f.Enterprises[1].Balance = 50 // lanjing: 0.05 CNY, one segment's price
	})
	cases := []struct {
		app    string
		req    admit.Request
		reason rules.Reason
	}{
		{"yuntong/otp", otp("bl", "13800000000"), rules.ReasonBlacklisted},
		{"yuntong/otp", otp("bl-ent", "13812345678", "13900000001"), rules.ReasonBlacklisted},
		{"yuntong/otp", admit.Request{ClientMsgID: "tpl", Numbers: []string{"13812345678"}, Template: "nope", SignName: "云通科技"},
			rules.ReasonTemplateUnknown},
		{"yuntong/otp", admit.Request{ClientMsgID: "sig", Numbers: []string{"13812345678"}, Content: "【无名公司】您好"},
			rules.ReasonSignatureUnknown},
		// 云通商城 is approved on cm-b only: no unicom channel may carry it.
		{"yuntong/otp", admit.Request{ClientMsgID: "unreg", Numbers: []string{"13012345678"}, Content: "【云通商城】您好"},
			rules.ReasonNoChannel},
		{"yuntong/otp", admit.Request{ClientMsgID: "num", Numbers: []string{"12345"}, Content: "【云通科技】您好"},
			rules.ReasonBadNumber},
		{"yuntong/otp", otp("twice", "13812345678", "+8613812345678"), rules.ReasonBadNumber},
		// Two segments' worth (90 li) against 50 li available.
		{"lanjing/shipping", admit.Request{ClientMsgID: "poor", Numbers: []string{"13812345678", "13012345678"},
			Template: "parcel", SignName: "蓝鲸物流", Params: map[string]string{"id": "SF1", "phone": "95338"}},
			rules.ReasonInsufficientBalance},
	}
	ids := make([]int64, len(cases))
	for i, c := range cases {
		ids[i] = b.accepted(c.app, c.req)
	}
	require.Equal(t, len(cases), b.work())
	for i, c := range cases {
		status, m := b.get(c.app, ids[i])
		require.Equal(t, http.StatusOK, status)
		require.Equal(t, "refused", m["state"], "%s: %v", c.req.ClientMsgID, m)
		require.Equal(t, string(c.reason), m["reason"], c.req.ClientMsgID)
		require.EqualValues(t, c.reason.Status(), m["status"])
		require.NotContains(t, m["detail"], "1381234", "no number in a detail")
		require.Equal(t, relaytype.StateSucceeded, b.state(ids[i]))
	}
	require.Zero(t, b.scalar(`SELECT count(*) FROM sms_ledger WHERE kind = 'freeze'`))
	require.Zero(t, b.scalar(`SELECT count(*) FROM sms_attempt`), "a refused message has no attempt")
	require.Zero(t, b.scalar(`SELECT count(*) FROM relay_outbox`), "nor a command")
	require.Zero(t, b.frozen("yuntong"))
	require.Zero(t, b.frozen("lanjing"))
	require.Zero(t, b.scalar(`SELECT coalesce(sum(count), 0) FROM sms_limit_counter`), "a refusal counts nothing")
}

// TestFrequencyLimit: the per-number limit (1 per minute for otp) admits one
// of two messages to a number in its window and refuses the other; the next
// window admits again.
func TestFrequencyLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	a := b.accepted("yuntong/otp", otp("f-1", "13812345678"))
	c := b.accepted("yuntong/otp", otp("f-2", "13812345678"))
	// 2 deliveries, or 3 when the two raced (see below)
	require.Contains(t, []int{2, 3}, b.work())
	// The two may run in two workers' transactions at once: both read the
	// counter at 0, whichever writes it first is admitted, the other's
	// guarded write finds no room and that batch is decided again at once:
	// refused.
	_, ma := b.get("yuntong/otp", a)
	_, mc := b.get("yuntong/otp", c)
	require.ElementsMatch(t, []any{"admitted", "refused"}, []any{ma["state"], mc["state"]})
	m := mc
	if mc["state"] == "admitted" {
		m = ma
	}
	require.Equal(t, string(rules.ReasonFrequencyLimit), m["reason"])
	b.clock.Advance(time.Minute)
	d := b.accepted("yuntong/otp", otp("f-3", "13812345678"))
	require.Equal(t, 1, b.work())
	_, m = b.get("yuntong/otp", d)
	require.Equal(t, "admitted", m["state"], m)
	require.Equal(t, int64(2*tenancy.DemoPrice), b.frozen("yuntong"))
}

// TestDailyLimitConcurrent: 16 requests sent at once and decided by two
// engines at once (batches of 4, so several transactions race for the
// counter) never pass the app's daily limit of 5: exactly 5 admitted and
// frozen, 11 refused with daily_limit, the counter at 5.
func TestDailyLimitConcurrent(t *testing.T) {
	t.Parallel()
	b := setup(t, func(f *tenancy.Fixture) {
		f.Enterprises[0].Apps[1].DailyLimit = 5 // yuntong/notify
	})
	var wg sync.WaitGroup
	ids := make([]int64, 16)
	for i := range 16 {
		wg.Go(func() {
			status, out := b.send("yuntong/notify", admit.Request{ClientMsgID: "d-" + strconv.Itoa(i),
				Numbers: []string{fmt.Sprintf("1381234%04d", i)}, Content: "【云通科技】您好"})
			if status == http.StatusAccepted {
				ids[i] = int64(out["message_id"].(float64))
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		require.NotZero(t, id, "every request accepted")
	}
	engines := make([]*relay.Engine, 2)
	for i := range engines {
		stage, err := admit.NewStage(admit.StageConfig{Driver: b.d, Clock: b.clock, Work: b.workStore()})
		require.NoError(t, err)
		cfg := admit.EngineConfig(stage, "", b.clock, nil)
		cfg.BatchSize, cfg.TxBatch = 8, 4
		engines[i], err = relay.NewEngine(b.d, cfg)
		require.NoError(t, err)
	}
	for _, e := range engines {
		wg.Go(func() {
			_, err := e.Work(b.ctx)
			require.NoError(t, err)
		})
	}
	wg.Wait()
	for range 3 { // a batch that lost a race is retried after its backoff
		b.clock.Advance(10 * time.Second)
		b.work()
	}
	admitted, refused := 0, 0
	for _, id := range ids {
		_, m := b.get("yuntong/notify", id)
		switch m["state"] {
		case "admitted":
			admitted++
		case "refused":
			require.Equal(t, string(rules.ReasonDailyLimit), m["reason"])
			refused++
		default:
			t.Fatalf("message %d: %v", id, m)
		}
	}
	require.Equal(t, 5, admitted)
	require.Equal(t, 11, refused)
	require.Equal(t, int64(5), b.scalar(`SELECT count FROM sms_limit_counter WHERE key LIKE 'daily:%'`))
	require.Equal(t, int64(5*tenancy.DemoPrice), b.frozen("yuntong"))
	require.Equal(t, int64(5), b.scalar(`SELECT count(*) FROM sms_ledger WHERE kind = 'freeze'`))
}

func (b *bundle) workStore() *relaywork.Store {
	b.t.Helper()
	w, err := complete.NewWorkStore(b.d.Pool(), b.clock)
	require.NoError(b.t, err)
	return w
}

// TestSweepCounters: counters whose window ended are deleted, in bounded
// passes; a counter of a window still open is kept.
func TestSweepCounters(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	_, err := b.d.Pool().Exec(b.ctx, `INSERT INTO sms_limit_counter (key, count, until, updated_at)
		SELECT 'k' || i, 1, $1::timestamptz + (i || ' minutes')::interval, $1 FROM generate_series(-5, 2) i`, start)
	require.NoError(t, err)
	n, err := admit.SweepCounters(b.ctx, b.d.Pool(), start, 3)
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	n, err = admit.SweepCounters(b.ctx, b.d.Pool(), start, 100)
	require.NoError(t, err)
	require.EqualValues(t, 2, n, "k-5 … k-1 ended before now; k0 ends at now, k1 and k2 later")
	require.EqualValues(t, 3, b.scalar(`SELECT count(*) FROM sms_limit_counter`))
}

// TestConcurrentAcceptsShareCommits: many requests at once — several
// carrying one client message id — go through the API's group commit:
// each distinct id is accepted once (202) with one inbox row and one engine
// message, every copy of it answers that message (200, duplicate), and no
// request is lost or answered with another's id.
func TestConcurrentAcceptsShareCommits(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	const distinct, copies = 30, 3
	type answer struct {
		status int
		id     int64
		dup    bool
	}
	answers := make([][]answer, distinct)
	for i := range answers {
		answers[i] = make([]answer, copies)
	}
	var wg sync.WaitGroup
	for i := range distinct {
		for c := range copies {
			wg.Go(func() {
				status, out := b.send("yuntong/otp", otp("g-"+strconv.Itoa(i), fmt.Sprintf("1381234%04d", i)))
				a := answer{status: status}
				if id, ok := out["message_id"].(float64); ok {
					a.id, a.dup = int64(id), out["duplicate"] == true
				}
				answers[i][c] = a
			})
		}
	}
	wg.Wait()
	seen := map[int64]int{}
	for i, as := range answers {
		accepted := 0
		for _, a := range as {
			require.Contains(t, []int{http.StatusAccepted, http.StatusOK}, a.status, "id %d: %+v", i, a)
			require.Equal(t, as[0].id, a.id, "every copy of client id %d answers one message", i)
			if a.status == http.StatusAccepted {
				require.False(t, a.dup)
				accepted++
			} else {
				require.True(t, a.dup)
			}
		}
		require.Equal(t, 1, accepted, "client id %d accepted once", i)
		seen[as[0].id]++
	}
	require.Len(t, seen, distinct, "distinct client ids, distinct messages")
	require.Equal(t, int64(distinct), b.scalar(`SELECT count(*) FROM sms_message`))
	st, err := b.engine.Stats(b.ctx)
	require.NoError(t, err)
	require.Equal(t, int64(distinct), st.Backlog())
	for i, as := range answers {
		require.Equal(t, int64(1), b.scalar(`SELECT count(*) FROM sms_message WHERE id = $1 AND client_msg_id = $2`,
			as[0].id, "g-"+strconv.Itoa(i)), "message %d holds its own request", as[0].id)
	}
}

// TestSuspendedAppRefusedAfterSecretTTL: the API reuses an app's secret
// for SecretTTL; once that has passed a suspended app is refused (401),
// and a request accepted inside it is refused by the stage, which checks
// the app again.
func TestSuspendedAppRefusedAfterSecretTTL(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.accepted("yuntong/otp", otp("before", "13812345678"))
	_, err := b.d.Pool().Exec(b.ctx, `UPDATE sms_app SET state = 'suspended' WHERE api_key = $1`, b.creds["yuntong/otp"].APIKey)
	require.NoError(t, err)
	inside := b.accepted("yuntong/otp", otp("inside", "13812345678"))
	b.work()
	require.Equal(t, "refused", b.messageState(inside))

	b.clock.Advance(admit.SecretTTLDefault)
	status, out := b.send("yuntong/otp", otp("after", "13812345678"))
	require.Equal(t, http.StatusUnauthorized, status, out)
	require.Equal(t, string(admit.CodeUnauthenticated), out["reason"])
}

func (b *bundle) messageState(id int64) string {
	b.t.Helper()
	var s string
	require.NoError(b.t, b.d.Pool().QueryRow(b.ctx, `SELECT state FROM sms_message WHERE id = $1`, id).Scan(&s))
	return s
}

// batchSizes records the size of every batch the stage is handed.
type batchSizes struct {
	*admit.Stage
	mu    sync.Mutex
	sizes []int
}

func (s *batchSizes) HandleBatch(ctx context.Context, tx relay.Tx, ds []*relay.Delivery) []relay.Result {
	s.mu.Lock()
	s.sizes = append(s.sizes, len(ds))
	s.mu.Unlock()
	return s.Stage.HandleBatch(ctx, tx, ds)
}

// TestBacklogRunsFullTransactions: with a backlog, the stage's defaults give
// each transaction TxBatchDefault messages, not the few a refill claim
// split over the workers would (16 claimed, 8 a transaction, with the
// earlier 64 leased and 32 a transaction).
func TestBacklogRunsFullTransactions(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	const n = 600
	for i := range n {
		b.accepted("yuntong/otp", otp(fmt.Sprintf("backlog-%d", i), fmt.Sprintf("1381234%04d", i)))
	}
	stage, err := admit.NewStage(admit.StageConfig{Driver: b.d, Clock: b.clock, Work: b.workStore()})
	require.NoError(t, err)
	rec := &batchSizes{Stage: stage}
	cfg := admit.EngineConfig(stage, "", b.clock, nil)
	cfg.Handler = rec
	e, err := relay.NewEngine(b.d, cfg)
	require.NoError(t, err)
	done, err := e.Work(b.ctx)
	require.NoError(t, err)
	require.Equal(t, n, done)
	full := 0
	for _, s := range rec.sizes {
		require.LessOrEqual(t, s, admit.TxBatchDefault)
		if s == admit.TxBatchDefault {
			full++
		}
	}
	// 600 = 9 × 64 + 24: every transaction but the tail's is full.
	require.GreaterOrEqual(t, full, 7, "batch sizes %v", rec.sizes)
}

// TestCounterRaceDecidesAgain: a batch reads its limit counters without
// locking them; when another transaction fills a counter between that read
// and the batch's write, the guarded write finds no room, the whole batch
// rolls back (no decision, no freeze, no count of its own), and the retry,
// at once, decides from the committed count: refused with frequency_limit.
func TestCounterRaceDecidesAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	id := b.accepted("yuntong/otp", otp("race-1", "13812345678"))
	stage, err := admit.NewStage(admit.StageConfig{Driver: b.d, Clock: b.clock, Work: b.workStore()})
	require.NoError(t, err)
	raced := 0
	admit.SetAfterCount(stage, func(keys []string) {
		if raced > 0 {
			return
		}
		for _, k := range keys {
			if !strings.HasPrefix(k, "freq:") {
				continue
			}
			raced++ // the otp app allows one message a minute per number: fill the window
			_, err := b.d.Pool().Exec(b.ctx, `INSERT INTO sms_limit_counter (key, count, until, updated_at)
				VALUES ($1, 1, $2, $2) ON CONFLICT (key) DO UPDATE SET count = 1`, k, b.clock.Now().Add(time.Hour))
			require.NoError(t, err)
		}
	})
	e, err := relay.NewEngine(b.d, admit.EngineConfig(stage, "", b.clock, nil))
	require.NoError(t, err)
	_, err = e.Work(b.ctx)
	require.NoError(t, err)
	require.Positive(t, raced, "the batch counted a frequency counter")
	_, m := b.get("yuntong/otp", id)
	require.Equal(t, "refused", m["state"], m)
	require.Equal(t, string(rules.ReasonFrequencyLimit), m["reason"])
	require.EqualValues(t, 1, b.scalar(`SELECT attempts FROM relay_message WHERE id = $1`, id),
		"one failed attempt: the raced batch")
	// Nothing of the raced batch stayed: no freeze, no attempt, no count of
	// its own (its daily count would be 1; a refusal counts nothing).
	require.Zero(t, b.frozen("yuntong"))
	require.Zero(t, b.scalar(`SELECT count(*) FROM sms_attempt`))
	require.Equal(t, int64(raced), b.scalar(`SELECT coalesce(sum(count), 0) FROM sms_limit_counter WHERE key LIKE 'freq:%'`),
		"only the other transaction's counts")
	require.Zero(t, b.scalar(`SELECT coalesce(sum(count), 0) FROM sms_limit_counter WHERE key LIKE 'daily:%'`))
}
