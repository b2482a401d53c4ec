package cmppconn

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/relayhq/relay/internal/testlog"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
)

var versions = []cmpp.Version{cmpp.V20, cmpp.V30}

// dial dials cfg and closes the connection at cleanup.
func dial(t *testing.T, cfg Config) *Conn {
	t.Helper()
	c, err := Dial(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // close at once
		_ = c.Close(ctx)
	})
	return c
}

// submitted is one Submit call's return.
type submitted struct {
	res SubmitResult
	err error
}

// submitAll runs n Submits at once, content prefix+i, and returns their
// results by i.
func submitAll(ctx context.Context, submit func(context.Context, *cmpp.Submit) (SubmitResult, error), prefix string, n int) []submitted {
	out := make([]submitted, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, err := submit(ctx, testSubmit(fmt.Sprintf("%s%d", prefix, i)))
			out[i] = submitted{res, err}
		})
	}
	wg.Wait()
	return out
}

// goSubmit starts one Submit and returns where its result will come.
func goSubmit(ctx context.Context, submit func(context.Context, *cmpp.Submit) (SubmitResult, error), text string) <-chan submitted {
	ch := make(chan submitted, 1)
	go func() {
		res, err := submit(ctx, testSubmit(text))
		ch <- submitted{res, err}
	}()
	return ch
}

// TestSubmit500AnsweredInstantly is seed 002 §10.12's regression: 500
// concurrent Submits that the ISMG answers as soon as it reads them, on 2.0
// and 3.0, in order, out of order, and with a response for a Sequence_Id
// nobody used in front of each. Every Submit must get its own Msg_Id (the
// ISMG derives it from the Submit's content) and none may be lost.
func TestSubmit500AnsweredInstantly(t *testing.T) {
	t.Parallel()
	const n = 500
	modes := []struct {
		name string
		cfg  ismgConfig
	}{
		{"in order", ismgConfig{mode: answerNow}},
		{"reversed in fours", ismgConfig{mode: answerReversed, group: 4}},
		{"unknown sequence first", ismgConfig{mode: answerNow, unknownSeq: true}},
	}
	for _, v := range versions {
		for _, m := range modes {
			t.Run(v.String()+"/"+m.name, func(t *testing.T) {
				t.Parallel()
				cfg := m.cfg
				cfg.version = v
				srv := startISMG(t, cfg)
				c := dial(t, srv.clientConfig(newTestClock()))

				// A guard only: a lost response shows as Unknown instead of a hang.
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				results := submitAll(ctx, c.Submit, "m-", n)
				seqs := map[uint32]bool{}
				for i, r := range results {
					require.NoError(t, r.err, "submit %d", i)
					require.Equal(t, OutcomeAccepted, r.res.Outcome)
					require.Equal(t, msgIDFor(fmt.Appendf(nil, "m-%d", i)), r.res.MsgID, "submit %d got another's Msg_Id", i)
					require.False(t, seqs[r.res.Seq], "seq %d used twice", r.res.Seq)
					seqs[r.res.Seq] = true
				}
				got, _ := srv.counts()
				require.Equal(t, n, got)
				st := c.Stats()
				require.EqualValues(t, n, st.Accepted)
				require.Zero(t, st.InFlight)
				require.Zero(t, st.Unknown+st.NotSent+st.Late)
				if cfg.unknownSeq {
					require.EqualValues(t, n, st.Unmatched)
				} else {
					require.Zero(t, st.Unmatched)
				}
			})
		}
	}
}

