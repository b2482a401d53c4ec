package relaydrivertest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// testRefusesInvalidInput holds both drivers to the input checks of package
// relaydriver: each call below is refused before it writes, with the check's
// own words in the error, and the store is left as it was.
func testRefusesInvalidInput(t *testing.T, b *bundle) {
	b.insert("p", 1)
	ctx, now := b.ctx, b.now
	var zero time.Time
	for _, c := range []struct {
		name, want string
		call       func() error
	}{
		{"insert without Now", "params[0].Now is required", func() error {
			_, err := b.ex.MessageInsertMany(ctx, []*relaydriver.MessageInsertParams{{Queue: "p", ID: 2}})
			return err
		}},
		{"insert without queue", "params[0].Queue is empty", func() error {
			_, err := b.ex.MessageInsertMany(ctx, []*relaydriver.MessageInsertParams{{ID: 2, Now: now}})
			return err
		}},
		{"insert negative id", "params[1].ID -2 is negative", func() error {
			_, err := b.ex.MessageInsertMany(ctx, []*relaydriver.MessageInsertParams{{Queue: "p", ID: 2, Now: now}, {Queue: "p", ID: -2, Now: now}})
			return err
		}},
		{"bind empty identity", "empty identity", func() error {
			_, err := b.ex.MessageBindIdentity(ctx, &relaydriver.MessageBindIdentityParams{Queue: "p", ID: 1})
			return err
		}},
		{"complete non-terminal", `state "FAILED" is not terminal`, func() error {
			return b.ex.MessageComplete(ctx, &relaydriver.MessageCompleteParams{Queue: "p", ID: 1, State: relaytype.StateFailed, Now: now})
		}},
		{"complete without Now", "Now is required", func() error {
			return b.ex.MessageComplete(ctx, &relaydriver.MessageCompleteParams{Queue: "p", ID: 1, State: relaytype.StateSucceeded})
		}},
		{"complete many without Now", "Now is required", func() error {
			return b.ex.MessageCompleteMany(ctx, []*relaydriver.MessageCompleteParams{{Queue: "p", ID: 1, State: relaytype.StateSucceeded}})
		}},
		{"fail without Now", "Now is required", func() error {
			_, err := b.ex.MessageFail(ctx, &relaydriver.MessageFailParams{Queue: "p", ID: 1, NextAttemptAt: now})
			return err
		}},
		{"exhaust without Now", "Now is required", func() error {
			return b.ex.MessageExhaust(ctx, &relaydriver.MessageExhaustParams{Queue: "p", ID: 1, MaxAttempts: 1})
		}},
		{"claim without owner", "Owner is required", func() error {
			_, err := b.ex.MessageClaim(ctx, &relaydriver.MessageClaimParams{Queue: "p", LeaseUntil: now.Add(time.Minute), Now: now})
			return err
		}},
		{"claim without Now", "is not after Now", func() error {
			_, err := b.ex.MessageClaim(ctx, &relaydriver.MessageClaimParams{Queue: "p", Owner: "o", LeaseUntil: now})
			return err
		}},
		{"renew without lease", "Owner and LeaseUntil are required", func() error {
			_, err := b.ex.MessageLeaseRenew(ctx, &relaydriver.MessageLeaseRenewParams{Queue: "p", Owner: "o", IDs: []int64{1}})
			return err
		}},
		{"release without owner", "Owner is required", func() error {
			_, err := b.ex.MessageLeaseRelease(ctx, &relaydriver.MessageLeaseReleaseParams{Queue: "p"})
			return err
		}},
		{"replay without Now", "Now is required", func() error {
			_, err := b.ex.MessageReplay(ctx, &relaydriver.MessageReplayParams{Queue: "p", Classes: []relaytype.ErrorClass{relaytype.ClassInfra}})
			return err
		}},
		{"cursor save without Now", "Now is required", func() error {
			return b.ex.CursorSave(ctx, &relaydriver.CursorSaveParams{Queue: "p", Watermark: 1})
		}},
		{"cursor seed without Now", "Now is required", func() error {
			return b.ex.CursorSeed(ctx, &relaydriver.CursorSeedParams{Queue: "q", Watermark: 1})
		}},
		{"nil hole", "nil hole", func() error { return b.ex.HoleInsert(ctx, nil) }},
		{"ack scan without R", "must be positive", func() error {
			_, err := b.ex.AckScan(ctx, &relaydriver.AckScanParams{Queue: "p", Now: now})
			return err
		}},
		{"ack retry without NextAt", "Now and NextAt are required", func() error {
			return b.ex.AckRetry(ctx, &relaydriver.AckRetryParams{Queue: "p", ID: 1, Now: now})
		}},
		{"outbox fetch without Now", "Now is required", func() error {
			_, err := b.ex.OutboxFetch(ctx, &relaydriver.OutboxFetchParams{Target: "t"})
			return err
		}},
		{"outbox fail without attempts", "MaxAttempts 0 < 1", func() error {
			_, err := b.ex.OutboxFail(ctx, &relaydriver.OutboxFailParams{ID: 1, Now: now})
			return err
		}},
		{"outbox delete without cutoff", "sentBefore is required", func() error {
			_, err := b.ex.OutboxDeleteSent(ctx, "t", zero, 10)
			return err
		}},
		{"latest fail without Now", "Now is required", func() error {
			_, err := b.ex.LatestFail(ctx, &relaydriver.LatestFailParams{Target: "t", Key: "k", Generation: 1, MaxAttempts: 1})
			return err
		}},
		{"archive without queue", "Queue is empty", func() error {
			_, err := b.ex.MessageArchive(ctx, &relaydriver.MessageArchiveParams{TerminalBefore: now, Now: now})
			return err
		}},
		{"list above the page limit", "above", func() error {
			_, err := b.ex.MessageList(ctx, &relaydriver.MessageListParams{Queue: "p", Limit: relaydriver.MessageListLimitMax + 1})
			return err
		}},
	} {
		err := c.call()
		require.Error(t, err, c.name)
		require.Contains(t, err.Error(), c.want, c.name)
	}
	m := b.get("p", 1)
	require.Equal(t, relaytype.StatePending, m.State, "nothing was written")
	require.Equal(t, []int64{1}, b.head("p"))
}
