// Package relaytype holds the leaf types every relay package shares: message
// states, error classes, the persisted rows, the Clock, and the sentinel errors
// drivers map their failures to. It imports only the standard library.
package relaytype

import (
	"errors"
	"fmt"
	"time"
)

// State is the processing state of a message (seed 000 §3).
type State string

const (
	// StatePending: enqueued, not yet attempted (or replayed). Holds its place in the queue.
	StatePending State = "PENDING"
	// StateFailed: the last attempt failed; waits for its backoff. Not terminal: it still
	// holds the head of a FIFO queue (seed 000 §3).
	StateFailed State = "FAILED"
	// StateSucceeded: terminal; the business effect committed with this state.
	StateSucceeded State = "SUCCEEDED"
	// StateSkipped: terminal; a duplicate (duplicate-of:<id>), an ignored kind
	// (ignored:<rule>), or a message a handler chose not to apply.
	StateSkipped State = "SKIPPED"
	// StateDead: terminal; needs a human (MALFORMED, PROTOCOL, EXHAUSTED …). DEAD is not success.
	StateDead State = "DEAD"
	// StateArchived: not a processing state. A terminal row moved to history leaves
	// this shadow row behind so its identity key and id keep deduplicating
	// (seed 000 §9.3). It never holds a head, is never acknowledged and never counts
	// as backlog.
	StateArchived State = "ARCHIVED"
)

// Terminal reports whether s releases the queue (SUCCEEDED, SKIPPED, DEAD).
func (s State) Terminal() bool {
	return s == StateSucceeded || s == StateSkipped || s == StateDead
}

// Unfinished reports whether s still holds its place in the queue (PENDING, FAILED).
func (s State) Unfinished() bool { return s == StatePending || s == StateFailed }

// Valid reports whether s is one of the defined states.
func (s State) Valid() bool { return s.Terminal() || s.Unfinished() || s == StateArchived }

// ErrorClass classifies why a message failed (seed 000 §2–§3). The class decides
// whether a failure is retried and whether a human may replay it.
type ErrorClass string

const (
	// ClassNone is the empty class of a message that has not failed.
	ClassNone ErrorClass = ""
	// ClassMalformed: the message itself is invalid (bad XML, raw content missing). Never retried.
	ClassMalformed ErrorClass = "MALFORMED"
	// ClassProtocol: a well-formed message breaks a protocol rule (e.g. a whole-package
	// validation failure). Never retried.
	ClassProtocol ErrorClass = "PROTOCOL"
	// ClassCodec: the decoder could not handle a message a fixed codec could (retried with backoff).
	ClassCodec ErrorClass = "CODEC_ERROR"
	// ClassInfra: a database, network or other infrastructure failure (retried).
	ClassInfra ErrorClass = "INFRA"
	// ClassUnsupported: a kind no handler covers yet (retried, so a deploy can pick it up).
	ClassUnsupported ErrorClass = "UNSUPPORTED"
	// ClassTimeout: the handler ran past its bounded timeout (retried).
	ClassTimeout ErrorClass = "TIMEOUT"
	// ClassInternal: the handler panicked or broke the engine's contract (retried; a bug).
	ClassInternal ErrorClass = "INTERNAL"
	// ClassExhausted: the attempt limit was reached. Overwrites the original class;
	// LastError keeps the cause text (seed 000 §3).
	ClassExhausted ErrorClass = "EXHAUSTED"
)

// KnownClasses lists every class the engine defines, in a stable order.
var KnownClasses = []ErrorClass{ClassMalformed, ClassProtocol, ClassCodec, ClassInfra,
	ClassUnsupported, ClassTimeout, ClassInternal, ClassExhausted}

// ParseErrorClass returns the class named s, or an error naming s.
func ParseErrorClass(s string) (ErrorClass, error) {
	for _, c := range KnownClasses {
		if string(c) == s {
			return c, nil
		}
	}
	return ClassNone, fmt.Errorf("relay: unknown error class %q", s)
}

// Clock is the only source of time in engine and domain code (seed 000 §5.1).
// Implementations must be safe for concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives once d has passed on this clock.
	After(d time.Duration) <-chan time.Time
}

