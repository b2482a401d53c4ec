package relay

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relayhq/relay/internal/backoff"
	"github.com/relayhq/relay/internal/service"
	"github.com/relayhq/relay/relaytype"
)

// Mode is how an Engine orders the messages of its queue.
type Mode int

const (
	// ModeFIFO processes the queue in strict global id order on one goroutine:
	// only the smallest unfinished id (PENDING or FAILED) — the head — may run, and
	// a FAILED head waiting for its backoff blocks everything behind it (seed 000
	// §5.1). It is the zero Mode and therefore the default.
	ModeFIFO Mode = iota
	// ModePerKey processes messages of one Key strictly in id order and different
	// keys in parallel (up to Config.Workers at a time). A failing head pauses only
	// its own key (seed 004 §10.4). Claims take each key's head under a lease.
	ModePerKey
	// ModeUnordered claims up to Config.BatchSize ready messages with
	// FOR UPDATE SKIP LOCKED in a short lease-only transaction and processes them in
	// parallel outside it, in no particular order (seed 002 §4.1). Several engines
	// (instances) may share one PostgreSQL store.
	ModeUnordered
)

// String returns the mode's name as ParseMode accepts it.
func (m Mode) String() string {
	switch m {
	case ModeFIFO:
		return "fifo"
	case ModePerKey:
		return "per-key"
	case ModeUnordered:
		return "unordered"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode returns the mode named s ("fifo", "per-key", "unordered";
// case-insensitive).
func ParseMode(s string) (Mode, error) {
	for _, m := range []Mode{ModeFIFO, ModePerKey, ModeUnordered} {
		if strings.EqualFold(s, m.String()) {
			return m, nil
		}
	}
	return 0, fmt.Errorf("relay: unknown mode %q (want fifo, per-key or unordered)", s)
}

// Defaults of Config. A zero field takes its default.
const (
	// MaxAttemptsDefault is the default attempt limit.
	MaxAttemptsDefault = 5
	// BackoffFirstDefault is the first level of the default backoff schedule,
	// 1s, which doubles from there (1s, 2s, 4s, …).
	BackoffFirstDefault = backoff.FirstDefault
	// BatchSizeDefault is the default claim size of the per-key and unordered modes.
	BatchSizeDefault = 100
	// WorkersDefault is the default concurrency of the per-key and unordered modes.
	WorkersDefault = 4
	// LeaseDurationDefault is the default lease of a claimed message. Leases
	// in flight are renewed every LeaseDuration/3 (5s), so a lease survives a
	// renewal stall — a slow store, a pause of the process — of up to 10s,
	// while the messages of an instance that died without a stable
	// InstanceID are claimable again within 15s (plus the quarter lease of
	// the expired-lease search: under 19s). It matches the queue lock's
	// TTL (relaylock), which makes the same trade.
	LeaseDurationDefault = 15 * time.Second
	// PollIntervalDefault is how long an idle engine (and an idle started
	// service) waits between rounds: 1s.
	PollIntervalDefault = service.PollIntervalDefault
	// HandlerTimeoutDefault bounds one handler call.
	HandlerTimeoutDefault = 30 * time.Second
	// FIFOBatchDefault is the default number of FIFO heads per transaction.
	FIFOBatchDefault = 1
	// FIFOBatchMax caps FIFOBatch. A larger batch spreads the per-transaction
	// costs (reading the heads, binding identities, the commit) over more
	// messages; the cap bounds the work redone when a batch is rolled back.
	FIFOBatchMax = 256
	// SavepointBatchMax is the most messages one savepoint fallback carries:
	// each is a savepoint, and PostgreSQL caches at most 64 subtransactions
	// per transaction before every snapshot of the server gets slower. A FIFO
	// batch longer than this falls back for its first SavepointBatchMax
	// messages; the others are heads of the next round.
	SavepointBatchMax = 64
	// TxBatchDefault is the default number of claimed messages per transaction
	// in the per-key and unordered modes.
	TxBatchDefault = 1
	// TxBatchMax caps TxBatch at SavepointBatchMax: a batch whose optimistic
	// run fails falls back to a savepoint per message.
	TxBatchMax = SavepointBatchMax
)

// ReplayableClassesDefault is the default replay whitelist. MALFORMED and
// PROTOCOL are absent on purpose: a message that is itself invalid does not get
// better by running again, so replaying it must be an explicit configuration.
var ReplayableClassesDefault = []relaytype.ErrorClass{
	relaytype.ClassCodec, relaytype.ClassInfra, relaytype.ClassUnsupported,
	relaytype.ClassTimeout, relaytype.ClassInternal, relaytype.ClassExhausted,
}

// DeadClassesDefault is the default set of classes that go to DEAD at once,
// without retry (seed 000 §3: MALFORMED and PROTOCOL need a human).
var DeadClassesDefault = []relaytype.ErrorClass{relaytype.ClassMalformed, relaytype.ClassProtocol}

// DoublingBackoff returns levels delays starting at first and doubling:
// DoublingBackoff(time.Second, 4) is [1s 2s 4s 8s].
func DoublingBackoff(first time.Duration, levels int) []time.Duration {
	return backoff.Doubling(first, levels)
}

// Config configures an Engine. Queue is required; every other zero field
// takes the default named in its comment. NewEngine copies the Config; later
// changes to the caller's value have no effect.
type Config struct {
	// Queue names the queue this engine processes. Required.
	Queue string
	// Mode orders processing. Default ModeFIFO.
	Mode Mode
	// Handler applies one message. If it also implements Decoder, each message
	// is decoded before identity binding and ignore rules. Nil makes a
	// producer-only engine: Enqueue, EnqueueTx, Replay, Stats and the other
	// store operations work, while Start and Work refuse with an error
	// wrapping ErrNoHandler — another process (or engine) with a Handler
	// processes the queue. Default nil.
	Handler Handler
	// MaxAttempts is the attempt limit: a message that failed MaxAttempts times
	// becomes DEAD(EXHAUSTED) (seed 000 §3). Default MaxAttemptsDefault (5).
	MaxAttempts int
	// Backoff is the retry schedule: after the n-th failed attempt the message
	// waits Backoff[n-1]. It has at most MaxAttempts-1 levels — a level that can
	// never fire is a configuration error caught at start-up (seed 000 §9.1) —
	// and may have fewer: the last level then repeats for the remaining
	// attempts, so changing the limit does not mean restating every delay
	// ([]time.Duration{time.Second, time.Minute} with MaxAttempts 5 waits 1s,
	// 1m, 1m, 1m). Nil or empty: DoublingBackoff(1s, MaxAttempts-1).
	Backoff []time.Duration
	// IgnoreRules lists message kinds this queue does not process: a decoded
	// message whose Decoded.Kind matches a rule becomes SKIPPED ignored:<rule>
	// without calling the handler. A rule is "TYPE-SUBTYPE" (one kind) or
	// "TYPE-*" (every subtype of TYPE), matched case-insensitively. Only decoded
	// messages can be ignored; their identity is still bound first.
	IgnoreRules []string
	// ReplayableClasses is the replay whitelist: Replay refuses any other class.
	// Default ReplayableClassesDefault (MALFORMED and PROTOCOL only if listed here).
	ReplayableClasses []relaytype.ErrorClass
	// DeadClasses are classes that go to DEAD at once, without retry, whether they
	// come from a decoder or a handler's Retry. Default DeadClassesDefault.
	DeadClasses []relaytype.ErrorClass
	// AckIntent makes every terminal state also record an acknowledgement intent
	// in the same statement (seed 000 §6.1), for queues whose source wants a
	// write-back. Default false.
	AckIntent bool
	// DeleteSucceeded (ModePerKey and ModeUnordered) deletes a message's row
	// in the transaction that finishes it SUCCEEDED, instead of keeping the
	// row as SUCCEEDED: the handler's writes and the delete commit together,
	// under the same guard (the message unfinished and leased to this
	// instance), so exactly-once effects, per-key order, leases and crash
	// recovery are as without it. What the queue gives up is every record of
	// its succeeded messages: Stats counts none, an archiver has none to move
	// to history, Replay and the admin surface find none, and an id or
	// identity is unique only among the messages still kept — a producer that
	// re-enqueues by a source's id (EnqueueParams.ID: insert if absent) would
	// insert a succeeded message again. A message bound to an identity
	// (enqueued with one, or bound from Decoded.Identity) is kept as
	// SUCCEEDED, so identity dedupe holds; SKIPPED and DEAD messages are kept
	// as ever. Use it for a queue whose producer has its own record of what
	// it released (the shipsync shore's inbox and streams) and whose consumer
	// keeps its own evidence of each outcome. Refused with AckIntent (the
	// acknowledgement scan reads the terminal rows) and in ModeFIFO. Default
	// false.
	DeleteSucceeded bool
	// Watermarked (ModeFIFO only) refuses a head whose id is above the queue
	// cursor's watermark: such a row was registered directly and taking it would
	// overtake smaller ids not yet enqueued (seed 000 §5.1 step 2). Without a cursor
	// nothing is taken. Default false.
	Watermarked bool
	// BatchSize is how many messages one claim takes (per-key, unordered).
	// Default BatchSizeDefault (100).
	BatchSize int
	// Workers is how many messages the per-key and unordered modes process at
	// once. Default WorkersDefault (4). ModeFIFO always uses one goroutine.
	Workers int
	// LeaseDuration is how long a claim leases a message to this instance
	// (per-key, unordered) without renewal. While a claimed message is in
	// flight — waiting for a worker or in its handler — the engine renews its
	// lease every LeaseDuration/3 of Clock time (one statement for all of
	// them), so a handler may run longer than LeaseDuration: the two are
	// independent, and LeaseDuration only needs to exceed the longest stall of
	// the renewal (it survives two thirds of LeaseDuration). It is also how
	// long the messages of an instance that died stay claimed by it, unless a
	// restart with the same stable InstanceID releases them at once. The
	// renewal runs outside the handlers' transactions: give a PostgreSQL pool
	// at least Workers+2 connections (workers, claim, renewal).
	// Correctness does not rest on it: the terminal write checks the lease
	// owner inside the business transaction, so when a lease passes to another
	// instance only one instance's effects can commit (the renewal then tells
	// the engine, which cancels the handler with ErrLeaseLost); a short lease
	// only wastes work. Default LeaseDurationDefault (15s).
	LeaseDuration time.Duration
	// PollInterval is how long a started engine waits on Clock between idle
	// rounds (a FIFO head due earlier wakes it earlier; Enqueue wakes it at once).
	// Default PollIntervalDefault (1s).
	PollInterval time.Duration
	// WakeDelay is how long a started engine waits on Clock, once woken by a
	// Notify (an Enqueue), before it claims: messages enqueued meanwhile join
	// the same claim and transaction batches. Without it, an engine that keeps
	// up with a steady stream wakes for every few messages and pays its
	// per-batch statements and commit for each few; with it, each message
	// waits up to WakeDelay longer. Rounds that follow a busy round, and
	// rounds woken by PollInterval, do not wait. Default 0 (claim at once).
	WakeDelay time.Duration
	// HandlerTimeout bounds one handler call on Clock: when it passes, the
	// handler's ctx is cancelled and the attempt counts as Retry(TIMEOUT) whatever
	// the handler returns. Default HandlerTimeoutDefault (30s).
	HandlerTimeout time.Duration
	// FIFOBatch (ModeFIFO only) is how many contiguous ready heads one transaction
	// may carry. The batch runs optimistically, without savepoints, and its
	// terminal states are written in one statement. When a handler fails the
	// transaction is rolled back, the messages before it run again (their
	// handlers are called a second time, see Handler) and commit, and the failure
	// is recorded alone, so a failure never undoes or blocks more than its own
	// message. Default FIFOBatchDefault (1: a transaction per message); at most
	// FIFOBatchMax.
	FIFOBatch int
	// TxBatch (ModePerKey and ModeUnordered) is how many claimed messages one
	// transaction may carry; they are messages of different keys, never two of
	// one key. The batch runs optimistically, without savepoints, and its
	// terminal states are written in one statement guarded per message by state
	// and lease owner, so a batch costs one commit instead of one per message.
	// When a handler fails the transaction is rolled back, that failure is
	// recorded alone (its handler is not called again) and the other messages run
	// again, each under a savepoint (their handlers are called a second time, see
	// Handler); a message whose lease passed to another instance drops only its
	// own decision. Default TxBatchDefault (1: a transaction per message); at
	// most TxBatchMax. ModeFIFO batches with FIFOBatch instead.
	TxBatch int
	// InstanceID names this engine as the owner of its leases (per-key,
	// unordered). Default a random id (host/pid/random), fresh for every
	// engine: engines of one process never collide, but a restarted process
	// cannot recognise its predecessor's leases and waits for them to expire
	// (LeaseDuration plus a quarter). Set a stable id — one per live engine of
	// the queue, e.g. a pod or host name — and Start releases at once the
	// leases a dead earlier incarnation left behind. Start enforces "one live
	// engine per id" with a store lock and refuses a duplicate (see
	// Engine.Start). ModeFIFO leases nothing: there it only names the engine
	// in logs.
	InstanceID string
	// Clock is the only source of time. Default relayclock.System{}.
	Clock relaytype.Clock
	// Logger receives structured logs (never payloads). Default slog.Default().
	Logger *slog.Logger
	// Registerer, when set, receives the engine's metrics (see "Metrics" in the
	// package doc). Engines of several queues may share one Registerer.
	// Default nil: no metrics.
	Registerer prometheus.Registerer
}

// withDefaults returns a copy of c with every zero field defaulted.
func (c Config) withDefaults() Config {
	c.MaxAttempts = cmp.Or(c.MaxAttempts, MaxAttemptsDefault)
	c.Backoff = backoff.WithDefaults(c.Backoff, c.MaxAttempts)
	if c.ReplayableClasses == nil {
		c.ReplayableClasses = ReplayableClassesDefault
	}
	c.ReplayableClasses = slices.Clone(c.ReplayableClasses)
	if c.DeadClasses == nil {
		c.DeadClasses = DeadClassesDefault
	}
	c.DeadClasses = slices.Clone(c.DeadClasses)
	c.IgnoreRules = slices.Clone(c.IgnoreRules)
	c.BatchSize = cmp.Or(c.BatchSize, BatchSizeDefault)
	c.Workers = cmp.Or(c.Workers, WorkersDefault)
	c.LeaseDuration = cmp.Or(c.LeaseDuration, LeaseDurationDefault)
	c.PollInterval = cmp.Or(c.PollInterval, PollIntervalDefault)
	c.HandlerTimeout = cmp.Or(c.HandlerTimeout, HandlerTimeoutDefault)
	c.FIFOBatch = cmp.Or(c.FIFOBatch, FIFOBatchDefault)
	c.TxBatch = cmp.Or(c.TxBatch, TxBatchDefault)
	common := service.Common{Clock: c.Clock, Logger: c.Logger}.Defaults()
	c.Clock, c.Logger = common.Clock, common.Logger
	return c
}

// validate checks a defaulted Config and names the first bad field.
func (c *Config) validate() error {
	bad := service.Invalid("Config")
	switch {
	case c.Queue == "":
		return bad("Queue", "required")
	case c.Mode != ModeFIFO && c.Mode != ModePerKey && c.Mode != ModeUnordered:
		return bad("Mode", "unknown mode %d", int(c.Mode))
	case c.MaxAttempts < 1:
		return bad("MaxAttempts", "%d < 1", c.MaxAttempts)
	case backoff.TooLong(c.Backoff, c.MaxAttempts):
		// seed 000 §9.1: a schedule with a level that never fires must not
		// pass the start-up check.
		return bad("Backoff", "%s", backoff.TooLongReason(c.Backoff, c.MaxAttempts))
	case c.BatchSize < 1:
		return bad("BatchSize", "%d < 1", c.BatchSize)
	case c.Workers < 1:
		return bad("Workers", "%d < 1", c.Workers)
	case c.LeaseDuration <= 0:
		return bad("LeaseDuration", "%s <= 0", c.LeaseDuration)
	case c.PollInterval <= 0:
		return bad("PollInterval", "%s <= 0", c.PollInterval)
	case c.WakeDelay < 0 || c.WakeDelay >= c.PollInterval:
		return bad("WakeDelay", "%s outside [0, PollInterval %s)", c.WakeDelay, c.PollInterval)
	case c.HandlerTimeout <= 0:
		return bad("HandlerTimeout", "%s <= 0", c.HandlerTimeout)
	case c.FIFOBatch < 1 || c.FIFOBatch > FIFOBatchMax:
		return bad("FIFOBatch", "%d outside [1, %d]", c.FIFOBatch, FIFOBatchMax)
	case c.Watermarked && c.Mode != ModeFIFO:
		return bad("Watermarked", "only ModeFIFO takes heads by watermark")
	case c.FIFOBatch > 1 && c.Mode != ModeFIFO:
		return bad("FIFOBatch", "only ModeFIFO batches heads")
	case c.TxBatch < 1 || c.TxBatch > TxBatchMax:
		return bad("TxBatch", "%d outside [1, %d]", c.TxBatch, TxBatchMax)
	case c.TxBatch > 1 && c.Mode == ModeFIFO:
		return bad("TxBatch", "ModeFIFO batches heads with FIFOBatch")
	case c.DeleteSucceeded && c.Mode == ModeFIFO:
		return bad("DeleteSucceeded", "only ModePerKey and ModeUnordered delete what succeeded")
	case c.DeleteSucceeded && c.AckIntent:
		return bad("DeleteSucceeded", "the acknowledgement write-back (AckIntent) needs the terminal rows")
	}
	if msg := backoff.Negative(c.Backoff); msg != "" {
		return bad("Backoff", "%s", msg)
	}
	for _, r := range c.IgnoreRules {
		if _, err := parseIgnoreRule(r); err != nil {
			return bad("IgnoreRules", "%v", err)
		}
	}
	for _, field := range []struct {
		name    string
		classes []relaytype.ErrorClass
	}{{"ReplayableClasses", c.ReplayableClasses}, {"DeadClasses", c.DeadClasses}} {
		for _, cl := range field.classes {
			if _, err := relaytype.ParseErrorClass(string(cl)); err != nil {
				return bad(field.name, "%v", err)
			}
		}
	}
	if slices.Contains(c.DeadClasses, relaytype.ClassExhausted) {
		return bad("DeadClasses", "EXHAUSTED is reached by the attempt limit, not by a class")
	}
	return nil
}

// ignoreRule is a parsed TYPE-STYP or TYPE-* rule.
type ignoreRule struct {
	text       string // as configured; recorded in ignored:<rule>
	typ, styp  string // styp "*" matches any subtype
	isWildcard bool
}

var errRuleShape = errors.New("want TYPE-STYP or TYPE-*")

func parseIgnoreRule(s string) (ignoreRule, error) {
	typ, styp, ok := strings.Cut(strings.TrimSpace(s), "-")
	if !ok || typ == "" || styp == "" || strings.Contains(typ, "*") || (strings.Contains(styp, "*") && styp != "*") {
		return ignoreRule{}, fmt.Errorf("ignore rule %q: %w", s, errRuleShape)
	}
	return ignoreRule{text: s, typ: typ, styp: styp, isWildcard: styp == "*"}, nil
}

// match reports whether kind (TYPE-STYP, or a bare TYPE) falls under the rule,
// case-insensitively (seed 000 §2).
func (r ignoreRule) match(kind string) bool {
	typ, styp, _ := strings.Cut(kind, "-")
	if !strings.EqualFold(typ, r.typ) {
		return false
	}
	return r.isWildcard || strings.EqualFold(styp, r.styp)
}
