package relaydriver

import (
	"context"
	"time"

	"github.com/relayhq/relay/relaytype"
)

// LatestExecutor is the store side of latest-state outbox rows (seed 000
// §8.2, §12.4; docs/outbox.md "Latest-state rows"): one row per (Target, Key)
// holding the key's latest full state, written only forward by version, and
// delivered by a dispatcher that marks it SENT only if no newer generation was
// written meanwhile.
//
// Every accepted upsert takes a new generation from a store-wide sequence
// (PostgreSQL: relay_latest_generation_seq; SQLite: a counter row). The
// generation is the row's write generation: the dispatcher confirms and fails
// a row only WHERE generation = <the generation it read>, so a row superseded
// during delivery stays PENDING and is delivered again next round. A
// generation is not a stable event handle across writes: once superseded it
// addresses nothing.
type LatestExecutor interface {
	// LatestUpsert writes the key's latest state, in the caller's business
	// transaction (on GetExecutor it runs on its own). It is accepted only when
	// Version ≥ the stored version (only forward; equal is accepted), in one
	// statement that holds the key's row lock to commit. An accepted upsert
	// takes a new generation and resets the row to PENDING with attempts 0,
	// no next attempt and no error — so a new generation also revives a DEAD
	// row. A refused upsert changes nothing and reports Accepted false with
	// Generation 0.
	LatestUpsert(ctx context.Context, params *LatestUpsertParams) (*LatestUpserted, error)
	// LatestUpsertMany is LatestUpsert for several keys at once, in as few
	// statements as the store allows (one on PostgreSQL), with LatestUpsert's
	// rule for each key independently: it returns one outcome per input, in
	// input order. An invalid input — including the same (Target, Key) twice
	// in one call, whose two writes a single statement could not order — is
	// an error before anything is written. After a store error in an
	// ExecutorTx the caller must roll back (some rows may be written in it).
	// Keys are locked in (Target, Key) order, so concurrent calls cannot
	// deadlock on each other. An empty params is a no-op.
	LatestUpsertMany(ctx context.Context, params []*LatestUpsertParams) ([]*LatestUpserted, error)
	// LatestFetch returns up to Limit PENDING rows of Target that are due
	// (NextAttemptAt NULL or ≤ Now), in key order.
	LatestFetch(ctx context.Context, params *LatestFetchParams) ([]*LatestRecord, error)
	// LatestMarkSent sets state SENT and sent_at = Now, in one statement, on
	// each referenced row that is still PENDING with exactly the referenced
	// generation, and returns how many it changed. A row rewritten since the
	// fetch (a newer generation) is left PENDING. Call it only after the sink
	// confirmed.
	LatestMarkSent(ctx context.Context, params *LatestMarkSentParams) (int, error)
	// LatestFail records one failed delivery of a PENDING row of exactly
	// Generation in one statement: attempts+1, LastError, and either
	// NextAttemptAt (PENDING) or, when attempts+1 ≥ MaxAttempts, DEAD. It
	// returns relaytype.ErrNotFound for an unknown key and relaytype.ErrConflict
	// when the row is no longer PENDING at Generation (superseded or finished).
	LatestFail(ctx context.Context, params *LatestFailParams) (*OutboxFailed, error)
	// LatestGet returns the row of (target, key) or relaytype.ErrNotFound, for
	// operators and tests.
	LatestGet(ctx context.Context, target, key string) (*LatestRecord, error)
	// LatestStats counts the rows of target per state.
	LatestStats(ctx context.Context, target string) (*OutboxStats, error)
}

// LatestUpsertParams is one key's latest state (seed 000 §8.2).
type LatestUpsertParams struct {
	// Target names the dispatcher (sink) that delivers the row. Required.
	Target string
	// Topic is the destination inside the sink.
	Topic string
	// Key is the row's key (the partition key), e.g. the FLID.
	Key string
	// Version is the state's version (STATE_VERSION); only a Version ≥ the
	// stored one is accepted.
	Version int64
	// Type is OutboxUpsert or OutboxTombstone.
	Type relaytype.EventType
	// Headers are delivered with the state (stored as JSON text).
	Headers map[string]string
	// Payload is the full state; must be nil for a tombstone.
	Payload []byte
	// Now becomes updated_at.
	Now time.Time
}

// LatestUpserted is the outcome of LatestUpsert.
type LatestUpserted struct {
	// Accepted reports that the state was written (Version ≥ stored version).
	Accepted bool
	// Generation is the row's new write generation; 0 when refused.
	Generation int64
}

// LatestFetchParams selects due PENDING rows of a target.
type LatestFetchParams struct {
	Target string
	// Limit caps the batch; <= 0 means the driver's LimitDefault.
	Limit int
	// Now decides which failed rows have waited out their backoff.
	Now time.Time
}

// LatestRef names one generation of one row.
type LatestRef struct {
	Key        string
	Generation int64
}

// LatestMarkSentParams confirms delivered rows, each at the generation read.
type LatestMarkSentParams struct {
	Target string
	Rows   []LatestRef
	// Now becomes sent_at.
	Now time.Time
}

// LatestFailParams records a failed delivery of one generation of a row.
type LatestFailParams struct {
	Target     string
	Key        string
	Generation int64
	Error      string // stored as StoredText bounds it
	// NextAttemptAt is when the row may be tried again.
	NextAttemptAt time.Time
	// MaxAttempts is the attempt limit: attempts+1 ≥ MaxAttempts makes it DEAD.
	MaxAttempts int
	Now         time.Time
}

// LatestRecord is one stored latest-state row.
type LatestRecord struct {
	Target        string
	Topic         string
	Key           string
	Version       int64
	Generation    int64
	Type          relaytype.EventType
	Headers       map[string]string
	Payload       []byte
	State         string
	Attempts      int
	NextAttemptAt time.Time // zero: NULL
	LastError     string
	UpdatedAt     time.Time
	SentAt        time.Time // zero: NULL
}
