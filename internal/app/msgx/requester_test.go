package msgx_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/msgx"
	"github.com/relayhq/relay/internal/app/msgx/sisxml"
	"github.com/relayhq/relay/relayclock"
)

// TestRequesterCompensatesAWrittenRequest simulates a crash between the
// COUTMSGS write and the SENT mark (seed 000 §7.2: compensate, never resend
// unconditionally): the REQT of a PENDING request is already in COUTMSGS, so
// the next Pass marks the request SENT with that row's id and writes nothing.
func TestRequesterCompensatesAWrittenRequest(t *testing.T) {
	b := setup(t)
	clock := relayclock.NewFake(time.Now().UTC().Truncate(time.Second))
	rq := msgx.NewRequester(b.cfg, b.store.Pool(), b.mailbox, clock, quiet())
	r, err := rq.Register(b.ctx, msgx.RequestSchd, "20261201")
	require.NoError(t, err)

	// The crashed send: the row it wrote, exactly as the requester encodes it.
	clock.Advance(time.Second)
	raw := encode(t, &sisxml.Message{
		Meta: sisxml.Meta{SNDR: b.cfg.SystemCode, RCVR: b.cfg.AODBCode, SEQN: r.SEQN, TYPE: "REQT", STYP: "SCHD",
			DTTM: sisWall(b.cfg, clock.Now())},
		Kind: sisxml.KindRequest, Request: &sisxml.Request{Subtype: "SCHD", ODAY: sisxml.Val("20261201")}})
	res, err := b.mailbox.ExecContext(b.ctx, "INSERT INTO COUTMSGS (MSGCONTENT, CREATETIME) VALUES (?, ?)",
		string(raw), clock.Now())
	require.NoError(t, err)
	written, err := res.LastInsertId()
	require.NoError(t, err)
	row, _ := b.request(t, r.ID)
	require.Equal(t, "PENDING", row.State)

	clock.Advance(time.Second)
	sent, expired, err := rq.Pass(b.ctx)
	require.NoError(t, err)
	require.Equal(t, [2]int{1, 0}, [2]int{sent, expired})
	row, _ = b.request(t, r.ID)
	require.Equal(t, "SENT", row.State)
	require.Equal(t, written, *row.OutboxID, "marked with the row already written")
	require.True(t, row.SentAt.Equal(clock.Now()))
	require.Equal(t, 1, b.mailboxCount(t, "COUTMSGS"), "not written twice")

	// Nothing left to send; a request without a written row is written once.
	sent, _, err = rq.Pass(b.ctx)
	require.NoError(t, err)
	require.Zero(t, sent)
	other, err := rq.Register(b.ctx, msgx.RequestSchd, "20261202")
	require.NoError(t, err)
	sent, _, err = rq.Pass(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, sent)
	require.Equal(t, 2, b.mailboxCount(t, "COUTMSGS"))
	row, _ = b.request(t, other.ID)
	require.Equal(t, "SENT", row.State)
	require.NotEqual(t, written, *row.OutboxID)
	m, err := sisxml.Decode([]byte(b.outboxContent(t, *row.OutboxID)))
	require.NoError(t, err)
	require.Equal(t, other.SEQN, m.Meta.SEQN)
	require.Equal(t, sisxml.Val("20261202"), m.Request.ODAY)
}

