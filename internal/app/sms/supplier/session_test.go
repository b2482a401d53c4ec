package supplier_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/internal/app/sms/supplier"
	"github.com/relayhq/relay/internal/app/sms/supplier/suppliertest"
	"github.com/relayhq/relay/relayclock"
)

// TestKeepalive: after C idle the server sends ActiveTest, again every T
// while unanswered, and drops the link after N; an answer starts over.
func TestKeepalive(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *supplier.Config) {
		c.Keepalive = 30 * time.Second
		c.ResponseTimeout = 10 * time.Second
		c.Tries = 3
	})
	p := b.login(t, spBoth, secretBoth, cmpp.V30)
	b.stats(t, func(s supplier.Stats) bool { return s.Scheduled == 2 }) // login timeout, keep-alive

	b.clock.Advance(30 * time.Second)
	h, pkt, err := p.Read()
	require.NoError(t, err)
	require.Equal(t, cmpp.CmdActiveTest, h.CommandID)
	require.NoError(t, p.Answer(h, pkt)) // answered: C starts over from here
	_, err = p.Send(&cmpp.ActiveTest{})  // and once the server has read the answer:
	require.NoError(t, err)
	next(t, p, cmpp.CmdActiveTestResp)

	for i, step := range []time.Duration{30 * time.Second, 10 * time.Second, 10 * time.Second} {
		b.clock.Advance(step)
		h, _, err := p.Read()
		require.NoError(t, err)
		require.Equal(t, cmpp.CmdActiveTest, h.CommandID, "try %d", i+1) // not answered
		b.stats(t, func(s supplier.Stats) bool { return s.ActiveTestsSent == int64(2+i) })
	}
	b.clock.Advance(10 * time.Second)
	b.closed(t, p)
	require.Equal(t, int64(1), b.stats(t, func(s supplier.Stats) bool { return s.Connections == 0 }).Drops)
}

// TestActiveTestQueryCancel: the server answers the SP's ActiveTest, Query
// (the account's counters) and Cancel (nothing left to cancel).
func TestActiveTestQueryCancel(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	p := b.login(t, spBoth, secretBoth, cmpp.V30)
	s := suppliertest.Submit(spBoth, "13800138000", "q", 0)
	s.RegisteredDelivery = 0
	id := submitOK(t, p, s)

	seq, err := p.Send(&cmpp.ActiveTest{})
	require.NoError(t, err)
	h, _ := next(t, p, cmpp.CmdActiveTestResp)
	require.Equal(t, seq, h.SequenceID)

	_, err = p.Send(&cmpp.Query{Time: "20260920"})
	require.NoError(t, err)
	_, pkt := next(t, p, cmpp.CmdQueryResp)
	q := pkt.(*cmpp.QueryResp)
	require.Equal(t, "20260920", q.Time)
	require.Equal(t, uint32(1), q.MTTLMsg)
	require.Equal(t, uint32(1), q.MTScs)

	_, err = p.Send(&cmpp.Cancel{MsgID: id})
	require.NoError(t, err)
	_, pkt = next(t, p, cmpp.CmdCancelResp)
	require.Equal(t, uint32(1), pkt.(*cmpp.CancelResp).SuccessID)
}

// TestTerminate: the SP's Terminate is answered and the link closed; the
// server's Close sends Terminate to every peer first.
func TestTerminate(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	p := b.login(t, spBoth, secretBoth, cmpp.V30)
	seq, err := p.Send(&cmpp.Terminate{})
	require.NoError(t, err)
	h, _ := next(t, p, cmpp.CmdTerminateResp)
	require.Equal(t, seq, h.SequenceID)
	b.closed(t, p)

	clock := relayclock.NewFake(start)
	srv, err := supplier.New(supplier.Config{Accounts: []supplier.Account{{SourceAddr: spBoth, Secret: secretBoth}}, Clock: clock})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), ln) }()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	q, err := suppliertest.Dial(ctx, ln.Addr().String())
	require.NoError(t, err)
	defer q.Close()
	resp, err := q.Login(spBoth, secretBoth, cmpp.V20, clock.Now())
	require.NoError(t, err)
	require.Zero(t, resp.Status)
	closeErr := make(chan error, 1)
	go func() { closeErr <- srv.Close() }()
	h, pkt, err := q.Read()
	require.NoError(t, err)
	require.Equal(t, cmpp.CmdTerminate, h.CommandID)
	require.NoError(t, q.Answer(h, pkt))
	require.NoError(t, <-closeErr)
	require.NoError(t, <-done)
	require.ErrorIs(t, srv.Serve(context.Background(), ln), supplier.ErrServerClosed)
}
