package relaydriver

import (
	"context"
	"time"

	"github.com/relayhq/relay/relaytype"
)

// Acknowledgement abandon reasons (seed 000 §6.2). Abandoned is not
// acknowledged: an abandoned row has no AckAt and needs a human.
const (
	// AckReasonMissingRow: the source row no longer exists (a deterministic
	// outcome: abandoned at once).
	AckReasonMissingRow = "MISSING_ROW"
	// AckReasonTransientDeadline: transient failures lasted until R after the
	// local enqueue time.
	AckReasonTransientDeadline = "TRANSIENT_DEADLINE"
)

// AckExecutor is the store side of acknowledgement write-back (seed 000 §6):
// the scan of owed acknowledgements and the four outcomes' bookkeeping. The
// intent itself is recorded with the terminal state (MessageComplete,
// MessageExhaust with AckIntent).
type AckExecutor interface {
	// AckScan returns up to Limit messages of Queue that still owe an
	// acknowledgement, with exactly the seed's predicate and order (§6.1):
	//
	//	state IN (SUCCEEDED, SKIPPED, DEAD)        -- terminal; ARCHIVED excluded
	//	AND ack_at IS NULL AND ack_abandoned_at IS NULL
	//	AND (ack_next_at IS NULL OR ack_next_at <= Now OR enqueued_at < Now − R)
	//	ORDER BY ack_attempts, id
	AckScan(ctx context.Context, params *AckScanParams) ([]*relaytype.Message, error)
	// AckDone records that the source's mark is confirmed (written now, or
	// found already present): AckAt = Now, only on rows still owing one
	// (terminal, not acknowledged, not abandoned), in one statement. Returns how
	// many rows it recorded; empty IDs is a no-op. None of the Ack* writes
	// touches UpdatedAt (the time of the last processing-state change).
	AckDone(ctx context.Context, params *AckDoneParams) (int, error)
	// AckRetry records a transient failure: AckAttempts+1 and AckNextAt =
	// NextAt, only on a row still owing an acknowledgement and not abandoned.
	// A row that does not qualify is relaytype.ErrConflict (relaytype.ErrNotFound
	// when it does not exist).
	AckRetry(ctx context.Context, params *AckRetryParams) error
	// AckAbandon stops automatic retries of one row: AckAbandonedAt = Now and
	// the reason. The row is NOT acknowledged (AckAt stays NULL). Guarded and
	// refused like AckRetry (an already abandoned row keeps its first reason).
	AckAbandon(ctx context.Context, params *AckAbandonParams) error
	// AckReopen clears the abandonment of the given ids (or, with IDs empty, of
	// every abandoned row of Queue with Reason), so the scan tries them again
	// at once (AckNextAt = Now). AckAttempts is kept. With IDs set, a non-empty
	// Reason narrows them further. Returns how many rows it reopened.
	AckReopen(ctx context.Context, params *AckReopenParams) (int, error)
	// AckStats counts Queue's terminal messages by acknowledgement state,
	// in one statement (it reads every terminal row of the queue: a
	// progress read, not a hot path).
	AckStats(ctx context.Context, queue string) (*AckStats, error)
}

// AckStats counts a queue's terminal messages (ARCHIVED excluded) by
// acknowledgement state.
type AckStats struct {
	// Owing still owe their mark: not acknowledged, not abandoned.
	Owing int64
	// Abandoned were given up (by time or a missing row) and are not
	// acknowledged; a reopen makes them owing again.
	Abandoned int64
	// Acknowledged have their mark confirmed in the source.
	Acknowledged int64
}

// AckScanParams selects owed acknowledgements.
type AckScanParams struct {
	Queue string
	Now   time.Time
	// R is the forced-write window: rows enqueued before Now−R are tried every
	// scan, whatever their backoff (seed 000 §6.3).
	R     time.Duration
	Limit int
}

// AckDoneParams confirms acknowledgements.
type AckDoneParams struct {
	Queue string
	IDs   []int64
	Now   time.Time
}

// AckRetryParams records a transient acknowledgement failure.
type AckRetryParams struct {
	Queue  string
	ID     int64
	NextAt time.Time
	Now    time.Time
}

// AckAbandonParams abandons automatic acknowledgement of one row.
type AckAbandonParams struct {
	Queue  string
	ID     int64
	Reason string // AckReasonMissingRow or AckReasonTransientDeadline
	Now    time.Time
}

// AckReopenParams reopens abandoned acknowledgements.
type AckReopenParams struct {
	Queue  string
	IDs    []int64 // empty: every abandoned row with Reason
	Reason string  // with IDs empty: required
	Now    time.Time
}
