package relay

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relayhq/relay/internal/dispatch"
	"github.com/relayhq/relay/internal/service"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaytype"
)

// Defaults of DispatcherConfig. A zero field takes its default.
const (
	// DispatchBatchSizeDefault is how many events one round fetches (and one
	// sink call publishes): 2000. Measured in docs/outbox.md: the relay rate
	// rises up to about 2,000 and is flat beyond.
	DispatchBatchSizeDefault = dispatch.BatchSizeDefault
	// DispatchMaxAttemptsDefault is the default delivery attempt limit: 10.
	DispatchMaxAttemptsDefault = dispatch.MaxAttemptsDefault
	// PublishTimeoutDefault bounds one sink Publish call: 10s.
	PublishTimeoutDefault = dispatch.PublishTimeoutDefault
	// DispatchStandbyIntervalDefault is how often a standby dispatcher tries
	// to take its target's lock: 1s.
	DispatchStandbyIntervalDefault = dispatch.StandbyIntervalDefault
)

// DispatcherConfig configures a Dispatcher. Target is required; every other zero
// field takes the default named in its comment.
type DispatcherConfig struct {
	// Target names the outbox events this dispatcher delivers (OutboxEvent.Target),
	// e.g. "kafka:msg". Required.
	Target string
	// Kind is what the dispatcher delivers: DispatchEvents (the outbox's
	// events, the default) or DispatchLatest (the target's latest-state rows,
	// seed 000 §8.2; see latest.go).
	Kind DispatchKind
	// BatchSize is how many events one round fetches and publishes in one sink
	// call. Default DispatchBatchSizeDefault (2000).
	BatchSize int
	// MaxAttempts is the delivery attempt limit: an event whose delivery failed
	// MaxAttempts times becomes DEAD, kept as the DLQ (seed 000 §8.1). Default
	// DispatchMaxAttemptsDefault (10).
	MaxAttempts int
	// Backoff is the retry schedule: after the n-th failed delivery the event (and
	// so its key) waits Backoff[n-1]. Like Config.Backoff (seed 000 §9.1) it
	// has at most MaxAttempts-1 levels (more is refused: a level that can never
	// fire) and may have fewer, its last level then repeating for the remaining
	// attempts. Nil or empty: DoublingBackoff(1s, MaxAttempts-1).
	Backoff []time.Duration
	// PublishTimeout bounds each sink Publish call on Clock; events not
	// confirmed by then count as failed. Default PublishTimeoutDefault (10s).
	PublishTimeout time.Duration
	// PollInterval is how long a started dispatcher waits on Clock between idle
	// rounds (Notify wakes it at once). Default PollIntervalDefault (1s).
	PollInterval time.Duration
	// Clock is the only source of time. Default relayclock.System{}.
	Clock relaytype.Clock
	// Logger receives structured logs (never payloads). Default slog.Default().
	Logger *slog.Logger
	// Registerer, when set, receives relay_outbox_events_total{target,outcome}
	// and relay_outbox_pending{target}. Default nil: no metrics.
	Registerer prometheus.Registerer
	// Owner names this dispatcher in its target lock (lease rows on SQLite)
	// and logs. It must differ between dispatchers of one target. Default
	// "<hostname>/<pid>/<random>", unique per Dispatcher.
	Owner string
	// LockTTL is the lease length of the target lock on lease-based stores
	// (SQLite): a standby takes over a dead holder's target after at most
	// LockTTL. PostgreSQL frees the lock with the holder's session at once. The
	// holder proves it still holds the lock every LockTTL/3. Default
	// relaylock.TTLDefault (15s).
	LockTTL time.Duration
	// StandbyInterval is how often, on Clock, a standby tries to take the
	// target lock, and so bounds how long a target waits after its active
	// dispatcher stopped or died. Default DispatchStandbyIntervalDefault (1s).
	StandbyInterval time.Duration
	// DigestKeys makes the dispatcher's logs and the failure text it stores
	// (last_error, a sink's PublishError text included) carry a digest of an
	// event's key ("key_digest": the first 8 bytes of its SHA-256, in hex; the
	// same key always gives the same digest) instead of the key, for keys that
	// hold business values — a table's primary key, a phone number. Default
	// off: the key itself is logged.
	DigestKeys bool
	// DeleteDelivered makes the dispatcher delete each event once its sink
	// confirmed it, instead of marking it SENT (DispatchEvents only; a
	// latest-state row is one per key and stays). Every other rule is the
	// same: only what the sink confirmed is removed, per key in seq order,
	// and a crash that loses the latest deletes delivers those events again.
	// What it gives up is the SENT history: Stats().Sent stays 0, Retention
	// has nothing to delete for the target, and an event id is unique only
	// among the target's events still kept (PENDING and DEAD). What it saves
	// on PostgreSQL is the SENT row version: a mark is never heap-only (the
	// state is in the partial indexes' predicates) and adds an entry to four
	// indexes; a delete adds none (docs/outbox.md, "Delete on delivery").
	// Default off: SENT rows are kept until Retention deletes them.
	DeleteDelivered bool
}

// Dispatcher delivers the outbox events of one Target to a sink (seed 000
// §8.1): it freezes the batch it fetched, publishes it in one sink call, marks
// SENT only what the sink confirmed, and retries the rest with backoff — a
// failing head pauses only its own key — until DEAD at MaxAttempts (kept as the
// DLQ). Delivery is at least once in per-key commit order; consumers dedupe by
// event ID. Run it with Start/Stop, or with Work. Safe for concurrent use;
// Work calls never overlap (within one, a batch is settled while the next one,
// of other keys, is fetched and published; see Work).
//
// Several dispatchers of one Target (and Kind) may run, in one process or in
// many: a dispatcher delivers only while it holds the target's store lock
// (relaylock; "outbox:<kind>:<target>"), and the others wait as
// standbys that take over when the holder stops or dies (docs/outbox.md,
// "Several dispatchers of one target").
type Dispatcher struct {
	x *dispatch.Dispatcher
}