// TestOutcomesFromResult: Result 0 accepts, 8 is flow control, others
// reject; only acceptance returns a nil error.
func TestOutcomesFromResult(t *testing.T) {
	t.Parallel()
	srv := startISMG(t, ismgConfig{})
	c := dial(t, srv.clientConfig(newTestClock()))
	ctx := context.Background()

	res, err := c.Submit(ctx, testSubmit("throttle-1"))
	require.ErrorIs(t, err, ErrFlowControl)
	require.Equal(t, OutcomeFlowControl, res.Outcome)
	require.EqualValues(t, 8, res.Result)

	res, err = c.Submit(ctx, testSubmit("reject-1"))
	require.ErrorIs(t, err, ErrRejected)
	require.Equal(t, OutcomeRejected, res.Outcome)
	require.EqualValues(t, 13, res.Result)
	require.Contains(t, err.Error(), "Result 13 (Dest_terminal_Id error)")
	require.NotContains(t, err.Error(), "13800138000")

	// A Submit that does not encode never leaves: NotSent, the codec's class kept.
	bad := testSubmit("x")
	bad.DestTerminalIDs = nil
	res, err = c.Submit(ctx, bad)
	require.ErrorIs(t, err, ErrNotSent)
	require.ErrorIs(t, err, cmpp.ErrInvalid)
	require.Equal(t, OutcomeNotSent, res.Outcome)
	require.Zero(t, c.InFlight())
}

// fillWindow starts n > Window Submits against an ISMG that holds its
// answers and returns once the window is full and the rest wait for a slot.
func fillWindow(t *testing.T, c *Conn, srv *testISMG, prefix string, n int) <-chan []submitted {
	t.Helper()
	results := make(chan []submitted, 1)
	go func() { results <- submitAll(context.Background(), c.Submit, prefix, n) }()
	require.Eventually(t, func() bool {
		got, _ := srv.counts()
		return got == WindowDefault && c.slotWaiters.Load() == int64(n-WindowDefault)
	}, 10*time.Second, time.Millisecond)
	return results
}

// TestWindowBlocksWhenFull: with the ISMG holding every answer, exactly
// Window Submits go out and the rest wait; each answer lets one more go.
func TestWindowBlocksWhenFull(t *testing.T) {
	t.Parallel()
	srv := startISMG(t, ismgConfig{mode: answerHold})
	c := dial(t, srv.clientConfig(newTestClock()))
	const n = 20
	results := fillWindow(t, c, srv, "w-", n)
	got, _ := srv.counts()
	require.Equal(t, WindowDefault, got, "exactly a window's worth in flight")
	require.Equal(t, WindowDefault, c.InFlight())

	require.Equal(t, 1, srv.release(1))
	require.Eventually(t, func() bool {
		got, _ := srv.counts()
		return got == WindowDefault+1 && c.slotWaiters.Load() == n-WindowDefault-1
	}, 10*time.Second, time.Millisecond)
	require.Equal(t, WindowDefault, c.InFlight())

	var all []submitted
	require.Eventually(t, func() bool {
		srv.release(-1)
		select {
		case all = <-results:
			return true
		default:
			return false
		}
	}, 10*time.Second, time.Millisecond)
	for i, r := range all {
		require.NoError(t, r.err)
		require.Equal(t, msgIDFor(fmt.Appendf(nil, "w-%d", i)), r.res.MsgID)
	}
	require.Zero(t, c.InFlight())
}

// TestResponseTimeoutIsUnknown: no SubmitResp within ResponseTimeout makes
// the outcome Unknown (never failed), frees the slot, and the SubmitResp
// that comes later is reported as late with its Msg_Id.
func TestResponseTimeoutIsUnknown(t *testing.T) {
	t.Parallel()
	srv := startISMG(t, ismgConfig{mode: answerHold})
	clock := newTestClock()
	cfg := srv.clientConfig(clock)
	cfg.ResponseTimeout = 30 * time.Second
	lates := make(chan LateResponse, 1)
	cfg.LateResponseFunc = func(l LateResponse) { lates <- l }
	c := dial(t, cfg)

	ch := goSubmit(context.Background(), c.Submit, "t-1")
	clock.waitAfters(t, 30*time.Second, 1)
	clock.Advance(30 * time.Second)
	r := <-ch
	require.ErrorIs(t, r.err, ErrOutcomeUnknown)
	require.ErrorIs(t, r.err, ErrResponseTimeout)
	require.NotErrorIs(t, r.err, ErrNotSent)
	require.Equal(t, OutcomeUnknown, r.res.Outcome)
	require.Zero(t, c.InFlight())

	require.Eventually(t, func() bool { return srv.release(-1) == 1 }, 10*time.Second, time.Millisecond)
	late := <-lates
	require.Equal(t, LateResponse{ConnID: c.ID(), Seq: r.res.Seq, MsgID: msgIDFor([]byte("t-1"))}, late)
	st := c.Stats()
	require.EqualValues(t, 1, st.Late)
	require.EqualValues(t, 1, st.Unknown)
}

