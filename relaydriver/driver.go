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
	// Name identifies the lock, e.g. "pipeline:<queue>".
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

	// MessageInsertMany inserts each message unless (queue, id) exists
	// ("insert if absent", seed 000 §4.1 step 5) and returns how many were new.
	// A message with ID 0 gets a store-allocated id (returned in the result in
	// input order). State is PENDING.
	//
	// An input with an Identity is inserted already bound to it, unless a
	// message of its queue already holds that identity (bound at insert or
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
	MessageGet(ctx context.Context, queue string, id int64) (*relaytype.Message, error)
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
	// queue in as few round trips as the store allows (one on PostgreSQL),
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
	// messages of Queue, so that they are claimable at once, and returns
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
	// MessageStats aggregates a queue: counts per state and the oldest
	// unfinished message's enqueue time. ARCHIVED rows are counted under their own
	// state and never as backlog.
	MessageStats(ctx context.Context, queue string) (*MessageStats, error)
	// MessageExists reports whether any message exists in the queue.
	MessageExists(ctx context.Context, queue string) (bool, error)

	// CursorGet returns the queue's cursor or relaytype.ErrNotFound.
	CursorGet(ctx context.Context, queue string) (*relaytype.Cursor, error)
	// CursorSave writes (W, holeSince) for the queue, creating the row if needed.
	// It never changes SeededAt/SeedMode.
	CursorSave(ctx context.Context, params *CursorSaveParams) error
	// CursorSeed stores the first watermark with SeededAt (seed 000 §4.3). It
	// returns relaytype.ErrSeedRefused when the queue already has a cursor or
	// any message; the check and the insert are atomic.
	CursorSeed(ctx context.Context, params *CursorSeedParams) error

	// HoleInsert logs a permanent hole (idempotent on (queue, id)).
	HoleInsert(ctx context.Context, hole *relaytype.Hole) error
	// HoleList returns the queue's permanent holes in id order.
	HoleList(ctx context.Context, queue string) ([]*relaytype.Hole, error)
	// HoleListUnfound returns up to limit of the queue's holes that are not
	// found late yet and were released at or after releasedSince, in id order:
	// the holes the intake still checks for a late row. limit must be positive.
	HoleListUnfound(ctx context.Context, queue string, releasedSince time.Time, limit int) ([]*relaytype.Hole, error)
	// HoleListFound returns the queue's holes whose row was found late, in id
	// order, ingested or not.
	HoleListFound(ctx context.Context, queue string) ([]*relaytype.Hole, error)
	// HoleMarkFound records that the hole's row committed late (FoundAt = at).
	// It reports false, changing nothing, when the hole does not exist or was
	// already found, so a finding is counted once.
	HoleMarkFound(ctx context.Context, queue string, id int64, at time.Time) (bool, error)
	// HoleMarkIngested records that the found hole's row was ingested as the
	// new message messageID. It reports false, changing nothing, when the hole
	// does not exist, was not found or was already ingested; call it in the
	// transaction that enqueues the message, so a second ingest enqueues
	// nothing.
	HoleMarkIngested(ctx context.Context, queue string, id, messageID int64, at time.Time) (bool, error)
}