// TestRequesterRegisterRejectsBadScopes checks that Register refuses, with an
// error naming the type and scope, every request it could never send — before
// anything is stored, so a bad request can never sit PENDING and fail every
// Pass.
func TestRequesterRegisterRejectsBadScopes(t *testing.T) {
	b := setup(t)
	rq := msgx.NewRequester(b.cfg, b.store.Pool(), b.mailbox, relayclock.NewFake(time.Now()), quiet())
	for _, c := range []struct{ typ, scope, want string }{
		{msgx.RequestSchd, "", `scope "" is not an operating day YYYYMMDD`},
		{msgx.RequestSchd, "2026120", `scope "2026120" is not an operating day YYYYMMDD`},
		{msgx.RequestSchd, "2026-12-01", `scope "2026-12-01" is not an operating day YYYYMMDD`},
		{msgx.RequestSchd, "20261301", `scope "20261301" is not an operating day YYYYMMDD`},
		{msgx.RequestSchd, "20260230", `scope "20260230" is not an operating day YYYYMMDD`},
		{msgx.RequestRefd, "", `bad reference type ""`},
		{msgx.RequestRefd, "A|B", `bad reference type "A|B"`},
		{msgx.RequestRefd, " AIRLINE", `request REFD: scope " AIRLINE" cannot be sent`},
		{msgx.RequestRefd, "AIR\x01LINE", `request REFD: scope "AIR\x01LINE" cannot be sent`},
		{"FOO", "20261201", `unknown request type "FOO"`},
		{"schd", "20261201", `unknown request type "schd"`},
	} {
		_, err := rq.Register(b.ctx, c.typ, c.scope)
		require.Error(t, err, "%s %q", c.typ, c.scope)
		require.ErrorContains(t, err, c.want)
	}
	require.Zero(t, b.count(t, "SELECT count(*) FROM req_track"))
	sent, _, err := rq.Pass(b.ctx)
	require.NoError(t, err)
	require.Zero(t, sent)
}

// TestRequesterRegisterExpiresOpenRequest checks the one-open-request rule
// (seed 000 §1.2 REQ_TRACK, §7.2): registering a request of the same type and
// scope expires the open one, PENDING or SENT; other scopes and types are
// untouched; only the open request is sent.
func TestRequesterRegisterExpiresOpenRequest(t *testing.T) {
	b := setup(t)
	clock := relayclock.NewFake(time.Now().UTC().Truncate(time.Second))
	rq := msgx.NewRequester(b.cfg, b.store.Pool(), b.mailbox, clock, quiet())
	first, err := rq.Register(b.ctx, msgx.RequestSchd, "20261201")
	require.NoError(t, err)
	otherDay, err := rq.Register(b.ctx, msgx.RequestSchd, "20261202")
	require.NoError(t, err)
	refd, err := rq.Register(b.ctx, msgx.RequestRefd, "AIRLINE")
	require.NoError(t, err)

	clock.Advance(time.Second)
	second, err := rq.Register(b.ctx, msgx.RequestSchd, "20261201")
	require.NoError(t, err)
	row, _ := b.request(t, first.ID)
	require.Equal(t, "EXPIRED", row.State, "a PENDING request is expired by a newer one")
	require.True(t, row.DoneAt.Equal(clock.Now()))
	require.Nil(t, row.OutboxID, "never sent")
	for _, id := range []int64{otherDay.ID, refd.ID, second.ID} {
		row, _ := b.request(t, id)
		require.Equal(t, "PENDING", row.State, "request %d", id)
	}

	sent, _, err := rq.Pass(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 3, sent, "the expired request is not sent")
	rows, err := b.mailbox.QueryContext(b.ctx, "SELECT MSGCONTENT FROM COUTMSGS ORDER BY ID")
	require.NoError(t, err)
	var seqns []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		m, err := sisxml.Decode([]byte(s))
		require.NoError(t, err)
		seqns = append(seqns, m.Meta.SEQN)
	}
	require.NoError(t, rows.Err())
	require.ElementsMatch(t, []string{otherDay.SEQN, refd.SEQN, second.SEQN}, seqns)

	// A SENT request is expired too by the next registration of its scope.
	clock.Advance(time.Second)
	third, err := rq.Register(b.ctx, msgx.RequestSchd, "20261201")
	require.NoError(t, err)
	row, _ = b.request(t, second.ID)
	require.Equal(t, "EXPIRED", row.State)
	require.NotNil(t, row.SentAt)
	row, _ = b.request(t, third.ID)
	require.Equal(t, "PENDING", row.State)
	require.Equal(t, 1, b.count(t, "SELECT count(*) FROM req_track WHERE scope = '20261201' AND state IN ('PENDING', 'SENT')"))
	row, _ = b.request(t, otherDay.ID)
	require.Equal(t, "SENT", row.State, "another day's request stays open")

	// The timeout expires SENT requests sent before it, not younger ones.
	clock.Advance(b.cfg.RequestTimeout)
	sent, expired, err := rq.Pass(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, sent) // third
	require.Equal(t, 2, expired, "otherDay and refd, sent %s ago", b.cfg.RequestTimeout+time.Second)
	row, _ = b.request(t, third.ID)
	require.Equal(t, "SENT", row.State)
}