// TestContextEndsSubmit: ctx ending while waiting for a slot gives NotSent;
// ending after the Submit was registered gives Unknown.
func TestContextEndsSubmit(t *testing.T) {
	t.Parallel()
	srv := startISMG(t, ismgConfig{mode: answerHold})
	cfg := srv.clientConfig(newTestClock())
	cfg.Window = 1
	c := dial(t, cfg)

	ctx1, cancel1 := context.WithCancel(context.Background())
	first := goSubmit(ctx1, c.Submit, "c-1")
	require.Eventually(t, func() bool { got, _ := srv.counts(); return got == 1 }, 10*time.Second, time.Millisecond)

	ctx2, cancel2 := context.WithCancel(context.Background())
	second := goSubmit(ctx2, c.Submit, "c-2")
	require.Eventually(t, func() bool { return c.slotWaiters.Load() == 1 }, 10*time.Second, time.Millisecond)
	cancel2()
	r := <-second
	require.ErrorIs(t, r.err, ErrNotSent)
	require.ErrorIs(t, r.err, context.Canceled)
	require.Zero(t, r.res.Seq)

	cancel1()
	r = <-first
	require.ErrorIs(t, r.err, ErrOutcomeUnknown)
	require.ErrorIs(t, r.err, context.Canceled)
	require.Zero(t, c.InFlight())
}

// TestConnectionLossMakesPendingUnknown: when the ISMG drops the
// connection, every Submit it read is Unknown, every Submit still waiting
// for a slot is NotSent, and none is reported as failed.
func TestConnectionLossMakesPendingUnknown(t *testing.T) {
	t.Parallel()
	for _, v := range versions {
		t.Run(v.String(), func(t *testing.T) {
			t.Parallel()
			srv := startISMG(t, ismgConfig{version: v, mode: answerHold})
			c := dial(t, srv.clientConfig(newTestClock()))
			const n = 20
			results := fillWindow(t, c, srv, "l-", n)

			srv.dropAll()
			var unknown, notSent int
			for _, r := range <-results {
				require.ErrorIs(t, r.err, ErrConnLost)
				switch r.res.Outcome {
				case OutcomeUnknown:
					unknown++
					require.ErrorIs(t, r.err, ErrOutcomeUnknown)
					require.NotZero(t, r.res.Seq)
				case OutcomeNotSent:
					notSent++
					require.ErrorIs(t, r.err, ErrNotSent)
				default:
					t.Fatalf("outcome %s after a loss", r.res.Outcome)
				}
			}
			require.Equal(t, WindowDefault, unknown)
			require.Equal(t, n-WindowDefault, notSent)
			require.Zero(t, c.InFlight())
			<-c.Done()
			require.ErrorIs(t, c.Err(), ErrConnLost)

			_, err := c.Submit(context.Background(), testSubmit("after"))
			require.ErrorIs(t, err, ErrNotSent)
			require.ErrorIs(t, err, ErrConnClosed)
		})
	}
}

// dialFaulty dials through a faultConn.
func dialFaulty(t *testing.T, cfg Config) (*Conn, *faultConn) {
	t.Helper()
	var fc *faultConn
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		fc = &faultConn{Conn: nc, failAfter: -1}
		return fc, nil
	}
	return dial(t, cfg), fc
}

