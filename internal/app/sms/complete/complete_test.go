package complete_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/admit"
	"github.com/relayhq/relay/internal/app/sms/complete"
	"github.com/relayhq/relay/internal/app/sms/gateway"
	"github.com/relayhq/relay/internal/app/sms/tenancy"
)

const price = int64(tenancy.DemoPrice)

// TestDeliveredAndSettled: two numbers, each accepted and reported
// delivered: the message completes with both delivered, each number is
// charged once against the freeze, nothing stays frozen, and one
// notification is queued for the app's webhook.
func TestDeliveredAndSettled(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	balance0, _ := c.account()
	id := c.send("yuntong/otp", otp("d-1", "13812345678", "13012345678"))
	cmds := c.commands()
	require.Len(t, cmds, 2)
	for _, cmd := range cmds {
		c.submitted(cmd, gateway.StateAccepted)
	}
	x := c.completer("a")
	c.finish(x)
	require.Nil(t, c.outcomes(id), "accepted, reports awaited")
	for _, cmd := range cmds {
		c.reported(cmd, complete.StatDelivered)
	}
	c.finish(x)
	require.Equal(t, []string{"delivered", "delivered"}, c.outcomes(id))
	require.Equal(t, []string{"freeze freeze:1 90", "charge charge:1:0 45", "charge charge:1:1 45"}, c.ledger(id))
	balance, frozen := c.account()
	require.Equal(t, balance0-2*price, balance)
	require.Zero(t, frozen)
	require.Equal(t, int64(1), c.n(`SELECT count(*) FROM relay_outbox WHERE target = $1 AND event_id = 'notify:1'
		AND topic = 'yuntong-otp' AND convert_from(payload, 'UTF8')::jsonb->>'state' = 'completed'`, complete.WebhookTarget))
	require.Equal(t, int64(2), c.n(`SELECT count(*) FROM relay_work WHERE state = 'idle' AND processed_revision = revision`))

	// The same facts delivered again change nothing.
	for _, cmd := range cmds {
		c.submitted(cmd, gateway.StateAccepted)
		c.reported(cmd, complete.StatDelivered)
	}
	c.finish(x)
	require.Len(t, c.ledger(id), 3)
	require.Equal(t, int64(4), c.n(`SELECT count(*) FROM sms_event`))
}

// TestTwoSegmentReceiptsAtOnce: a three-segment message on a per-segment
// channel; the receipts of segments 1 (delivered) and 2 (failed) are
// recorded by two intakes at the same moment and completed by two
// completers at the same moment. The attempt fails once, one retry goes
// out through the other channel (three new submits), and when the retry is
// delivered the number is charged once.
func TestTwoSegmentReceiptsAtOnce(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	id := c.send("yuntong/notify", long("seg-1", "13012345678")) // unicom: cu-a (3.0, per segment) first
	cmds := c.commands()
	require.Len(t, cmds, 3)
	require.Equal(t, "cu-a", cmds[0].Channel)
	for _, cmd := range cmds {
		c.submitted(cmd, gateway.StateAccepted)
	}
	c.take()
	c.reported(cmds[0], complete.StatDelivered)
	c.reported(cmds[1], "UNDELIV")
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { _, _ = c.intake.ReadOnce(c.ctx) })
	}
	wg.Wait()
	c.take()
	for _, owner := range []string{"a", "b"} {
		wg.Go(func() {
			if cl, err := c.work.Claim(c.ctx, owner, 8); err == nil {
				c.completer(owner).Process(c.ctx, cl)
			}
		})
	}
	wg.Wait()
	c.finish(c.completer("c"))
	require.Equal(t, "failed", c.str(`SELECT state FROM sms_attempt WHERE message_id = $1 AND attempt_no = 1`, id))
	retry := c.commands()
	require.Len(t, retry, 3, "one retry: three new submits")
	require.Equal(t, "cu-b", retry[0].Channel, "another channel")
	require.Equal(t, int64(1), c.n(`SELECT count(*) FROM sms_attempt WHERE retry_of IS NOT NULL`))
	require.Nil(t, c.outcomes(id), "a retry is not the message's end")
	// The retry on a message-level channel: its last segment's report.
	for _, cmd := range retry {
		c.submitted(cmd, gateway.StateAccepted)
	}
	c.reported(retry[2], complete.StatDelivered)
	c.finish(c.completer("c"))
	require.Equal(t, []string{"delivered"}, c.outcomes(id))
	require.Equal(t, []string{"freeze freeze:1 135", "charge charge:1:0 135"}, c.ledger(id))

	// GET shows the outcome and both attempts segment by segment.
	m := c.get("yuntong/notify", id)
	require.Equal(t, "completed", m.State)
	require.NotNil(t, m.CompletedAt)
	r := m.Recipients[0]
	require.Equal(t, "delivered", r.Outcome)
	require.Len(t, r.Attempts, 2)
	require.Equal(t, "cu-a", r.Attempts[0].Channel)
	require.Equal(t, "failed", r.Attempts[0].State)
	require.Equal(t, "report UNDELIV", r.Attempts[0].Detail)
	require.Equal(t, []admit.SegmentAnswer{{Segment: 1, SubmitID: cmds[0].SubmitID, Result: "ACCEPTED", Stat: "DELIVRD"},
		{Segment: 2, SubmitID: cmds[1].SubmitID, Result: "ACCEPTED", Stat: "UNDELIV"},
		{Segment: 3, SubmitID: cmds[2].SubmitID, Result: "ACCEPTED"}}, r.Attempts[0].Segments)
	require.Equal(t, "cu-b", r.Attempts[1].Channel)
	require.Equal(t, "delivered", r.Attempts[1].State)
}

