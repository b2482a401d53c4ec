package relaydriver

import (
	"time"

	"github.com/relayhq/relay/relaytype"
)

// MessageInsertParams is one message to insert if absent.
type MessageInsertParams struct {
	Queue string
	ID    int64 // 0: allocate
	Key   string
	// Identity is the business identity the message is inserted bound to
	// ("": none, bound later by a decoder if at all). A message of the
	// queue already holding it makes the input a duplicate (see
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
	Queue   string
	AfterID int64 // 0 from the start
	Limit   int
}

// MessageBindIdentityParams binds a business identity.
type MessageBindIdentityParams struct {
	Queue    string
	ID       int64
	Identity string
}

// MessageBindIdentityResult is the owner of the identity after binding.
type MessageBindIdentityResult struct {
	OwnerID  int64
	Identity string
}

// MessageBindIdentitiesParams binds business identities to several messages
// of one queue, in input order.
type MessageBindIdentitiesParams struct {
	Queue string
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
	Queue      string
	ID         int64
	State      relaytype.State // SUCCEEDED, SKIPPED or DEAD
	ErrorClass relaytype.ErrorClass
	LastError  string // error text, or the skip reason (duplicate-of:<id>, ignored:<rule>); stored as StoredText bounds it
	// AckIntent records that an acknowledgement is owed (AckNextAt = Now).
	AckIntent bool
	// LeaseOwner, when set, requires the message to be leased to this owner.
	LeaseOwner string
	// CountAttempt adds one to Attempts in the same UPDATE: the terminal state
	// ends a processing attempt that failed (a DEAD written at once for a
	// non-retried class), so Attempts counts it as MessageFail would. False for
	// SUCCEEDED/SKIPPED and for a DEAD written without an attempt.
	CountAttempt bool
	// Delete removes the message's row instead of writing State, under the
	// same guard: the message is finished and gone (a later lookup of its id
	// finds nothing, and an insert of its id or identity is no longer a
	// duplicate). Only for State SUCCEEDED, without AckIntent or
	// CountAttempt. See relay.Config.DeleteSucceeded.
	Delete bool
	Now    time.Time
}

// MessageFailParams records a failed attempt.
type MessageFailParams struct {
	Queue         string
	ID            int64
	ErrorClass    relaytype.ErrorClass
	LastError     string // stored as StoredText bounds it
	NextAttemptAt time.Time
	LeaseOwner    string
	Now           time.Time
}

// MessageExhaustParams exhausts a FAILED message.
type MessageExhaustParams struct {
	Queue       string
	ID          int64
	MaxAttempts int
	AckIntent   bool
	Now         time.Time
}

// MessageClaimParams leases ready messages.
type MessageClaimParams struct {
	Queue      string
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
	Queue string
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
	Queue string
	// Owner is the (dead) lease owner whose leases are cleared. Required.
	Owner string
}

// MessageReplayParams selects messages to replay.
type MessageReplayParams struct {
	Queue   string
	Classes []relaytype.ErrorClass // required; only these classes move
	IDs     []int64                // optional filter
	Now     time.Time
}

// MessageStats is a queue aggregate.
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

// NewMessageStats returns stats with every state, ARCHIVED included, counted
// zero: the drivers fill in the states their aggregate finds.
func NewMessageStats() *MessageStats {
	st := &MessageStats{Counts: make(map[relaytype.State]int64, 6)}
	for _, s := range []relaytype.State{relaytype.StatePending, relaytype.StateFailed, relaytype.StateSucceeded,
		relaytype.StateSkipped, relaytype.StateDead, relaytype.StateArchived} {
		st.Counts[s] = 0
	}
	return st
}
