package relaysource

import (
	"context"
	"fmt"
	"time"
)

// Acknowledger writes the processing mark back to a foreign row once its
// message reached a terminal state (seed 000 §6). It is the only write a
// source ever makes, and it never overwrites an existing mark.
// Implementations are safe for concurrent use and bound each call by their own
// timeout.
type Acknowledger interface {
	// Acknowledge sets the mark of row id to mark (and its mark time to at, when
	// the source has one) only when the row has no mark yet (NULL or empty), and
	// reports which of the seed's outcomes it observed (§6.2). Any error —
	// timeout, lost connection, a missing table — is transient: the caller
	// retries with backoff until its deadline; an error never stands for
	// "missing row".
	Acknowledge(ctx context.Context, id int64, mark string, at time.Time) (AckOutcome, error)
}

// AckOutcome is what an acknowledgement observed (seed 000 §6.2).
type AckOutcome int

const (
	// AckWritten: the mark was NULL or empty and one row was updated.
	AckWritten AckOutcome = iota + 1
	// AckAlreadyMarked: no row was updated but the row exists, so it already
	// carried a mark. Success; the existing value is never overwritten.
	AckAlreadyMarked
	// AckMissingRow: no row was updated and the row does not exist (deleted
	// after it was enqueued). A deterministic outcome.
	AckMissingRow
)

// String returns the outcome's metric label: written, already_marked,
// missing_row.
func (o AckOutcome) String() string {
	switch o {
	case AckWritten:
		return "written"
	case AckAlreadyMarked:
		return "already_marked"
	case AckMissingRow:
		return "missing_row"
	default:
		return fmt.Sprintf("AckOutcome(%d)", int(o))
	}
}

// AckItem is one acknowledgement of a batch: mark (and at) for row ID.
type AckItem struct {
	ID   int64
	Mark string
	At   time.Time
}

// BatchAcknowledger is an Acknowledger that can also write many marks in one
// transaction of the source — one commit (one log flush) for the batch instead
// of one per row, which is what limits a write-back that trails a fast pump.
type BatchAcknowledger interface {
	Acknowledger
	// AcknowledgeBatch acknowledges every item exactly as Acknowledge would,
	// in one transaction: all the marks it writes are committed together or
	// not at all. It returns one outcome per item, in order. An error stands
	// for every item and is transient, as for Acknowledge.
	AcknowledgeBatch(ctx context.Context, items []AckItem) ([]AckOutcome, error)
}
