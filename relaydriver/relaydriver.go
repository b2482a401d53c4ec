// Package relaydriver defines the seam between the relay engine and its stores.
// The engine sees only these interfaces; relaypgx (PostgreSQL, pgx v5) and
// relaysqlite (SQLite, modernc.org/sqlite) implement them, and
// relaydrivertest.Exercise holds both to one behaviour.
//
// Every time a query stamps or compares is passed in as a parameter (Now fields):
// the store never reads its own clock, so tests drive time.
//
// Errors are mapped at the boundary: a missing row is relaytype.ErrNotFound, a
// unique or state-guard refusal is relaytype.ErrConflict, and connection loss,
// serialization failures and deadlocks wrap relaytype.ErrTransient.
package relaydriver

import (
	"context"
	"io/fs"
	"time"

	"github.com/relayhq/relay/relaytype"
)

// Driver is a store. Implementations are safe for concurrent use.
type Driver interface {
	// Name is the dialect name ("postgres", "sqlite"); apps use it to pick their
	// per-dialect migration files and SQL, never to branch engine behaviour.
	Name() string
	// GetExecutor returns an executor that runs each call in its own implicit
	// transaction (autocommit).
	GetExecutor() Executor
	// Begin starts a transaction. The caller must Commit or Rollback it.
	Begin(ctx context.Context) (ExecutorTx, error)
	// SupportsSkipLocked reports whether claims may use FOR UPDATE SKIP LOCKED
	// (PostgreSQL). Without it the store serialises writers (SQLite: one writer).
	SupportsSkipLocked() bool
	// SupportsListenNotify reports whether the store can wake listeners on commit.
	SupportsListenNotify() bool
	// MigrationFS returns the embedded migration files of the engine's own lines
	// ("engine"), laid out as <line>/NNN_name.up.sql.
	MigrationFS() fs.FS
	// Migrator returns the migration bookkeeping of this store.
	Migrator() Migrator
	// TryLock takes the exclusive lock named name for this process (instance
	// exclusion, seed 000 §4.5 PRE-5). It returns relaytype.ErrLocked at once when
	// another live holder has it. PostgreSQL holds a session advisory lock on a
	// dedicated connection (released when the process dies); SQLite holds a lease
	// row that the holder renews and that expires after TTL.
	TryLock(ctx context.Context, params *LockParams) (Lock, error)
	// Close releases the store's connections.
	Close() error
}

// Listener is implemented by stores whose SupportsListenNotify is true: they
// can wake a process when a transaction that appended outbox events commits,
// so idle-to-delivered latency is milliseconds rather than a poll interval.
type Listener interface {
	// ListenOutbox returns a channel that receives a value soon after each
	// commit that appended outbox events for target. Values are coalesced (the
	// channel has a buffer of one and the store never blocks on it). The
	// channel is closed when ctx ends or the listening connection is lost; the
	// caller keeps polling and may listen again. ctx governs the listening
	// connection.
	ListenOutbox(ctx context.Context, target string) (<-chan struct{}, error)
}

// LockParams names an exclusive lock.
type LockParams struct {
	// Name identifies the lock, e.g. "pipeline:<name>".
	Name string
	// Owner identifies the holder (host/pid/random) in diagnostics and lease rows.
	Owner string
	// TTL is how long a lease lives without renewal (lease-based stores only).
	TTL time.Duration
	// Now is the current time (lease-based stores only).
	Now time.Time
}

// Lock is a held exclusive lock.
type Lock interface {
	// Renew proves the lock is still held and extends a lease to now+TTL. It
	// returns relaytype.ErrLocked when the lock was lost; the holder must then stop
	// writing state the lock protects.
	Renew(ctx context.Context, now time.Time) error
	// Release gives the lock up. Safe to call more than once.
	Release(ctx context.Context) error
}

// Migrator is the store side of relaymigrate: it records which versions of which
// line are applied and applies one version atomically.
type Migrator interface {
	// AppliedVersions returns the applied versions of line, ascending.
	AppliedVersions(ctx context.Context, line string) ([]int, error)
	// Apply runs sql and records (line, version, name, now) in one transaction.
	Apply(ctx context.Context, line string, version int, name, sql string, now time.Time) error
}