// NewDispatcher validates cfg (naming the bad field) and returns a dispatcher
// of cfg.Target on store d delivering to sink. It does no I/O.
func NewDispatcher(d relaydriver.Driver, sink relaysink.Sink, cfg DispatcherConfig) (*Dispatcher, error) {
	x, err := dispatch.New(d, sink, dispatch.Config{
		Target: cfg.Target, Kind: dispatch.Kind(cfg.Kind), BatchSize: cfg.BatchSize, MaxAttempts: cfg.MaxAttempts,
		Backoff: cfg.Backoff, PublishTimeout: cfg.PublishTimeout, PollInterval: cfg.PollInterval,
		Owner: cfg.Owner, LockTTL: cfg.LockTTL, StandbyInterval: cfg.StandbyInterval, DigestKeys: cfg.DigestKeys,
		DeleteDelivered: cfg.DeleteDelivered,
		Common:          service.Common{Clock: cfg.Clock, Logger: cfg.Logger, Registerer: cfg.Registerer},
	})
	if err != nil {
		return nil, err
	}
	return &Dispatcher{x: x}, nil
}

// Target returns the target the dispatcher delivers.
func (x *Dispatcher) Target() string { return x.x.Target() }

// Start checks that the store's engine schema is current (an old schema is
// refused with relaytype.ErrSchemaOutdated) and starts the dispatch loop, which
// runs until Stop. A dispatcher starts at most once.
//
// The loop first tries the target lock. Start returns once the dispatcher is
// either active — it holds the lock and, on a store with LISTEN/NOTIFY, its
// listener is established, so an event committed after Start returns wakes it
// without waiting for PollInterval — or a standby, because another dispatcher
// holds the lock (that one listens; a standby listens only once it takes
// over). A LISTEN that fails at this point fails Start. When ctx ends first,
// Start stops the loop and returns ctx's error. ctx governs only Start itself;
// the loop runs until Stop.
func (x *Dispatcher) Start(ctx context.Context) error { return x.x.Start(ctx) }

// Stop asks the loop to take no more batches and waits for the round in
// flight, then gives the target lock up so that a standby takes over at once.
// When ctx ends first it cancels the round (the sink call's ctx) and returns
// ctx.Err(); unconfirmed events stay PENDING and are sent again later. Stop on
// a dispatcher never started returns nil; calling it again is harmless. Stop
// does not close the sink.
func (x *Dispatcher) Stop(ctx context.Context) error { return x.x.Stop(ctx) }

// Notify wakes an idle started dispatcher so events committed just now are
// delivered without waiting for PollInterval. It never blocks.
func (x *Dispatcher) Notify() { x.x.Notify() }

// Active reports whether this dispatcher's started loop holds its target's
// lock, i.e. delivers; false for a standby, and before Start and after Stop.
func (x *Dispatcher) Active() bool { return x.x.Active() }

// DispatcherStats is a dispatcher's progress (Dispatcher.Stats).
type DispatcherStats struct {
	// Pending, Sent and Dead count the target's events per state (for Kind
	// DispatchLatest, its latest-state rows). Pending includes events waiting
	// for a retry; Sent counts only what retention has not deleted yet.
	Pending, Sent, Dead int64
	// OldestPending is the age, on the dispatcher's clock, of the oldest
	// PENDING event (since it was appended; for latest-state rows, since the
	// row's last accepted write or failure record). 0 when nothing is
	// pending.
	OldestPending time.Duration
	// Active reports whether this dispatcher holds the target lock and
	// delivers (see Active).
	Active bool
}

// Stats returns the target's counts and oldest pending age, read from the
// store (one GROUP BY statement over the target's rows; ctx governs it), and
// whether this dispatcher is active. Any dispatcher of the target — active,
// standby or never started — reads the same counts.
func (x *Dispatcher) Stats(ctx context.Context) (DispatcherStats, error) {
	st, err := x.x.Stats(ctx)
	return DispatcherStats{Pending: st.Pending, Sent: st.Sent, Dead: st.Dead, OldestPending: st.OldestPending, Active: st.Active}, err
}

// Work runs dispatch rounds until nothing is ready and returns how many events
// reached an outcome (sent, retry or dead). Each round fetches a batch — frozen:
// only what that fetch returned is published and marked; events committed
// meanwhile wait for a later round — publishes it in one sink call bounded by
// PublishTimeout, then settles it: marks every confirmed event SENT in one
// statement, and for each key not wholly confirmed records one failure on its
// first unconfirmed event (its later events stay PENDING behind it).
//
// Rounds of events (DispatchEvents) are pipelined: a batch is settled on a
// goroutine of its own while the next batch is fetched and published, and the
// next fetch leaves out every key of a batch not yet settled, so a key is
// never in two batches at once and its order and failure pause hold exactly as
// without the queue. Work returns after every batch it published is
// settled. A store error ends the call; events not yet marked are delivered
// again later (at least once).
//
// Work delivers only under the target lock: on a started dispatcher that is
// active it runs under the loop's lock; otherwise it takes the lock for the
// call, and when another dispatcher holds it, Work returns at once with an
// error wrapping relaytype.ErrLocked and delivers nothing. Losing the lock during the call ends it with an error
// wrapping relaylock.ErrLost.
func (x *Dispatcher) Work(ctx context.Context) (int, error) { return x.x.Work(ctx) }