// TestWriteErrorBeforeFirstByte: a write that fails before any byte leaves
// makes its Submit NotSent and frees the slot; the connection closes.
func TestWriteErrorBeforeFirstByte(t *testing.T) {
	t.Parallel()
	srv := startISMG(t, ismgConfig{})
	c, fc := dialFaulty(t, srv.clientConfig(newTestClock()))
	_, err := c.Submit(context.Background(), testSubmit("ok"))
	require.NoError(t, err)

	fc.arm(nil, 0)
	res, err := c.Submit(context.Background(), testSubmit("lost"))
	require.ErrorIs(t, err, ErrNotSent)
	require.ErrorIs(t, err, errInjected)
	require.Equal(t, OutcomeNotSent, res.Outcome)
	require.NotZero(t, res.Seq)
	require.Zero(t, c.InFlight())
	<-c.Done()
	require.ErrorIs(t, c.Err(), ErrConnLost)
	require.EqualValues(t, 1, c.Stats().NotSent)
}

// TestPartialWriteSettlesByOffset: one write carries three queued Submits
// and fails part-way through the second: the first and second (begun) are
// Unknown, the third (not begun) is NotSent, and so is nothing else.
func TestPartialWriteSettlesByOffset(t *testing.T) {
	t.Parallel()
	srv := startISMG(t, ismgConfig{mode: answerHold})
	c, fc := dialFaulty(t, srv.clientConfig(newTestClock()))
	ctx := context.Background()
	pkt, err := cmpp.AppendPacket(nil, c.Version(), 1, testSubmit("p-b"))
	require.NoError(t, err)

	gate := make(chan struct{})
	fc.arm(gate, -1)
	a := goSubmit(ctx, c.Submit, "p-a") // its write waits at the gate
	require.Eventually(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.pending) == 1 && len(c.out) == 0 },
		10*time.Second, time.Millisecond)
	b := goSubmit(ctx, c.Submit, "p-b")
	require.Eventually(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.outReqs) == 1 }, 10*time.Second, time.Millisecond)
	cc := goSubmit(ctx, c.Submit, "p-c")
	require.Eventually(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.outReqs) == 2 }, 10*time.Second, time.Millisecond)
	d := goSubmit(ctx, c.Submit, "p-d")
	require.Eventually(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.outReqs) == 3 }, 10*time.Second, time.Millisecond)

	fc.arm(nil, len(pkt)+10) // the next write stops 10 bytes into p-c
	close(gate)
	for _, ch := range []<-chan submitted{a, b, cc} {
		r := <-ch
		require.Equal(t, OutcomeUnknown, r.res.Outcome, "%v", r.err)
		require.ErrorIs(t, r.err, ErrOutcomeUnknown)
	}
	r := <-d
	require.Equal(t, OutcomeNotSent, r.res.Outcome)
	require.ErrorIs(t, r.err, errInjected)
	require.Zero(t, c.InFlight())
	require.Eventually(t, func() bool { got, _ := srv.counts(); return got == 2 }, 10*time.Second, time.Millisecond,
		"the ISMG reads p-a and p-b whole")
}

// TestActiveTest drives the keep-alive on a fake clock: after C of silence
// an ActiveTest goes; answered, the next waits C again; unanswered, it is
// sent again every T, N times in all, and the link is then closed as dead
// with the Submit in flight Unknown.
func TestActiveTest(t *testing.T) {
	t.Parallel()
	const (
		C = ActiveTestIntervalDefault
		T = ActiveTestTimeoutDefault
		N = ActiveTestTriesDefault
	)
	srv := startISMG(t, ismgConfig{mode: answerHold})
	clock := newTestClock()
	cfg := srv.clientConfig(clock)
	cfg.ResponseTimeout = time.Hour
	c := dial(t, cfg)

	clock.waitAfters(t, C, 1)
	clock.Advance(C)
	require.Eventually(t, func() bool { return srv.activeTestCount() == 1 }, 10*time.Second, time.Millisecond)
	clock.waitAfters(t, C, 2) // answered: idle again from the answer

	srv.setSilentActiveTest(true)
	held := goSubmit(context.Background(), c.Submit, "k-1")
	require.Eventually(t, func() bool { got, _ := srv.counts(); return got == 1 }, 10*time.Second, time.Millisecond)
	// The Submit was read but not answered: it is not traffic from the ISMG,
	// so the idle timer set at the last answer still runs out at C.
	tBase := clock.afterCount(T)
	clock.Advance(C)
	for try := 1; try <= N; try++ {
		require.Eventually(t, func() bool { return srv.activeTestCount() == 1+try }, 10*time.Second, time.Millisecond)
		clock.waitAfters(t, T, tBase+try)
		require.NoError(t, c.Err(), "closed before try %d timed out", try)
		clock.Advance(T)
	}
	<-c.Done()
	require.ErrorIs(t, c.Err(), ErrLinkDead)
	require.Equal(t, 1+N, srv.activeTestCount())
	r := <-held
	require.Equal(t, OutcomeUnknown, r.res.Outcome)
	require.ErrorIs(t, r.err, ErrLinkDead)
	require.EqualValues(t, N, c.Stats().ActiveTestsUnanswered)
}

