package gateway_test

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/gateway"
	"github.com/relayhq/relay/internal/app/sms/supplier"
)

func TestSubmitsOnceEach(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g, stop := b.run(t)
	const n = 60
	for i := range n {
		b.push(t, command(uint64(1000+i)).Values())
	}
	res := b.waitResults(t, n)
	// Every Submit asked for a report; the supplier sends one per Msg_Id.
	require.Eventually(t, func() bool {
		l, err := b.rdb.XLen(b.ctx, b.cfg.ReportStream).Result()
		return err == nil && l >= n
	}, 20*time.Second, 5*time.Millisecond)
	stop()
	require.Len(t, res, n)
	reports, err := b.rdb.XRange(b.ctx, b.cfg.ReportStream, "-", "+").Result()
	require.NoError(t, err)
	msgIDs := map[string]bool{}
	for _, r := range res {
		msgIDs[strconv.FormatUint(r.MsgID, 10)] = true
	}
	for _, m := range reports {
		require.Equal(t, "report", m.Values["kind"])
		require.Equal(t, "DELIVRD", m.Values["stat"])
		require.True(t, msgIDs[m.Values["msg_id"].(string)], "a report for a Msg_Id of a result")
		require.Equal(t, "report:"+channelName+":"+m.Values["msg_id"].(string)+":DELIVRD", m.Values["event_id"])
	}
	seen := map[string]bool{}
	for _, r := range res {
		require.Equal(t, gateway.StateAccepted, r.State, r.Result)
		require.NotZero(t, r.MsgID)
		require.Equal(t, gateway.SubmitEventID(r.SubmitID), r.EventID)
		require.False(t, seen[r.EventID], "result %s twice", r.EventID)
		seen[r.EventID] = true
	}
	c := b.counts(t)
	require.Equal(t, n, c.Submits)
	for i := range n {
		require.Equal(t, 1, c.ByKey[strconv.Itoa(1000+i)])
	}
	require.Empty(t, c.Duplicates())
	require.Zero(t, b.pending(t))
	st := g.Stats()
	require.EqualValues(t, n, st.Accepted)
	require.EqualValues(t, n, st.Submits)

	// The same counters as Prometheus metrics.
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(g.Collector()))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "{" + l.GetValue() + "}"
			}
			got[name] = m.GetCounter().GetValue()
		}
	}
	require.InDelta(t, float64(n), got["relay_sms_gateway_submits_total"], 0, "%v", got)
	require.InDelta(t, float64(n), got["relay_sms_gateway_outcomes_total{accepted}"], 0, "%v", got)
	require.InDelta(t, float64(n), got["relay_sms_gateway_results_total"], 0, "%v", got)
	require.InDelta(t, 0, got["relay_sms_gateway_commands_total{duplicate}"], 0, "%v", got)
}

func TestDuplicateCommandSubmittedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, stop := b.run(t)
	cmd := command(77)
	b.push(t, cmd.Values())
	b.push(t, cmd.Values())
	require.Len(t, b.waitResults(t, 2), 2)
	// A third copy after both settled: re-emitted from PostgreSQL.
	b.push(t, cmd.Values())
	res := b.waitResults(t, 3)
	stop()
	require.Len(t, res, 3)
	for _, r := range res {
		require.Equal(t, res[0], r, "every copy of the result is the same event")
	}
	require.Equal(t, gateway.StateAccepted, res[0].State)
	c := b.counts(t)
	require.Equal(t, 1, c.Submits)
	require.Equal(t, 1, c.ByKey["77"])
	require.Zero(t, b.pending(t))
}

func TestDeadConsumerPendingClaimedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.SubmitTimeout = 250 * time.Microsecond // on the fake clock, never reached
	b.cfg.StaleClaim = 500 * time.Microsecond
	b.cfg.MinIdle = time.Millisecond // Redis's own clock: the dead consumer's entry is idle at once
	require.NoError(t, b.rdb.XGroupCreateMkStream(b.ctx, b.cfg.CommandStream, gateway.GroupDefault, "0").Err())
	b.push(t, command(5).Values())
	// The dead gateway reads it and never acks.
	got, err := b.rdb.XReadGroup(b.ctx, &redis.XReadGroupArgs{Group: gateway.GroupDefault, Consumer: "dead",
		Streams: []string{b.cfg.CommandStream, ">"}, Count: 10, Block: -1}).Result()
	require.NoError(t, err)
	require.Len(t, got[0].Messages, 1)
	require.Eventually(t, func() bool { // idle past MinIdle (Redis time)
		p, err := b.rdb.XPendingExt(b.ctx, &redis.XPendingExtArgs{Stream: b.cfg.CommandStream,
			Group: gateway.GroupDefault, Start: "-", End: "+", Count: 1}).Result()
		return err == nil && len(p) == 1 && p[0].Idle > 2*time.Millisecond
	}, 5*time.Second, time.Millisecond)

	g, stop := b.run(t)
	res := b.waitResults(t, 1)
	stop()
	require.Len(t, res, 1)
	require.Equal(t, gateway.StateAccepted, res[0].State)
	require.EqualValues(t, 1, g.Stats().Claimed)
	require.Equal(t, 1, b.counts(t).ByKey["5"])
	require.Zero(t, b.pending(t))
}

func TestStaleClaimIsUnknownNotResubmitted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A gateway claimed submitId 9 an hour ago and died before the outcome.
	_, err := b.pool.Exec(b.ctx, `INSERT INTO gateway_submit (submit_id, channel, state, claimed_by, claimed_at)
		VALUES (9, $1, 'CLAIMED', 'dead', $2)`, channelName, start.Add(-time.Hour))
	require.NoError(t, err)
	g, stop := b.run(t)
	b.push(t, command(9).Values())
	require.Equal(t, gateway.StateUnknown, b.waitResults(t, 1)[0].State)
	// Delivered again: UNKNOWN is final, re-emitted, still not submitted.
	b.push(t, command(9).Values())
	res := b.waitResults(t, 2)
	stop()
	for _, r := range res {
		require.Equal(t, gateway.StateUnknown, r.State)
		require.Equal(t, gateway.ResultClaimNotSettled, r.Result)
		require.Equal(t, gateway.SubmitEventID(9), r.EventID)
	}
	require.Zero(t, b.counts(t).Submits)
	require.Zero(t, g.Stats().Submits)
	require.EqualValues(t, 1, g.Stats().StaleClaims)
	require.Zero(t, b.pending(t))
}

func TestFreshClaimStaysPending(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Another live gateway holds a fresh claim: this one must neither submit
	// nor ack.
	_, err := b.pool.Exec(b.ctx, `INSERT INTO gateway_submit (submit_id, channel, state, claimed_by, claimed_at)
		VALUES (11, $1, 'CLAIMED', 'other', $2)`, channelName, start)
	require.NoError(t, err)
	g, stop := b.run(t)
	b.push(t, command(11).Values())
	b.push(t, command(12).Values())
	res := b.waitResults(t, 1)
	require.Eventually(t, func() bool { return g.Stats().Busy == 1 }, 10*time.Second, time.Millisecond)
	stop()
	require.Len(t, res, 1)
	require.EqualValues(t, 12, res[0].SubmitID)
	require.EqualValues(t, 1, b.pending(t))
	require.Zero(t, b.counts(t).ByKey["11"])
}

func TestMalformedRejectedStreamNotBlocked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g, stop := b.run(t)
	bad := command(21).Values()
	bad["dests"] = "139x"
	badID := b.push(t, bad)
	b.push(t, map[string]any{"hello": "world"})
	b.push(t, command(22).Values())
	res := b.waitResults(t, 3)
	stop()
	byEvent := map[string]gateway.Result{}
	for _, r := range res {
		byEvent[r.EventID] = r
	}
	m := byEvent["malformed:"+badID]
	require.Equal(t, gateway.StateRejected, m.State)
	require.Equal(t, "malformed: dests: a number is not 1-21 digits", m.Result)
	require.EqualValues(t, 21, m.SubmitID)
	require.Equal(t, gateway.StateAccepted, byEvent[gateway.SubmitEventID(22)].State)
	require.EqualValues(t, 2, g.Stats().Malformed)
	require.Zero(t, b.pending(t))
	require.Equal(t, 1, b.counts(t).Submits)
}

func TestUnknownChannelRejected(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, stop := b.run(t)
	cmd := command(31)
	cmd.Channel = "nowhere"
	b.push(t, cmd.Values())
	res := b.waitResults(t, 1)
	stop()
	require.Equal(t, gateway.StateRejected, res[0].State)
	require.Equal(t, "unknown channel", res[0].Result)
	require.Zero(t, b.pending(t))
}