// Rows is the result of a raw query.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// Row is the result of a raw single-row query. Scan returns
// relaytype.ErrNotFound when there was no row.
type Row interface {
	Scan(dest ...any) error
}

// Querier runs raw SQL in the store's own dialect. Apps use it for their own
// tables inside the engine's transaction; the engine itself never does.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (rowsAffected int64, err error)
	Query(ctx context.Context, sql string, args ...any) (Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) Row
}

// ExecutorTx is an Executor bound to one transaction.
type ExecutorTx interface {
	Executor
	// Savepoint opens a named savepoint; RollbackTo undoes work since it and
	// ReleaseSavepoint forgets it. Used to batch several messages into one
	// transaction while keeping per-message failure isolation.
	Savepoint(ctx context.Context, name string) error
	RollbackTo(ctx context.Context, name string) error
	ReleaseSavepoint(ctx context.Context, name string) error
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
	// Unwrap returns the driver's own transaction (pgx.Tx or *sql.Tx) for apps
	// that need dialect features.
	Unwrap() any
}

// Executor is the engine's query surface. Methods run in the executor's
// transaction (ExecutorTx) or in their own (GetExecutor).
type Executor interface {
	Querier
	OutboxExecutor
	AckExecutor
	LatestExecutor
	ArchiveExecutor
	AdminExecutor

	// MessageInsertMany inserts each message unless (pipeline, id) exists
	// ("insert if absent", seed 000 §4.1 step 5) and returns how many were new.
	// A message with ID 0 gets a store-allocated id (returned in the result in
	// input order). State is PENDING.
	//
	// An input with an Identity is inserted already bound to it, unless a
	// message of its pipeline already holds that identity (bound at insert or
	// later by MessageBindIdentity, ARCHIVED shadows included): then no row is
	// inserted and the result reports the input as a duplicate of that message.
	// The outcome is the one of inserting the inputs one by one in input order:
	// of two inputs with one identity the first is inserted and the second is
	// its duplicate; an input whose explicit ID is already present is reported
	// as present (IDs[i] = ID, not a duplicate, the row untouched) whatever its
	// identity, as intake's re-reads are. A concurrent writer inserting the same
	// identity makes the call wait for it (PostgreSQL) and then report the
	// duplicate, so two transactions never both insert one identity. A
	// duplicate takes no row (a store may skip an id it allocated for it).
	MessageInsertMany(ctx context.Context, params []*MessageInsertParams) (*MessageInsertResult, error)
	// MessageGet returns one message or relaytype.ErrNotFound.
	MessageGet(ctx context.Context, pipeline string, id int64) (*relaytype.Message, error)
	// MessageListUnfinished returns up to Limit PENDING/FAILED messages with
	// id > AfterID in ascending id order (ARCHIVED excluded explicitly). The first
	// row is the FIFO head (seed 000 §1.1).
	MessageListUnfinished(ctx context.Context, params *MessageListUnfinishedParams) ([]*relaytype.Message, error)
	// MessageBindIdentity binds identity to the message when its identity is still
	// NULL, as one independent idempotent statement (seed 000 §2). OwnerID is the
	// id holding the identity afterwards: the message itself, or another message
	// (a duplicate). A message already bound to a different identity keeps it and
	// reports itself as owner with Identity set to its existing key.
	MessageBindIdentity(ctx context.Context, params *MessageBindIdentityParams) (*MessageBindIdentityResult, error)
	// MessageBindIdentities is MessageBindIdentity for several messages of one
	// pipeline in as few round trips as the store allows (one on PostgreSQL),
	// with the same result as calling MessageBindIdentity for each input in
	// order: each binding is independent and idempotent (seed 000 §2); a
	// message already bound keeps its identity and owns it; an identity owned
	// by another message makes the input a duplicate of that owner; an
	// identity repeated within the call is owned by its first unbound input,
	// and the later ones are its duplicates. An unknown id is
	// relaytype.ErrNotFound. On error the caller must assume nothing about
	// which inputs were bound (bindings are idempotent: binding again is
	// safe). Outside a transaction a store may commit the bindings without
	// waiting for their durable flush, as MessageBindIdentity does on
	// PostgreSQL. Empty IDs is a no-op with an empty result.
	MessageBindIdentities(ctx context.Context, params *MessageBindIdentitiesParams) (*MessageBindIdentitiesResult, error)
	// MessageComplete moves an unfinished message to a terminal state
	// (SUCCEEDED/SKIPPED/DEAD) and records the acknowledgement intent in the same
	// UPDATE. It refuses (ErrConflict) when the message is no longer
	// PENDING/FAILED or, with LeaseOwner set, no longer leased to that owner.
	MessageComplete(ctx context.Context, params *MessageCompleteParams) error
	// MessageCompleteMany is MessageComplete for several messages at once, with
	// the same guard per row, in as few statements as the store allows (one on
	// PostgreSQL). It is all or nothing: when any row's guard refuses it returns
	// relaytype.ErrConflict naming the first refused id (relaytype.ErrNotFound
	// when that message does not exist), and no row of the call may commit. On
	// GetExecutor it runs in a transaction of its own and applies nothing on
	// error; in an ExecutorTx rows before the refused one may already be updated
	// in the transaction, which the caller must then roll back. The same message
	// twice is refused the second time. An empty params is a no-op.
	MessageCompleteMany(ctx context.Context, params []*MessageCompleteParams) error
	// MessageFail records one failed attempt: state FAILED, attempts+1, class,
	// error text and next attempt time. Guarded like MessageComplete. Returns the
	// new attempt count.
	MessageFail(ctx context.Context, params *MessageFailParams) (int, error)
	// MessageExhaust moves a FAILED message whose attempts reached MaxAttempts to
	// DEAD(EXHAUSTED) with its acknowledgement intent in one statement, keeping
	// LastError (seed 000 §3, §5.1 step 3). ErrConflict when the guard fails.
	MessageExhaust(ctx context.Context, params *MessageExhaustParams) error
	// MessageClaim leases up to Limit ready messages (PENDING, or FAILED whose
	// next attempt is due) that are not leased, in ascending id order. With
	// PerKey set it takes only each key's head (smallest unfinished id of the
	// key) and only for keys with no live lease. Uses FOR UPDATE SKIP LOCKED where
	// supported, in a short transaction that only takes the lease.
	MessageClaim(ctx context.Context, params *MessageClaimParams) ([]*relaytype.Message, error)
	// MessageLeaseRenew extends to LeaseUntil, in one statement, the leases
	// that Owner still holds on the given unfinished messages, and reports in
	// Lost the ids that are no longer Owner's: finished, released, leased to
	// another owner, or unknown. A lease that expired but that nobody took is
	// still Owner's and is renewed. A row another transaction holds locked
	// at that moment (PostgreSQL; typically Owner's own terminal write, not
	// yet committed) is skipped rather than waited for: it is neither renewed
	// nor reported lost, and the next renewal decides it. An empty IDs is a
	// no-op.
	MessageLeaseRenew(ctx context.Context, params *MessageLeaseRenewParams) (*MessageLeaseRenewResult, error)
	// MessageLeaseRelease clears every lease Owner holds on unfinished
	// messages of Pipeline, so that they are claimable at once, and returns
	// how many it cleared. It is only safe for an owner that is known to be
	// dead (an earlier incarnation of a restarted instance, see
	// relay.Config.InstanceID): a live owner's terminal writes would then be
	// refused and its work lost, though never applied twice.
	MessageLeaseRelease(ctx context.Context, params *MessageLeaseReleaseParams) (int, error)
	// MessageReplay moves FAILED/DEAD messages whose class is in Classes back to
	// PENDING, resetting attempts, next attempt, error and acknowledgement facts but
	// never the identity (seed 000 §9.1). IDs, when set, limits the replay to them.
	// Returns the number replayed.
	MessageReplay(ctx context.Context, params *MessageReplayParams) (int, error)
	// MessageStats aggregates a pipeline: counts per state and the oldest
	// unfinished message's enqueue time. ARCHIVED rows are counted under their own
	// state and never as backlog.
	MessageStats(ctx context.Context, pipeline string) (*MessageStats, error)
	// MessageExists reports whether any message exists in the pipeline.
	MessageExists(ctx context.Context, pipeline string) (bool, error)

	// CursorGet returns the pipeline's cursor or relaytype.ErrNotFound.
	CursorGet(ctx context.Context, pipeline string) (*relaytype.Cursor, error)
	// CursorSave writes (W, holeSince) for the pipeline, creating the row if needed.
	// It never changes SeededAt/SeedMode.
	CursorSave(ctx context.Context, params *CursorSaveParams) error
	// CursorSeed stores the first watermark with SeededAt (seed 000 §4.3). It
	// returns relaytype.ErrSeedRefused when the pipeline already has a cursor or
	// any message; the check and the insert are atomic.
	CursorSeed(ctx context.Context, params *CursorSeedParams) error

	// HoleInsert logs a permanent hole (idempotent on (pipeline, id)).
	HoleInsert(ctx context.Context, hole *relaytype.Hole) error
	// HoleList returns the pipeline's permanent holes in id order.
	HoleList(ctx context.Context, pipeline string) ([]*relaytype.Hole, error)
}