// TestISMGActiveTestAnswered: the client answers the ISMG's ActiveTest with
// the same Sequence_Id.
func TestISMGActiveTestAnswered(t *testing.T) {
	t.Parallel()
	srv := startISMG(t, ismgConfig{})
	dial(t, srv.clientConfig(newTestClock()))
	srv.conn(0).send(77, &cmpp.ActiveTest{})
	require.Eventually(t, func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return len(srv.atResps) == 1 && srv.atResps[0] == 77
	}, 10*time.Second, time.Millisecond)
}

// TestDeliver: a Deliver goes to DeliverFunc and is answered only when it
// returns, with its result and the Deliver's own Msg_Id; a slow DeliverFunc
// does not hold up SubmitResps; beyond DeliverConcurrency, and without a
// DeliverFunc, Delivers are answered 8 at once.
func TestDeliver(t *testing.T) {
	t.Parallel()
	for _, v := range versions {
		t.Run(v.String(), func(t *testing.T) {
			t.Parallel()
			srv := startISMG(t, ismgConfig{version: v})
			cfg := srv.clientConfig(newTestClock())
			cfg.DeliverConcurrency = 1
			got := make(chan *cmpp.Deliver, 1)
			release := make(chan uint32)
			cfg.DeliverFunc = func(ctx context.Context, d *cmpp.Deliver) uint32 {
				got <- d
				return <-release
			}
			c := dial(t, cfg)

			rep := cmpp.Report{MsgID: msgIDFor([]byte("r")), Stat: "DELIVRD", SubmitTime: "2603020830", DoneTime: "2603020831", DestTerminalID: "13800138000"}
			content, err := rep.AppendTo(nil, v)
			require.NoError(t, err)
			d := &cmpp.Deliver{MsgID: 4242, DestID: "106900001", ServiceID: "MXT0001", SrcTerminalID: "13800138000",
				RegisteredDelivery: 1, MsgContent: content}
			srv.conn(0).send(500, d)
			in := <-got
			require.EqualValues(t, 4242, in.MsgID)
			var gotRep cmpp.Report
			require.NoError(t, gotRep.Decode(in.MsgContent, v))
			require.Equal(t, rep, gotRep)

			// The handler is busy: Submits still get their answers, and a
			// second Deliver is answered 8 at once.
			_, err = c.Submit(context.Background(), testSubmit("d-1"))
			require.NoError(t, err)
			d2 := *d
			d2.MsgID = 4343
			srv.conn(0).send(501, &d2)
			require.Equal(t, seqPacket[cmpp.DeliverResp]{501, cmpp.DeliverResp{MsgID: 4343, Result: ResultFlowControl}},
				srv.waitDeliverResp(t, 0))

			release <- 0
			require.Equal(t, seqPacket[cmpp.DeliverResp]{500, cmpp.DeliverResp{MsgID: 4242, Result: 0}},
				srv.waitDeliverResp(t, 1))
			st := c.Stats()
			require.EqualValues(t, 1, st.Delivers)
			require.EqualValues(t, 1, st.DeliversDeferred)
		})
	}
}