func TestFlowControlNotSentStaysPending(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *supplier.Config) { c.Behaviour.FlowControlRate = 1 })
	g, stop := b.run(t)
	b.push(t, command(41).Values())
	require.Eventually(t, func() bool { return g.Stats().NotSent == 1 }, 10*time.Second, time.Millisecond)
	stop()
	require.Empty(t, b.results(t), "no result for a command that was not sent")
	require.EqualValues(t, 1, b.pending(t), "left pending: claimed again on its next delivery")
	var state string
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT state FROM gateway_submit WHERE submit_id = 41`).Scan(&state))
	require.Equal(t, string(gateway.StateNotSent), state)
	require.Zero(t, b.counts(t).Submits)
}

func TestMOWrittenBeforeAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g, stop := b.run(t)
	// A Submit first, so that a connection is surely logged in.
	b.push(t, command(51).Values())
	b.waitResults(t, 1)
	require.NoError(t, b.srv.SendMO(spID, supplier.MO{From: "13800000001", Text: "TD"}))
	require.Eventually(t, func() bool { return g.Stats().MO == 1 }, 10*time.Second, time.Millisecond)
	stop()
	msgs, err := b.rdb.XRange(b.ctx, b.cfg.ReportStream, "-", "+").Result()
	require.NoError(t, err)
	var mo []redis.XMessage
	for _, m := range msgs {
		if m.Values["kind"] == "mo" {
			mo = append(mo, m)
		}
	}
	require.Len(t, mo, 1)
	require.Equal(t, "13800000001", mo[0].Values["src"])
	require.Equal(t, gateway.MOEventID(channelName, mustUint(t, mo[0].Values["msg_id"])), mo[0].Values["event_id"])
}

func mustUint(t *testing.T, v any) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(v.(string), 10, 64)
	require.NoError(t, err)
	return n
}

func TestRestartReadsOwnPending(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, b.rdb.XGroupCreateMkStream(b.ctx, b.cfg.CommandStream, gateway.GroupDefault, "0").Err())
	b.push(t, command(61).Values())
	// The previous life of consumer gw-1 read it and died; MinIdle (3 min)
	// keeps XAUTOCLAIM away, XREADGROUP 0 finds it at once.
	_, err := b.rdb.XReadGroup(b.ctx, &redis.XReadGroupArgs{Group: gateway.GroupDefault, Consumer: b.cfg.Consumer,
		Streams: []string{b.cfg.CommandStream, ">"}, Count: 10, Block: -1}).Result()
	require.NoError(t, err)
	g, stop := b.run(t)
	res := b.waitResults(t, 1)
	stop()
	require.Equal(t, gateway.StateAccepted, res[0].State)
	require.Zero(t, g.Stats().Claimed)
	require.Equal(t, 1, b.counts(t).ByKey["61"])
	require.Zero(t, b.pending(t))
}

func TestSettledButNotAckedReemitted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A gateway settled submitId 71 ACCEPTED and died before XADD and XACK.
	_, err := b.pool.Exec(b.ctx, `INSERT INTO gateway_submit
		(submit_id, channel, state, msg_id, result, claimed_by, claimed_at, settled_at)
		VALUES (71, $1, 'ACCEPTED', 12345678901234567890, '0', 'dead', $2, $2)`, channelName, start)
	require.NoError(t, err)
	g, stop := b.run(t)
	b.push(t, command(71).Values())
	res := b.waitResults(t, 1)
	stop()
	require.Equal(t, gateway.Result{EventID: gateway.SubmitEventID(71), SubmitID: 71, Channel: channelName,
		State: gateway.StateAccepted, MsgID: 12345678901234567890, Result: "0"}, res[0])
	require.Zero(t, g.Stats().Submits)
	require.Zero(t, b.counts(t).Submits)
	require.Zero(t, b.pending(t))
}

// TestOneReadMixedBatch: one read holds new commands, copies of one submit
// id (in the same batch), a malformed entry, an unknown channel and a
// submit id settled by an earlier life; the batch submits each new id once,
// answers every entry, and acks them all.
func TestOneReadMixedBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.pool.Exec(b.ctx, `INSERT INTO gateway_submit
		(submit_id, channel, state, msg_id, result, claimed_by, claimed_at, settled_at)
		VALUES (90, $1, 'ACCEPTED', 4242, '0', 'gw-old', now(), now())`, channelName)
	require.NoError(t, err)
	for id := uint64(80); id < 90; id++ {
		b.push(t, command(id).Values())
	}
	b.push(t, command(83).Values())
	b.push(t, command(83).Values())
	b.push(t, map[string]any{"hello": "world"})
	lost := command(91)
	lost.Channel = "nowhere"
	b.push(t, lost.Values())
	b.push(t, command(90).Values())
	_, stop := b.run(t) // every entry is on the stream before the first read
	res := b.waitResults(t, 15)
	stop()

	byEvent := map[string][]gateway.Result{}
	for _, r := range res {
		byEvent[r.EventID] = append(byEvent[r.EventID], r)
	}
	require.Len(t, byEvent, 13, "10 new ids, the settled one, the unknown channel, the malformed entry")
	for id := uint64(80); id < 90; id++ {
		rs := byEvent[gateway.SubmitEventID(id)]
		want := 1
		if id == 83 {
			want = 3
		}
		require.Len(t, rs, want, "submit %d", id)
		for _, r := range rs {
			require.Equal(t, rs[0], r, "every copy of a result is the same event")
			require.Equal(t, gateway.StateAccepted, r.State)
		}
	}
	old := byEvent[gateway.SubmitEventID(90)]
	require.Len(t, old, 1)
	require.EqualValues(t, 4242, old[0].MsgID, "re-emitted from the row, not submitted")
	require.Equal(t, "unknown channel", byEvent[gateway.SubmitEventID(91)][0].Result)
	c := b.counts(t)
	require.Equal(t, 10, c.Submits)
	require.Empty(t, c.Duplicates())
	require.Zero(t, b.pending(t))
}

// TestNotSentRetriedInProcess: the supplier's rate limit (one Submit per
// second) answers flow control to all but one of three commands; the
// gateway retries them after its NotSentBackoff waits, on its clock, and
// each is submitted once and answered, without waiting for XAUTOCLAIM.
func TestNotSentRetriedInProcess(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *supplier.Config) { c.Accounts[0].Rate = 1 })
	for id := uint64(51); id <= 53; id++ {
		b.push(t, command(id).Values())
	}
	g, stop := b.run(t)
	// The three are one batch, submitted at one instant of the fake clock:
	// the supplier's one token admits one, the others get flow control. Only
	// then does the clock move (other timers wait on it too, so advancing
	// earlier would hand the supplier tokens before the batch was sent).
	require.Eventually(t, func() bool { return g.Stats().NotSent == 2 }, 10*time.Second, time.Millisecond)
	require.Eventually(t, func() bool {
		if g.Stats().Results == 3 {
			return true
		}
		if b.clock.Waiters() > 0 {
			b.clock.Advance(time.Second) // a token for the supplier, and the gateway's wait ends
		}
		return false
	}, 20*time.Second, 5*time.Millisecond)
	stop()
	st := g.Stats()
	require.EqualValues(t, 3, st.Accepted)
	require.GreaterOrEqual(t, st.NotSent, int64(2), "at least two flow-control answers")
	require.GreaterOrEqual(t, st.Retries, int64(2))
	c := b.counts(t)
	require.Equal(t, 3, c.Submits)
	require.Empty(t, c.Duplicates())
	require.Zero(t, b.pending(t))
}

// TestLateSubmitRespRecorded: the supplier answers after the gateway's
// SubmitTimeout; the submit is settled UNKNOWN and its result written, then
// the SubmitResp comes on the same connection and is recorded (table and
// report stream) without changing the settled row or submitting again.
func TestLateSubmitRespRecorded(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *supplier.Config) { c.Behaviour.Latency = supplier.Fixed(5 * time.Second) })
	b.cfg.SubmitTimeout, b.cfg.StaleClaim, b.cfg.MinIdle = 2*time.Second, 3*time.Second, 4*time.Second
	b.push(t, command(61).Values())
	g, stop := b.run(t)
	require.Eventually(t, func() bool {
		if st := g.Stats(); st.Results == 1 && st.Late == 1 {
			return true
		}
		if b.clock.Waiters() > 0 {
			b.clock.Advance(500 * time.Millisecond)
		}
		return false
	}, 20*time.Second, 5*time.Millisecond)
	var lateMsgID string
	require.Eventually(t, func() bool {
		return b.pool.QueryRow(b.ctx, `SELECT msg_id::text FROM gateway_late_response WHERE submit_id = 61`).Scan(&lateMsgID) == nil
	}, 10*time.Second, 5*time.Millisecond)
	stop()

	res := b.results(t)
	require.Len(t, res, 1)
	require.Equal(t, gateway.StateUnknown, res[0].State)
	var state string
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT state FROM gateway_submit WHERE submit_id = 61`).Scan(&state))
	require.Equal(t, string(gateway.StateUnknown), state, "the settled row is not changed by the late answer")
	reps, err := b.rdb.XRange(b.ctx, b.cfg.ReportStream, "-", "+").Result()
	require.NoError(t, err)
	var late []map[string]any
	for _, m := range reps {
		if m.Values["kind"] == "late_resp" {
			late = append(late, m.Values)
		}
	}
	require.Len(t, late, 1)
	require.Equal(t, gateway.LateEventID(channelName, 61), late[0]["event_id"])
	require.Equal(t, lateMsgID, late[0]["msg_id"])
	require.Equal(t, "0", late[0]["result"])
	require.NotEqual(t, "0", lateMsgID)
	c := b.counts(t)
	require.Equal(t, 1, c.Submits, "submitted once")
	require.Zero(t, b.pending(t))
}