// Message is one row of the durable inbox (seed 000 §1.2 PROC_STATE). Zero
// time.Time values stand for SQL NULL.
type Message struct {
	// Queue names the queue the message belongs to; ids are unique per queue.
	Queue string
	// ID orders the queue. For a sequence source it is the foreign row's id
	// (MSG_ID = CMINMSGS.ID); for Enqueue it is allocated by the store.
	ID int64
	// Key is the ordering key of the per-key mode ("" when unused).
	Key string
	// State is the processing state.
	State State
	// Attempts counts failed attempts; incremented once per failure, where it happens
	// (a retried failure, or a DEAD written at once for a class never retried).
	Attempts int
	// NextAttemptAt is when a FAILED message may be retried (zero: at once).
	NextAttemptAt time.Time
	// ErrorClass and LastError describe the last failure (or the skip reason in LastError).
	ErrorClass ErrorClass
	LastError  string
	// IdentityKey is the business identity, bound once after decoding ("" = not yet bound).
	IdentityKey string
	// Payload is the message body when the engine stores it (nil when the handler reads
	// the raw content from the source itself).
	Payload []byte
	// ReceivedAt is copied from the source's clock; may be zero (NULL); display and
	// reconciliation only (seed 000 §1.2).
	ReceivedAt time.Time
	// EnqueuedAt is the local enqueue time; never zero; the only basis of age checks.
	EnqueuedAt time.Time
	// UpdatedAt is the time of the last state change.
	UpdatedAt time.Time

	// Acknowledgement write-back facts (seed 000 §6). AckNextAt non-zero means an
	// acknowledgement is still owed; AckAt non-zero means it was confirmed;
	// AckAbandonedAt non-zero means automatic retries stopped (not acknowledged!).
	AckNextAt        time.Time
	AckAt            time.Time
	AckAttempts      int
	AckAbandonedAt   time.Time
	AckAbandonReason string

	// LeaseOwner and LeaseExpiresAt hold a claim of the per-key and unordered modes.
	LeaseOwner     string
	LeaseExpiresAt time.Time
}

// Cursor is the intake watermark of a sequence source (seed 000 §1.2 INBOX_CURSOR).
type Cursor struct {
	Queue string
	// Watermark W: every source id in (start, W] has been persisted locally.
	Watermark int64
	// HoleSince is when the hole at W+1 was first observed (zero: no hole timing).
	HoleSince time.Time
	// SeededAt is when cutover seeding stored the first watermark (zero: not seeded
	// explicitly — which does not mean "never consumed", seed 000 §1.2).
	SeededAt time.Time
	// SeedMode records how the watermark was seeded (min, zero, max, id).
	SeedMode string
	// UpdatedAt is the time of the last save.
	UpdatedAt time.Time
}

// Hole is a permanent hole: a source id that never became visible within the max
// commit delay and was released (seed 000 §4.1 step 4).
type Hole struct {
	Queue       string
	ID          int64
	FirstSeenAt time.Time
	ReleasedAt  time.Time
	// FoundAt is when the intake found that the hole's row committed after
	// all (a late row, committed after the max commit delay); zero: not found.
	FoundAt time.Time
	// IngestedAt is when an operator ingested the late row as a message,
	// and IngestedID that message's id; zero: not ingested. Never automatic.
	IngestedAt time.Time
	IngestedID int64
}

// Sentinel errors. Drivers map their own errors to these at the boundary; callers
// test with errors.Is.
var (
	// ErrNotFound: the row asked for does not exist.
	ErrNotFound = errors.New("relay: not found")
	// ErrConflict: a unique constraint or a state guard refused the write.
	ErrConflict = errors.New("relay: conflict")
	// ErrSeedRefused: cutover seeding was asked for on a queue that already has a
	// watermark or messages (seed 000 §4.3).
	ErrSeedRefused = errors.New("relay: cutover seeding refused: the queue already has a watermark or messages")
	// ErrLocked: another instance holds the queue's exclusive lock.
	ErrLocked = errors.New("relay: queue is locked by another instance")
	// ErrSchemaOutdated: the database schema is older than this binary expects.
	ErrSchemaOutdated = errors.New("relay: database schema is outdated; run migrations")
	// ErrTransient marks infrastructure failures worth retrying (connection lost,
	// serialization failure, deadlock, timeout).
	ErrTransient = errors.New("relay: transient failure")
)

// ClassError attaches an error class to an error. Decoders return one (via
// Classify) to say whether a failure is MALFORMED (dead at once) or
// CODEC_ERROR (retried).
type ClassError struct {
	// Class is the error class recorded with the failure.
	Class ErrorClass
	// Err is the underlying error; its text becomes the message's LastError.
	Err error
}

// Error returns "<CLASS>: <err>".
func (e *ClassError) Error() string {
	if e.Err == nil {
		return string(e.Class)
	}
	return fmt.Sprintf("%s: %v", e.Class, e.Err)
}

// Unwrap returns the wrapped error.
func (e *ClassError) Unwrap() error { return e.Err }

// Classify returns err tagged with class (nil when err is nil).
func Classify(class ErrorClass, err error) error {
	if err == nil {
		return nil
	}
	return &ClassError{Class: class, Err: err}
}

// ClassOf returns the class of the first ClassError in err's chain, or def
// when there is none.
func ClassOf(err error, def ErrorClass) ErrorClass {
	var ce *ClassError
	if errors.As(err, &ce) && ce.Class != ClassNone {
		return ce.Class
	}
	return def
}

// EventType says whether an outbox or latest-state event carries a new state
// or removes it. The engine, the stores and the sinks share these values.
type EventType string

const (
	// EventUpsert carries a payload: the key's new state or a change notice.
	EventUpsert EventType = "UPSERT"
	// EventTombstone removes the key's state; it has no payload, and sinks that
	// support it deliver a null value (a Kafka tombstone on a compacted topic).
	EventTombstone EventType = "TOMBSTONE"
)
