package route_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/internal/app/sms/route"
	"github.com/relayhq/relay/internal/app/sms/rules"
	"github.com/relayhq/relay/internal/app/sms/tenancy"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaymigrate"
)

var start = time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC)

type fixture struct {
	ctx  context.Context
	d    *relaypgx.Driver
	snap *rules.Snapshot
	app  *rules.App
	sig  *rules.Signature
}

// setup seeds the demo fixture and one admitted message (id 1, two
// numbers) for attempts to belong to.
func setup(t *testing.T) *fixture {
	t.Helper()
	ctx := t.Context()
	d := testdb.PGDriver(t)
	clock := relayclock.NewFake(start)
	_, err := relaymigrate.Up(ctx, d, clock, tenancy.MigrationLines()...)
	require.NoError(t, err)
	f := tenancy.DemoFixture(func(name string) string { return "file:/etc/relay/sms/" + name + ".secret" })
	_, err = tenancy.Seed(ctx, d.Pool(), f, tenancy.SeedOpts{Clock: clock})
	require.NoError(t, err)
	snap, err := tenancy.Load(ctx, d.Pool(), clock)
	require.NoError(t, err)
	var app *rules.App
	for _, a := range snap.Data().Apps {
		if a.Name == "otp" {
			app = snap.App(a.ID)
		}
	}
	require.NotNil(t, app)
	sig, err := snap.Signature(app.EnterpriseID, "云通科技")
	require.NoError(t, err)
	_, err = d.Pool().Exec(ctx, `INSERT INTO sms_message (id, app_id, client_msg_id, numbers, sign_name, template_code, params,
		content, carriers, segments, unit_li, amount_li, state, accepted_at, decided_at)
		VALUES (1, $1, 'm1', '{13812345678,13912345678}', '云通科技', '', '{}', 'x', '{mobile,mobile}', 3, '{45,45}', 270,
		'admitted', $2, $2)`, app.ID, start)
	require.NoError(t, err)
	return &fixture{ctx: ctx, d: d, snap: snap, app: app, sig: sig}
}

func (f *fixture) channel(t *testing.T, name string) *rules.Channel {
	t.Helper()
	for _, c := range f.snap.Data().Channels {
		if c.Name == name {
			return f.snap.Channel(c.ID)
		}
	}
	t.Fatalf("no channel %s", name)
	return nil
}

func (f *fixture) attempt(t *testing.T, recipient int, channel string) *route.Attempt {
	return &route.Attempt{MessageID: 1, Recipient: recipient, AttemptNo: 1, AppID: f.app.ID, SignatureID: f.sig.ID,
		Number: []string{"13812345678", "13912345678"}[recipient], Text: "【云通科技】" + strings.Repeat("您的订单已发货。", 18),
		MsgFmt: cmpp.FmtUCS2, Channel: f.channel(t, channel), SrcID: "1065900101"}
}

func (f *fixture) write(t *testing.T, atts ...*route.Attempt) (written, refused []*route.Attempt, err error) {
	t.Helper()
	err = pgx.BeginFunc(f.ctx, f.d.Pool(), func(tx pgx.Tx) error {
		var err error
		written, refused, err = route.Write(f.ctx, tx, atts, start, route.Options{})
		return err
	})
	return written, refused, err
}

// TestWriteSegmentsAndReceiptModes: a 3-segment text becomes three submits
// per attempt whose submitIds name the attempt; a per-segment channel asks
// a report for every segment, a message-level channel for the last only.
func TestWriteSegmentsAndReceiptModes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	written, refused, err := f.write(t, f.attempt(t, 0, "cm-a"), f.attempt(t, 1, "cm-b"))
	require.NoError(t, err)
	require.Empty(t, refused)
	require.Len(t, written, 2)
	for _, a := range written {
		require.Len(t, a.Segments, 3)
		cmds := route.Commands(a)
		for k, c := range cmds {
			att, pk := route.AttemptOf(c.SubmitID)
			require.Equal(t, a.ID, att)
			require.Equal(t, k+1, pk)
			wantReg := a.Channel.ReceiptMode == route.PerSegment || k == 2
			require.Equal(t, wantReg, c.RegisteredDelivery == 1, "%s segment %d", a.Channel.Name, k+1)
		}
	}
	require.Equal(t, route.PerSegment, written[0].Channel.ReceiptMode)
	require.Equal(t, route.MessageLevel, written[1].Channel.ReceiptMode)
	var n, reg int
	require.NoError(t, f.d.Pool().QueryRow(f.ctx, `SELECT count(*), count(*) FILTER (WHERE registered) FROM sms_submit`).Scan(&n, &reg))
	require.Equal(t, 6, n)
	require.Equal(t, 4, reg)
	require.Len(t, route.Events(written, ""), 6)
}

// TestWriteRechecks: the SQL re-check refuses an attempt whose channel was
// switched off, or whose signature registration was revoked, after the
// snapshot — alone; the other attempt is written.
func TestWriteRechecks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, sql string }{
		{"channel inactive", `UPDATE sms_channel SET active = false WHERE name = 'cm-b'`},
		{"registration revoked", `UPDATE sms_signature_registration SET state = 'rejected'
			WHERE channel_id = (SELECT id FROM sms_channel WHERE name = 'cm-b')`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			_, err := f.d.Pool().Exec(f.ctx, tc.sql)
			require.NoError(t, err)
			written, refused, err := f.write(t, f.attempt(t, 0, "cm-a"), f.attempt(t, 1, "cm-b"))
			require.NoError(t, err)
			require.Len(t, written, 1)
			require.Equal(t, "cm-a", written[0].Channel.Name)
			require.Len(t, refused, 1)
			require.Equal(t, "cm-b", refused[0].Channel.Name)
			var n int
			require.NoError(t, f.d.Pool().QueryRow(f.ctx, `SELECT count(*) FROM sms_submit`).Scan(&n))
			require.Equal(t, 3, n, "only the written attempt's submits")
		})
	}
}

// TestRetryOnce: a retry names the attempt it retries; a second retry of
// the same attempt is refused by the database, whoever writes it.
func TestRetryOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	written, _, err := f.write(t, f.attempt(t, 0, "cm-a"))
	require.NoError(t, err)
	first := written[0].ID
	retry := func() *route.Attempt {
		a := f.attempt(t, 0, "cm-b")
		a.AttemptNo, a.RetryOf = 2, first
		return a
	}
	written, _, err = f.write(t, retry())
	require.NoError(t, err)
	require.Len(t, written, 1)
	_, _, err = f.write(t, retry())
	require.Error(t, err, "a second retry of one attempt")
}

// TestChoose: a retry leaves out the channels tried; nothing left is not ok.
func TestChoose(t *testing.T) {
	t.Parallel()
	cands := []rules.Candidate{{ChannelID: 1, Weight: 3}, {ChannelID: 2, Weight: 1, Priority: 1}}
	c, ok := route.Choose(cands, nil, 7)
	require.True(t, ok)
	require.EqualValues(t, 1, c.ChannelID, "the first tier")
	c, ok = route.Choose(cands, []int64{1}, 7)
	require.True(t, ok)
	require.EqualValues(t, 2, c.ChannelID)
	_, ok = route.Choose(cands, []int64{1, 2}, 7)
	require.False(t, ok)
}