// TestTrimPassKeepsPending: a trim pass removes the command entries the
// group is done with and keeps the first entry still pending and every
// entry after it.
func TestTrimPassKeepsPending(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Submit 95 is held by another gateway's fresh claim: its entry stays
	// pending.
	_, err := b.pool.Exec(b.ctx, `INSERT INTO gateway_submit (submit_id, channel, state, claimed_by, claimed_at)
		VALUES (95, $1, 'CLAIMED', 'other', $2)`, channelName, start)
	require.NoError(t, err)
	for _, id := range []uint64{92, 93, 94, 95, 96, 97} {
		b.push(t, command(id).Values())
	}
	g, stop := b.run(t)
	b.waitResults(t, 5)
	require.Eventually(t, func() bool { return b.pending(t) == 1 }, 10*time.Second, 5*time.Millisecond)
	n, err := g.TrimPass(b.ctx)
	require.NoError(t, err)
	require.EqualValues(t, 3, n, "92, 93, 94: below the pending 95")
	left, err := b.rdb.XRange(b.ctx, b.cfg.CommandStream, "-", "+").Result()
	require.NoError(t, err)
	require.Len(t, left, 3)
	require.Equal(t, "95", left[0].Values["submit_id"])

	// The claim is released and 95 is done: the next pass empties the stream.
	_, err = b.pool.Exec(b.ctx, `DELETE FROM gateway_submit WHERE submit_id = 95`)
	require.NoError(t, err)
	stop()
	g2, stop2 := b.run(t) // a restarted gateway re-reads its own pending entry first
	b.waitResults(t, 6)
	require.Eventually(t, func() bool { return b.pending(t) == 0 }, 10*time.Second, 5*time.Millisecond)
	n, err = g2.TrimPass(b.ctx)
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	l, err := b.rdb.XLen(b.ctx, b.cfg.CommandStream).Result()
	require.NoError(t, err)
	require.Zero(t, l)
	stop2()
}