// TestDeliverWithoutHandler: no DeliverFunc, every Deliver answered 8.
func TestDeliverWithoutHandler(t *testing.T) {
	t.Parallel()
	srv := startISMG(t, ismgConfig{})
	dial(t, srv.clientConfig(newTestClock()))
	srv.conn(0).send(9, &cmpp.Deliver{MsgID: 7, MsgContent: []byte("hi")})
	require.Equal(t, seqPacket[cmpp.DeliverResp]{9, cmpp.DeliverResp{MsgID: 7, Result: 8}}, srv.waitDeliverResp(t, 0))
}

// TestLogin: refusals are classified, a gateway that cannot prove the
// secret is refused, and a login that gets no answer gives up after T.
func TestLogin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("status", func(t *testing.T) {
		t.Parallel()
		for status, text := range map[uint32]string{1: "bad structure", 2: "illegal source address", 3: "authentication failed", 4: "version too high", 9: "other error"} {
			srv := startISMG(t, ismgConfig{loginStatus: status})
			_, err := Dial(ctx, srv.clientConfig(newTestClock()))
			require.ErrorIs(t, err, ErrLoginRefused)
			var le *LoginError
			require.ErrorAs(t, err, &le)
			require.Equal(t, status, le.Status)
			require.Equal(t, status <= 4, le.Permanent())
			require.Contains(t, err.Error(), text)
		}
	})
	t.Run("wrong secret", func(t *testing.T) {
		t.Parallel()
		srv := startISMG(t, ismgConfig{})
		cfg := srv.clientConfig(newTestClock())
		cfg.Secret = "wrong"
		_, err := Dial(ctx, cfg)
		var le *LoginError
		require.ErrorAs(t, err, &le)
		require.EqualValues(t, cmpp.ConnectAuthFailed, le.Status)
		require.NotContains(t, err.Error(), "wrong")
	})
	t.Run("ISMG authenticator", func(t *testing.T) {
		t.Parallel()
		srv := startISMG(t, ismgConfig{badAuth: true})
		_, err := Dial(ctx, srv.clientConfig(newTestClock()))
		require.ErrorIs(t, err, ErrISMGAuth)
		require.NotContains(t, err.Error(), testSecret)
	})
	t.Run("other layout", func(t *testing.T) {
		t.Parallel()
		srv := startISMG(t, ismgConfig{version: cmpp.V20})
		cfg := srv.clientConfig(newTestClock())
		cfg.Version = cmpp.V30
		_, err := Dial(ctx, cfg)
		require.ErrorIs(t, err, ErrProtocol)
	})
	t.Run("no answer", func(t *testing.T) {
		t.Parallel()
		srv := startISMG(t, ismgConfig{noLoginAnswer: true})
		clock := newTestClock()
		errc := make(chan error, 1)
		go func() {
			_, err := Dial(ctx, srv.clientConfig(clock))
			errc <- err
		}()
		clock.waitAfters(t, ActiveTestTimeoutDefault, 1)
		clock.Advance(ActiveTestTimeoutDefault)
		require.ErrorIs(t, <-errc, ErrLoginTimeout)
	})
	t.Run("config", func(t *testing.T) {
		t.Parallel()
		_, err := Dial(ctx, Config{Addr: "127.0.0.1:1", Version: cmpp.V30, SourceAddr: testSPID})
		require.ErrorContains(t, err, "Secret is required")
		cfg := Config{Addr: "x", Version: cmpp.V30, SourceAddr: testSPID, Secret: "hidden"}
		require.NotContains(t, cfg.String(), "hidden")
		require.NotContains(t, fmt.Sprintf("%#v", cfg), "hidden")
	})
}

// TestRateLimit: with 10 Submits/s, one passes at once and ten more for
// each second the clock moves.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	srv := startISMG(t, ismgConfig{})
	clock := newTestClock()
	cfg := srv.clientConfig(clock)
	cfg.RateLimit = 10
	c := dial(t, cfg)
	const n = 25
	results := make(chan []submitted, 1)
	go func() { results <- submitAll(context.Background(), c.Submit, "r-", n) }()
	stepRateLimit(t, clock, srv, c.limit, n, 1, 11, 21, 25)
	for _, r := range <-results {
		require.NoError(t, r.err)
	}
}