// MessageInsertParams is one message to insert if absent.
type MessageInsertParams struct {
	Pipeline string
	ID       int64 // 0: allocate
	Key      string
	// Identity is the business identity the message is inserted bound to
	// ("": none, bound later by a decoder if at all). A message of the
	// pipeline already holding it makes the input a duplicate (see
	// MessageInsertMany).
	Identity   string
	Payload    []byte
	ReceivedAt time.Time // zero: NULL
	Now        time.Time // becomes EnqueuedAt and UpdatedAt
}

// MessageInsertResult reports an insert batch.
type MessageInsertResult struct {
	// Inserted counts new rows; rows already present and duplicates are
	// neither counted nor errors.
	Inserted int
	// IDs holds each input's id in input order: the new or already present
	// message (allocated ids filled in), or for a duplicate the message that
	// holds its identity.
	IDs []int64
	// Duplicate reports, per input in input order, that no row was inserted
	// because the message IDs[i] already holds the input's Identity.
	Duplicate []bool
}

// MessageListUnfinishedParams selects the head of a FIFO queue.
type MessageListUnfinishedParams struct {
	Pipeline string
	AfterID  int64 // 0 from the start
	Limit    int
}

// MessageBindIdentityParams binds a business identity.
type MessageBindIdentityParams struct {
	Pipeline string
	ID       int64
	Identity string
}