// TestLostGroupCreatedAgain: when the command stream and its group vanish
// under a running gateway (a Redis restarted without persistence), the
// gateway creates the group again and goes on with new commands.
func TestLostGroupCreatedAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, stop := b.run(t)
	b.push(t, command(71).Values())
	b.waitResults(t, 1)
	require.NoError(t, b.rdb.Del(b.ctx, b.cfg.CommandStream).Err())
	b.push(t, command(72).Values())
	res := b.waitResults(t, 2)
	stop()
	require.Equal(t, uint64(72), res[1].SubmitID)
	require.Equal(t, gateway.StateAccepted, res[1].State)
	require.Zero(t, b.pending(t))
}

// TestRunStopsReportWriter: once Run returns, the report writer's goroutine
// has ended. Not parallel: it looks at every goroutine of the process, and
// the parallel tests run only after the others.
func TestRunStopsReportWriter(t *testing.T) {
	b := setup(t)
	g, stop := b.run(t)
	b.push(t, command(71).Values())
	b.waitResults(t, 1)
	require.Eventually(t, func() bool { return g.Stats().Reports == 1 }, 10*time.Second, time.Millisecond)
	stop()
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	require.False(t, strings.Contains(stacks, "gateway.(*reportWriter).run"), "the report writer still runs")
}
