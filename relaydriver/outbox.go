package relaydriver

import (
	"context"
	"encoding/json"
	"time"

	"github.com/relayhq/relay/relaytype"
)

// OutboxExecutor is the store side of the transactional outbox (seed 000 §8.1,
// §8.3): events appended in the business transaction, fetched per key in commit
// order, marked SENT after the sink confirmed, failed with backoff into DEAD
// (kept as the DLQ), and SENT rows deleted after retention. See docs/outbox.md.
type OutboxExecutor interface {
	// OutboxAppend appends events and returns, in input order, each event's row
	// id and its per-(Target, Key) sequence number.
	//
	// It must be called in the caller's business transaction (the ExecutorTx
	// whose writes the events describe): the sequence is allocated there by
	// "INSERT INTO relay_outbox_key … ON CONFLICT (target, key) DO UPDATE SET
	// last_seq = last_seq + 1 RETURNING last_seq", which takes the key's row lock
	// until commit. Same-key writers therefore serialise, so per-key seq order is
	// commit order, a rolled-back transaction consumes no number, and a visible
	// seq s implies every smaller seq of the key is visible (no visibility gap,
	// docs/outbox.md). On GetExecutor the call runs in a transaction of its own,
	// which is only right for events that describe no other write.
	//
	// Keys of one call are locked in (target, key) order to avoid deadlocks
	// between calls; events of one key get ascending seqs in input order. A
	// duplicate EventID is relaytype.ErrConflict and nothing of the call is
	// applied (on PostgreSQL, as after any failed statement, the caller's
	// transaction is aborted and must be rolled back).
	OutboxAppend(ctx context.Context, params []*OutboxAppendParams) ([]OutboxAppended, error)
	// OutboxFetch returns up to Limit PENDING events of Target. For each key it
	// returns only a contiguous run starting at the key's smallest PENDING seq
	// (its head), and nothing at all for a key whose head waits for its backoff
	// (NextAttemptAt > Now) or that is in SkipKeys: a failing head pauses only
	// its own key (seed 000 §8.1).
	//
	// Keys are served in rotation (fairness across calls): first the keys
	// greater than AfterKey in ascending key order, then, wrapping around, the
	// keys up to and including AfterKey, each key with as much of its run as
	// Limit leaves. The result is in that serving order, each key's events
	// contiguous and in ascending seq, so the last record's key is where the
	// next call's rotation continues. The work of a call is bounded by the
	// keys it visits and the events it returns, not by the target's backlog.
	OutboxFetch(ctx context.Context, params *OutboxFetchParams) ([]*OutboxRecord, error)
	// OutboxMarkSent sets state SENT and sent_at = Now in one statement, only for
	// rows still PENDING, and returns how many rows it changed. Call it only after
	// the sink confirmed the events (seed 000 §8.1). With Delete it removes those
	// rows instead (same guard, same count).
	OutboxMarkSent(ctx context.Context, params *OutboxMarkSentParams) (int, error)
	// OutboxFail records one failed delivery of a PENDING event in one
	// statement: attempts+1, LastError, and either NextAttemptAt (state stays
	// PENDING, so the key waits) or, when attempts+1 ≥ MaxAttempts, state DEAD
	// (kept as the DLQ; the key continues with its next event). It returns
	// relaytype.ErrNotFound for an unknown id and relaytype.ErrConflict for a row
	// that is no longer PENDING.
	OutboxFail(ctx context.Context, params *OutboxFailParams) (*OutboxFailed, error)
	// OutboxDeleteSent deletes up to limit SENT events of target whose sent_at is
	// before sentBefore (retention, seed 000 §8.3) and returns how many it
	// deleted. PENDING and DEAD rows are never deleted, nor the per-key sequence
	// rows (a key's seq never restarts).
	OutboxDeleteSent(ctx context.Context, target string, sentBefore time.Time, limit int) (int, error)
	// OutboxList returns up to Limit events of Target (all states, or only
	// State) in (key, seq) order, for operators (the DLQ) and tests.
	OutboxList(ctx context.Context, params *OutboxListParams) ([]*OutboxRecord, error)
	// OutboxStats counts the events of target per state.
	OutboxStats(ctx context.Context, target string) (*OutboxStats, error)
}

// Outbox event states (seed 000 §8.1).
const (
	// OutboxPending is an event not yet confirmed by its sink (also while it
	// waits for a retry).
	OutboxPending = "PENDING"
	// OutboxSent is an event the sink confirmed.
	OutboxSent = "SENT"
	// OutboxDead is an event that exhausted its attempts, kept as the DLQ.
	OutboxDead = "DEAD"
)

// Outbox event types as the stores keep them (the type column's text); the
// values are relaytype's, declared once.
const (
	// OutboxUpsert carries a payload.
	OutboxUpsert = relaytype.EventUpsert
	// OutboxTombstone removes the key's state; its payload is NULL.
	OutboxTombstone = relaytype.EventTombstone
)

// OutboxAppendParams is one event to append: the event (Type set, Seq 0;
// see relaytype.Event.CheckAppend) and the time that becomes its created_at.
// Headers are stored as JSON text.
type OutboxAppendParams struct {
	relaytype.Event
	// Now becomes created_at.
	Now time.Time
}

