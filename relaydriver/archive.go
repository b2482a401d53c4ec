package relaydriver

import (
	"context"
	"time"
)

// ArchiveExecutor is the store side of the archival of terminal processing
// rows (seed 000 §9.3 "处理终态归档", PROC_STATE → PROC_STATE_HST): settled
// terminal rows are copied, whole, into relay_message_history and the main row
// becomes an ARCHIVED shadow that keeps only its id and identity, so a later
// message with the same identity is still a duplicate (INV-9).
type ArchiveExecutor interface {
	// MessageArchive archives up to Limit candidates of Queue in ONE
	// transaction (the caller's, or one of its own on GetExecutor) and returns
	// how many it archived. A candidate is
	//
	//	state IN (SUCCEEDED, SKIPPED, DEAD)               -- terminal
	//	AND (ack_at IS NOT NULL                           -- acknowledged, or
	//	     OR (ack_next_at IS NULL AND ack_at IS NULL    -- no intent ever
	//	         AND ack_abandoned_at IS NULL))            -- recorded
	//	AND updated_at < TerminalBefore
	//
	// "No intent ever recorded" covers queues without acknowledgement
	// write-back (Config.AckIntent off: push sources, Enqueue-fed queues),
	// whose terminal rows owe nothing. An abandoned acknowledgement
	// (ack_abandoned_at set, ack_at NULL) is NOT settled: abandoned is not
	// acknowledged, and the row is the purge evidence of the source (C-8) until
	// an operator reconciles it (AckReopen, then AckDone). updated_at is the
	// basis because the terminal state and the settlement both advance it and
	// nothing after them does (the Ack* writes keep it).
	//
	// Each candidate is copied into relay_message_history (archived_at = Now)
	// and its main row is then turned into the shadow by an UPDATE guarded by
	// the state the candidate had when selected: state ARCHIVED, payload NULL,
	// key, error, attempt, lease and acknowledgement fields cleared,
	// updated_at = Now; queue, id, identity_key and enqueued_at stay. A
	// row whose guarded UPDATE touches nothing (replayed to PENDING meanwhile:
	// the replay does not take PIPELINE_LOCK, so only this guard orders the
	// two) is skipped and its history copy removed in the same transaction.
	// The call takes no queue lock.
	MessageArchive(ctx context.Context, params *MessageArchiveParams) (int, error)
}

// MessageArchiveParams selects the terminal rows to archive.
type MessageArchiveParams struct {
	// Queue is the queue whose rows are archived. Required.
	Queue string
	// TerminalBefore is the threshold on updated_at (strict <): usually
	// Now − the archival delay.
	TerminalBefore time.Time
	// Limit caps the rows of one call; <= 0 means the driver's LimitDefault.
	Limit int
	// Now becomes archived_at and the shadow's updated_at.
	Now time.Time
}