// TestReceiptBeforeSubmitResp: the report comes before the submit result
// that carries its Msg_Id: it is parked, and matched when the result
// comes; the message is then delivered.
func TestReceiptBeforeSubmitResp(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	id := c.send("yuntong/otp", otp("early", "13012345678"))
	cmd := c.commands()[0]
	c.reported(cmd, complete.StatDelivered)
	x := c.completer("a")
	c.finish(x)
	require.Equal(t, int64(1), c.n(`SELECT count(*) FROM sms_report_parked WHERE matched_at IS NULL`))
	require.Nil(t, c.outcomes(id))
	c.submitted(cmd, gateway.StateAccepted)
	c.finish(x)
	require.Zero(t, c.n(`SELECT count(*) FROM sms_report_parked WHERE matched_at IS NULL`))
	require.Equal(t, []string{"delivered"}, c.outcomes(id))
}

// TestParkedSweep: a parked report whose submit got its Msg_Id in another
// transaction (the intake's own match missed it) is matched by the sweep.
func TestParkedSweep(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	id := c.send("yuntong/otp", otp("sweep", "13012345678"))
	cmd := c.commands()[0]
	c.reported(cmd, complete.StatDelivered)
	c.take()
	// As if a concurrent intake had recorded the result without seeing
	// the parked report.
	_, err := c.d.Pool().Exec(c.ctx, `UPDATE sms_submit SET msg_id = $1 WHERE submit_id = $2`,
		formatUint(msgID(cmd)), int64(cmd.SubmitID))
	require.NoError(t, err)
	n, err := c.intake.Sweep(c.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	c.submitted(cmd, gateway.StateAccepted)
	c.finish(c.completer("a"))
	require.Equal(t, []string{"delivered"}, c.outcomes(id))
}

// TestStaleWorkerFenced: worker A claims a failed attempt's work and
// stalls past its lease; worker B takes it over and retries; A's run is
// fenced and writes nothing: one retry, no second decision.
func TestStaleWorkerFenced(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	id := c.send("yuntong/otp", otp("stale", "13012345678"))
	cmd := c.commands()[0]
	c.submitted(cmd, gateway.StateRejected)
	c.take()
	stale := c.claim("a", 8)
	require.Len(t, stale, 1)
	c.clock.Advance(2 * time.Minute) // past the 60 s lease
	fresh := c.claim("b", 8)
	require.Len(t, fresh, 1)
	require.True(t, fresh[0].TakenOver)
	b := c.completer("b")
	b.Process(c.ctx, fresh)
	a := c.completer("a")
	a.Process(c.ctx, stale)
	require.Equal(t, int64(1), a.Stats().Fenced)
	require.Zero(t, a.Stats().Decided)
	require.Equal(t, int64(1), b.Stats().Retries)
	require.Equal(t, int64(1), c.n(`SELECT count(*) FROM sms_attempt WHERE message_id = $1 AND attempt_no = 2`, id))
	require.Len(t, c.commands(), 1)
}

// TestLateReceiptOfSupersededAttempt: attempt 1 is reported failed and
// retried; the retry is delivered and charged; then attempt 1 gets a late
// report saying delivered. It is kept for audit and changes nothing: no
// second charge, no refund, attempt 1 stays failed, the message stays
// delivered.
func TestLateReceiptOfSupersededAttempt(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	id := c.send("yuntong/otp", otp("late", "13012345678"))
	first := c.commands()[0]
	c.submitted(first, gateway.StateAccepted)
	c.reported(first, "EXPIRED")
	x := c.completer("a")
	c.finish(x)
	retry := c.commands()
	require.Len(t, retry, 1)
	c.submitted(retry[0], gateway.StateAccepted)
	c.reported(retry[0], complete.StatDelivered)
	c.finish(x)
	require.Equal(t, []string{"delivered"}, c.outcomes(id))
	before := c.ledger(id)
	c.reported(first, complete.StatDelivered)
	c.finish(x)
	require.Equal(t, before, c.ledger(id))
	require.Equal(t, "failed", c.str(`SELECT state FROM sms_attempt WHERE message_id = $1 AND attempt_no = 1`, id))
	require.Contains(t, c.str(`SELECT detail FROM sms_attempt WHERE message_id = $1 AND attempt_no = 1`, id), "late fact after the retry")
	require.Equal(t, int64(3), c.n(`SELECT count(*) FROM sms_event WHERE attempt_id = (SELECT id FROM sms_attempt
		WHERE message_id = $1 AND attempt_no = 1)`, id), "result, failure report, late report: all kept")
	require.Empty(t, c.commands(), "no further retry")
}

// TestUnknownOutcome: a submit whose outcome is unknown is never resent:
// it waits for a report, and past the report deadline the number is
// unknown and charged. A failure reported later (after a late SubmitResp
// brought the Msg_Id) is refunded, once.
func TestUnknownOutcome(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	id := c.send("yuntong/otp", otp("unknown", "13012345678"))
	cmd := c.commands()[0]
	c.submitted(cmd, gateway.StateUnknown)
	x := c.completer("a")
	c.finish(x)
	require.Nil(t, c.outcomes(id))
	c.clock.Advance(complete.ReportDeadlineDefault + time.Minute)
	c.finish(x)
	require.Equal(t, []string{"unknown"}, c.outcomes(id))
	require.Empty(t, c.commands(), "never resent")
	require.Equal(t, int64(1), c.n(`SELECT count(*) FROM sms_event WHERE kind = 'timeout'`))
	require.Equal(t, []string{"freeze freeze:1 45", "charge charge:1:0 45"}, c.ledger(id))
	c.lateResp(cmd, "0")
	c.reported(cmd, "UNDELIV")
	c.finish(x)
	c.reported(cmd, "UNDELIV") // again: stored once, refunded once
	c.finish(x)
	require.Equal(t, []string{"freeze freeze:1 45", "charge charge:1:0 45", "refund refund:1:0 45"}, c.ledger(id))
}

// TestNoResultResentThenTimeout: a command whose result never comes (lost
// before the gateway, say in a Redis that restarted without its data) is
// published again at the result deadline — the same submitId, so the
// gateway submits it only if it never claimed it — twice, a deadline
// apart; after that the number is decided unknown by the timeout rule.
func TestNoResultResentThenTimeout(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	id := c.send("yuntong/otp", otp("lost", "13012345678"))
	first := c.commands()
	require.Len(t, first, 1)
	x := c.completer("a")
	c.finish(x)
	require.Nil(t, c.outcomes(id))
	for n := 1; n <= complete.ResendsDefault; n++ {
		c.clock.Advance(complete.ResultDeadlineDefault + time.Second)
		c.finish(x)
		again := c.commands()
		require.Len(t, again, 1, "resend %d", n)
		require.Equal(t, first[0], again[0], "the same command, the same submitId")
		require.Nil(t, c.outcomes(id))
	}
	require.Equal(t, int64(complete.ResendsDefault), x.Stats().Resends)
	c.clock.Advance(complete.ResultDeadlineDefault + time.Second)
	c.finish(x)
	require.Empty(t, c.commands(), "resends used up")
	require.Equal(t, []string{"unknown"}, c.outcomes(id))
	require.Contains(t, c.str(`SELECT detail FROM sms_attempt WHERE message_id = $1`, id), "no submit result")
}

// TestResentCommandDelivered: the result comes after a resend: delivered.
func TestResentCommandDelivered(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	id := c.send("yuntong/otp", otp("late-gw", "13012345678"))
	cmd := c.commands()[0]
	x := c.completer("a")
	c.clock.Advance(complete.ResultDeadlineDefault + time.Second)
	c.finish(x)
	require.Len(t, c.commands(), 1, "published again")
	c.submitted(cmd, gateway.StateAccepted)
	c.reported(cmd, complete.StatDelivered)
	c.finish(x)
	require.Equal(t, []string{"delivered"}, c.outcomes(id))
	require.Equal(t, int64(1), c.n(`SELECT count(*) FROM sms_event WHERE kind = 'resend'`))
}

// TestRejectedWithoutChannelLeft: a number whose every channel was tried
// ends failed and its freeze is released.
func TestRejectedWithoutChannelLeft(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	id := c.send("yuntong/otp", otp("nochan", "13012345678"))
	x := c.completer("a")
	for range 2 {
		for _, cmd := range c.commands() {
			c.submitted(cmd, gateway.StateRejected)
		}
		c.finish(x)
	}
	require.Equal(t, []string{"failed"}, c.outcomes(id))
	require.Equal(t, []string{"freeze freeze:1 45", "release release:1:0 45"}, c.ledger(id))
	_, frozen := c.account()
	require.Zero(t, frozen)
}

// TestBadFacts: facts that name nothing of ours are kept in
// sms_intake_reject, never block the stream, and change nothing.
func TestBadFacts(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	c.send("yuntong/otp", otp("bad", "13012345678"))
	cmd := c.commands()[0]
	other := cmd
	other.SubmitID = 77 << 8
	c.submitted(other, gateway.StateAccepted) // no such submit
	wrong := cmd
	wrong.Channel = "cm-a"
	c.submitted(wrong, gateway.StateAccepted) // the submit is not cm-a's
	c.reported(gateway.Command{SubmitID: 5, Channel: "nowhere"}, complete.StatDelivered)
	require.NoError(t, c.rdb.XAdd(c.ctx, (&redisArgs{stream: c.report, values: map[string]any{"kind": "report"}}).args()).Err())
	require.Equal(t, 4, c.take())
	require.Equal(t, int64(4), c.n(`SELECT count(*) FROM sms_intake_reject`))
	require.Zero(t, c.n(`SELECT count(*) FROM sms_event`))
	require.Equal(t, int64(4), c.intake.Stats().Entries)
}

// TestIntakeLostGroupCreatedAgain: when the streams and their group vanish
// (a Redis restarted without persistence), the intake's next read creates
// them again instead of failing on NOGROUP.
func TestIntakeLostGroupCreatedAgain(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	require.NoError(t, c.rdb.Del(c.ctx, c.result, c.report).Err())
	n, err := c.intake.ReadOnce(c.ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	for _, s := range []string{c.result, c.report} {
		groups, err := c.rdb.XInfoGroups(c.ctx, s).Result()
		require.NoError(t, err)
		require.Len(t, groups, 1, s)
		require.Equal(t, complete.GroupDefault, groups[0].Name)
	}
}

// TestAcceptedResultAwaitingReportDoesNotWake: an ACCEPTED result of a
// segment that asked for a status report decides nothing, so the intake
// records it (and the segment's result, for readers) without waking the
// completion; the report wakes it. A REJECTED result, which decides, wakes
// it at once.
func TestAcceptedResultAwaitingReportDoesNotWake(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	id := c.send("yuntong/otp", otp("aw-1", "13812345678", "13012345678"))
	cmds := c.commands()
	require.Len(t, cmds, 2)
	require.Equal(t, int64(2), c.n(`SELECT count(*) FROM sms_submit WHERE registered`))
	revisions := func() int64 { return c.n(`SELECT sum(revision) FROM relay_work`) }
	rev0 := revisions()

	c.submitted(cmds[0], gateway.StateAccepted)
	c.take()
	require.Equal(t, int64(1), c.n(`SELECT count(*) FROM sms_event WHERE kind = 'result'`), "the fact is recorded")
	require.Equal(t, rev0, revisions(), "no work record bumped")
	require.Equal(t, int64(0), c.n(`SELECT count(*) FROM relay_work WHERE state = 'pending'`))
	require.Equal(t, "ACCEPTED", c.str(`SELECT result FROM sms_submit WHERE submit_id = $1`, int64(cmds[0].SubmitID)))
	require.Equal(t, formatUint(msgID(cmds[0])), c.str(`SELECT msg_id FROM sms_submit WHERE submit_id = $1`, int64(cmds[0].SubmitID)))

	c.submitted(cmds[1], gateway.StateRejected)
	c.take()
	require.Equal(t, rev0+1, revisions(), "a rejection decides: bumped")
	require.Equal(t, int64(1), c.n(`SELECT count(*) FROM relay_work WHERE state = 'pending'`))

	x := c.completer("a")
	c.reported(cmds[0], complete.StatDelivered)
	c.finish(x)
	require.Equal(t, rev0+2, revisions(), "the report bumped")
	// The first number delivered; the second failed and is retried.
	require.Nil(t, c.outcomes(id))
	require.Equal(t, "DELIVRD", c.str(`SELECT stat FROM sms_submit WHERE submit_id = $1`, int64(cmds[0].SubmitID)))
	require.Equal(t, int64(1), c.n(`SELECT count(*) FROM sms_attempt WHERE state = 'delivered'`))
	require.Equal(t, int64(1), c.n(`SELECT count(*) FROM sms_attempt WHERE retry_of IS NOT NULL`))
}

// TestResultWriteRacesAnotherWriter: another transaction changes a submit
// (here its report's stat) while the intake records that submit's result:
// the intake's write waits for the other's lock and then finds a row its
// snapshot does not see. The batch is run again at once (Stats().Raced),
// and both writes stand: the Msg_Id and result of the intake, the stat of
// the other transaction.
func TestResultWriteRacesAnotherWriter(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	c.send("yuntong/otp", otp("race-1", "13812345678"))
	cmds := c.commands()
	require.Len(t, cmds, 1)
	submit := int64(cmds[0].SubmitID)

	other, err := c.d.Pool().Begin(c.ctx)
	require.NoError(t, err)
	defer func() { _ = other.Rollback(context.WithoutCancel(c.ctx)) }()
	var otherPID int32
	require.NoError(t, other.QueryRow(c.ctx, `SELECT pg_backend_pid()`).Scan(&otherPID))
	_, err = other.Exec(c.ctx, `UPDATE sms_submit SET stat = 'DELIVRD' WHERE submit_id = $1`, submit)
	require.NoError(t, err)

	c.submitted(cmds[0], gateway.StateAccepted)
	done := make(chan error, 1)
	go func() {
		_, err := c.intake.ReadOnce(c.ctx)
		done <- err
	}()
	// The intake's statement has its snapshot and waits for the other's
	// row lock.
	require.Eventually(t, func() bool {
		return c.n(`SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY (pg_blocking_pids(pid))`, otherPID) > 0
	}, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, other.Commit(c.ctx))
	require.NoError(t, <-done)

	require.EqualValues(t, 1, c.intake.Stats().Raced, "the batch ran again once")
	require.Equal(t, formatUint(msgID(cmds[0])), c.str(`SELECT msg_id FROM sms_submit WHERE submit_id = $1`, submit))
	require.Equal(t, "ACCEPTED", c.str(`SELECT result FROM sms_submit WHERE submit_id = $1`, submit))
	require.Equal(t, "DELIVRD", c.str(`SELECT stat FROM sms_submit WHERE submit_id = $1`, submit))
	require.Equal(t, int64(1), c.n(`SELECT count(*) FROM sms_event WHERE kind = 'result'`), "the fact recorded once")
}