// OutboxAppended is where an appended event landed.
type OutboxAppended struct {
	// ID is the row id (store-allocated; no ordering meaning across keys).
	ID int64
	// Seq is the event's position in its (Target, Key) sequence: 1, 2, 3 …
	Seq int64
}

// OutboxFetchParams selects ready events of a target.
type OutboxFetchParams struct {
	Target string
	// Limit caps the batch; <= 0 means the driver's LimitDefault.
	Limit int
	// Now decides which failed heads have waited out their backoff.
	Now time.Time
	// AfterKey is the rotation point: keys greater than AfterKey are served
	// first, then the rest from the smallest key (see OutboxFetch). "" starts
	// with the smallest non-empty key (the empty key, if any, comes last).
	AfterKey string
	// SkipKeys are keys whose events must not be returned at all: the caller
	// still has earlier events of them in flight (published, not yet marked).
	SkipKeys []string
}

// OutboxMarkSentParams confirms delivered events.
type OutboxMarkSentParams struct {
	IDs []int64
	// Now becomes sent_at.
	Now time.Time
	// Async lets the store commit the marks without waiting for them to be
	// durable (PostgreSQL: synchronous_commit off for this statement's
	// transaction; ignored inside a caller's transaction and by stores
	// without the notion). A crash can then lose the latest marks, and their
	// events are delivered again: at least once, never lost, since a mark is
	// only ever written after the sink confirmed.
	Async bool
	// Delete removes the confirmed rows still PENDING instead of marking them
	// SENT: no SENT row is kept (nothing for retention, OutboxStats.Sent does
	// not count them), and an event id is then unique only among the events
	// still kept. On PostgreSQL a delete adds no index entry, where a mark adds
	// a new version of the row to every index the state's predicates do not
	// exclude (docs/outbox.md, "Delete on delivery"). Now is still required
	// (Check) but not stored.
	Delete bool
}

// OutboxFailParams records a failed delivery.
type OutboxFailParams struct {
	ID    int64
	Error string // stored as StoredText bounds it
	// NextAttemptAt is when the event (and so its key) may be tried again.
	NextAttemptAt time.Time
	// MaxAttempts is the attempt limit: attempts+1 ≥ MaxAttempts makes it DEAD.
	MaxAttempts int
	Now         time.Time
}

// OutboxFailed is the outcome of OutboxFail.
type OutboxFailed struct {
	// Attempts is the new attempt count.
	Attempts int
	// Dead reports that the event reached its limit and is now DEAD.
	Dead bool
}

// OutboxListParams selects events to list.
type OutboxListParams struct {
	Target string
	// State, when set, lists only that state.
	State string
	// Limit caps the list; <= 0 means the driver's LimitDefault.
	Limit int
}

// OutboxRecord is one stored outbox event: the event as appended, with its
// Seq, and its delivery state.
type OutboxRecord struct {
	// RowID is the row id the store allocated: unique in the store, with no
	// ordering meaning across keys. Event.ID is the event's own id.
	RowID int64
	relaytype.Event
	State         string
	Attempts      int
	NextAttemptAt time.Time // zero: NULL
	LastError     string
	CreatedAt     time.Time
	SentAt        time.Time // zero: NULL
	UpdatedAt     time.Time
}

// OutboxStats counts a target's events per state.
type OutboxStats struct {
	Pending, Sent, Dead int64
	// OldestPendingAt is the smallest created_at of the target's PENDING
	// events (for latest-state rows, the smallest updated_at: each row's last
	// accepted write or failure record); zero when nothing is PENDING.
	OldestPendingAt time.Time
}

// StateCountRows is what ScanOutboxStats reads: pgx.Rows and *sql.Rows both
// satisfy it.
type StateCountRows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// ScanOutboxStats reads (state, count, oldest) rows — the result of a
// drivers' "GROUP BY state" statistics query over outbox or latest-state
// rows, oldest being the group's smallest time column in the driver's own
// representation T, which toTime converts — into OutboxStats. Unknown states
// are ignored. The caller closes rows and maps the returned error.
func ScanOutboxStats[T any](rows StateCountRows, toTime func(T) time.Time) (*OutboxStats, error) {
	st := &OutboxStats{}
	for rows.Next() {
		var (
			state  string
			n      int64
			oldest T
		)
		if err := rows.Scan(&state, &n, &oldest); err != nil {
			return nil, err
		}
		switch state {
		case OutboxPending:
			st.Pending = n
			st.OldestPendingAt = toTime(oldest)
		case OutboxSent:
			st.Sent = n
		case OutboxDead:
			st.Dead = n
		}
	}
	return st, rows.Err()
}

// EncodeHeaders encodes event or latest-state headers as the JSON text both
// drivers store: "{}" when there are none.
func EncodeHeaders(h map[string]string) (string, error) {
	if len(h) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(h)
	return string(b), err
}

// DecodeHeaders decodes stored headers; "" and "{}" are nil (no map is
// allocated for a row without headers).
func DecodeHeaders(s string) (map[string]string, error) {
	if s == "" || s == "{}" {
		return nil, nil
	}
	var h map[string]string
	if err := json.Unmarshal([]byte(s), &h); err != nil {
		return nil, err
	}
	return h, nil
}
