package relaysource

import (
	"context"
	"time"
)

// SequenceSource is a foreign table whose rows have increasing ids, read by the
// watermark intake (seed 000 §4.1). Implementations are safe for concurrent use.
// ctx governs every call; an implementation also bounds each call by its own
// timeout.
type SequenceSource interface {
	// ReadAfter returns at most limit rows with id > after, in ascending id order
	// (seed 000 §4.1 step 2). It never filters on a processing mark. A failed read
	// returns an error, never an empty result; an empty result means no visible
	// row has id > after. limit must be positive.
	ReadAfter(ctx context.Context, after int64, limit int) ([]Row, error)
	// Bounds returns the smallest and largest visible id, for cutover seeding
	// (seed 000 §4.3) and the watermark-lag metric. ok is false when the table has
	// no rows (min and max are then 0).
	Bounds(ctx context.Context) (min, max int64, ok bool, err error)
}

// Row is one foreign row as the intake enqueues it.
type Row struct {
	// ID is the row's id; it becomes the message id (MSG_ID = CMINMSGS.ID,
	// seed 000 §1.2).
	ID int64
	// Key is the ordering key of the per-key mode ("" when the source has no key
	// column or the value is NULL).
	Key string
	// Payload is the row's content, nil when the source does not copy it (the
	// handler reads the raw content from the source at processing time) or the
	// value is NULL.
	Payload []byte
	// ReceivedAt is the source's own receive time; zero stands for NULL. It is for
	// display and reconciliation only, never for age checks (seed 000 §1.2).
	ReceivedAt time.Time
}