// stepRateLimit checks that wants[0] of n Submits reach the ISMG at once
// and the rest wait in b, then moves the clock one second at a time and
// checks wants[1], wants[2] … likewise.
func stepRateLimit(t *testing.T, clock *testClock, srv *testISMG, b *tokenBucket, n int, wants ...int) {
	t.Helper()
	for i, want := range wants {
		if i > 0 {
			clock.Advance(time.Second)
		}
		require.Eventually(t, func() bool {
			got, _ := srv.counts()
			return got == want && b.waiting.Load() == int64(n-want)
		}, 10*time.Second, time.Millisecond, "want %d through", want)
	}
}

// TestISMGTerminate: the ISMG's Terminate is answered, the connection
// closes, and the Submit in flight is Unknown.
func TestISMGTerminate(t *testing.T) {
	t.Parallel()
	srv := startISMG(t, ismgConfig{mode: answerHold})
	c := dial(t, srv.clientConfig(newTestClock()))
	held := goSubmit(context.Background(), c.Submit, "x-1")
	require.Eventually(t, func() bool { got, _ := srv.counts(); return got == 1 }, 10*time.Second, time.Millisecond)
	srv.conn(0).send(900, &cmpp.Terminate{})
	r := <-held
	require.Equal(t, OutcomeUnknown, r.res.Outcome)
	require.ErrorIs(t, r.err, ErrTerminated)
	<-c.Done()
	require.ErrorIs(t, c.Err(), ErrTerminated)
	require.Eventually(t, func() bool { srv.mu.Lock(); defer srv.mu.Unlock(); return srv.termResps == 1 }, 10*time.Second, time.Millisecond)
}

// TestClose: Close waits for the Submit in flight, then exchanges
// Terminate; afterwards Submits are NotSent.
func TestClose(t *testing.T) {
	t.Parallel()
	srv := startISMG(t, ismgConfig{mode: answerHold})
	c, err := Dial(context.Background(), srv.clientConfig(newTestClock()))
	require.NoError(t, err)
	held := goSubmit(context.Background(), c.Submit, "z-1")
	require.Eventually(t, func() bool { got, _ := srv.counts(); return got == 1 }, 10*time.Second, time.Millisecond)

	closed := make(chan error, 1)
	go func() { closed <- c.Close(context.Background()) }()
	require.Eventually(t, func() bool { return !c.accepting() }, 10*time.Second, time.Millisecond)
	_, err = c.Submit(context.Background(), testSubmit("z-2"))
	require.ErrorIs(t, err, ErrNotSent)
	require.ErrorIs(t, err, ErrClosed)
	srv.mu.Lock()
	require.Zero(t, srv.terminates, "Terminate before the Submit in flight was answered")
	srv.mu.Unlock()

	srv.release(-1)
	r := <-held
	require.NoError(t, r.err)
	require.NoError(t, <-closed)
	srv.mu.Lock()
	require.Equal(t, 1, srv.terminates)
	srv.mu.Unlock()
	require.ErrorIs(t, c.Err(), ErrClosed)
}

// lockedBuffer is a bytes.Buffer for a logger written from several
// goroutines.
type lockedBuffer = testlog.Buffer

// TestUnmatchedResponseLogged: a response for a Sequence_Id nobody used is
// logged with its number and dropped; the log holds no content or numbers.
func TestUnmatchedResponseLogged(t *testing.T) {
	t.Parallel()
	srv := startISMG(t, ismgConfig{unknownSeq: true})
	cfg := srv.clientConfig(newTestClock())
	var logs lockedBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	c := dial(t, cfg)
	res, err := c.Submit(context.Background(), testSubmit("secret-text"))
	require.NoError(t, err)
	require.Contains(t, logs.String(), fmt.Sprintf("response matches no request\" conn=%d command=SUBMIT_RESP seq=%d", c.ID(), res.Seq+1_000_000))
	require.NotContains(t, logs.String(), "secret-text")
	require.NotContains(t, logs.String(), "13800138000")
	require.NotContains(t, logs.String(), testSecret)
}