// MessageBindIdentityResult is the owner of the identity after binding.
type MessageBindIdentityResult struct {
	OwnerID  int64
	Identity string
}

// MessageBindIdentitiesParams binds business identities to several messages
// of one pipeline, in input order.
type MessageBindIdentitiesParams struct {
	Pipeline string
	// IDs are the messages, in the order their bindings are decided (the FIFO
	// order). Required: as many as Identities.
	IDs []int64
	// Identities are the identities to bind, one per id; none may be empty.
	Identities []string
}

// MessageBindIdentitiesResult is the outcome of each input of
// MessageBindIdentities, in input order.
type MessageBindIdentitiesResult struct {
	// Owners holds, per input, the id owning its identity after the call: the
	// input's own id when the message holds it (bound now or before), another
	// id when the input is a duplicate of that message.
	Owners []int64
	// Identities holds, per input, the identity the owner holds: the input's
	// identity, or the message's existing identity when it was already bound
	// (which it keeps).
	Identities []string
}

// MessageCompleteParams finishes a message.
type MessageCompleteParams struct {
	Pipeline   string
	ID         int64
	State      relaytype.State // SUCCEEDED, SKIPPED or DEAD
	ErrorClass relaytype.ErrorClass
	LastError  string // error text, or the skip reason (duplicate-of:<id>, ignored:<rule>)
	// AckIntent records that an acknowledgement is owed (AckNextAt = Now).
	AckIntent bool
	// LeaseOwner, when set, requires the message to be leased to this owner.
	LeaseOwner string
	Now        time.Time
}

// MessageFailParams records a failed attempt.
type MessageFailParams struct {
	Pipeline      string
	ID            int64
	ErrorClass    relaytype.ErrorClass
	LastError     string
	NextAttemptAt time.Time
	LeaseOwner    string
	Now           time.Time
}

// MessageExhaustParams exhausts a FAILED message.
type MessageExhaustParams struct {
	Pipeline    string
	ID          int64
	MaxAttempts int
	AckIntent   bool
	Now         time.Time
}

// MessageClaimParams leases ready messages.
type MessageClaimParams struct {
	Pipeline   string
	PerKey     bool
	Limit      int
	Owner      string
	LeaseUntil time.Time
	Now        time.Time
	// SkipExpired tells the store that this call need not search for expired
	// leases (a hint: a store may return them anyway). Claimers set it on most
	// calls and leave it off now and then, so that recovering a crashed
	// instance's messages does not cost every claim a scan of the leased rows.
	// Default false: expired leases are claimed like unleased rows.
	SkipExpired bool
}

// MessageLeaseRenewParams extends the leases of messages in flight.
type MessageLeaseRenewParams struct {
	Pipeline string
	// Owner is the lease owner whose leases are extended. Required.
	Owner string
	// IDs are the messages whose leases are extended.
	IDs []int64
	// LeaseUntil is the new expiry of every renewed lease. Required.
	LeaseUntil time.Time
}

// MessageLeaseRenewResult reports a renewal.
type MessageLeaseRenewResult struct {
	// Lost holds the ids of the input that are no longer leased to Owner
	// (finished, released, leased to another owner, or unknown), ascending.
	Lost []int64
}

// MessageLeaseReleaseParams names the leases to release.
type MessageLeaseReleaseParams struct {
	Pipeline string
	// Owner is the (dead) lease owner whose leases are cleared. Required.
	Owner string
}

// MessageReplayParams selects messages to replay.
type MessageReplayParams struct {
	Pipeline string
	Classes  []relaytype.ErrorClass // required; only these classes move
	IDs      []int64                // optional filter
	Now      time.Time
}

// MessageStats is a pipeline aggregate.
type MessageStats struct {
	// Counts per state, ARCHIVED included under its own key.
	Counts map[relaytype.State]int64
	// OldestUnfinishedEnqueuedAt is zero when nothing is unfinished.
	OldestUnfinishedEnqueuedAt time.Time
	// MaxID is the largest message id (0 when empty).
	MaxID int64
}

// Backlog returns the number of unfinished (PENDING + FAILED) messages.
func (s *MessageStats) Backlog() int64 {
	return s.Counts[relaytype.StatePending] + s.Counts[relaytype.StateFailed]
}

// CursorSaveParams saves a watermark.
type CursorSaveParams struct {
	Pipeline  string
	Watermark int64
	HoleSince time.Time // zero: NULL
	Now       time.Time
}

// CursorSeedParams seeds a watermark at cutover.
type CursorSeedParams struct {
	Pipeline  string
	Watermark int64
	Mode      string
	Now       time.Time
}

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
	// the sink confirmed the events (seed 000 §8.1).
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

// Outbox event types; they match relaysink.Upsert and relaysink.Tombstone.
const (
	// OutboxUpsert carries a payload.
	OutboxUpsert = "UPSERT"
	// OutboxTombstone removes the key's state; its payload is NULL.
	OutboxTombstone = "TOMBSTONE"
)

// OutboxAppendParams is one event to append (seed 000 §8.1).
type OutboxAppendParams struct {
	// EventID is the stable, unique event id consumers dedupe by. Required.
	EventID string
	// Target names the dispatcher (sink) that delivers the event. Required.
	Target string
	// Topic is the destination inside the sink.
	Topic string
	// Key is the ordering (partition) key; seqs are allocated per (Target, Key).
	Key string
	// Type is OutboxUpsert or OutboxTombstone.
	Type string
	// Headers are delivered with the event (stored as JSON text).
	Headers map[string]string
	// Payload is the body; must be nil for a tombstone.
	Payload []byte
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
}

// OutboxFailParams records a failed delivery.
type OutboxFailParams struct {
	ID    int64
	Error string
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

// OutboxRecord is one stored outbox event.
type OutboxRecord struct {
	ID            int64
	EventID       string
	Target        string
	Topic         string
	Key           string
	Seq           int64
	Type          string
	Headers       map[string]string
	Payload       []byte
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
